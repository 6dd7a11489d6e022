/**
 * A nats-server that goes away while a router starts, and comes back: the start-up steps
 * (JetStream, stream, snapshot, consumer) retry through the outage and the router then
 * consumes. It used to fail on the first timed-out request (`kvindex serve` exited 1, found by
 * fuzzing), though a running router rides out any outage. The outage outlasts nats.js's 5 s
 * request timeout, so a step does time out; the bounds below are liveness bounds only.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { connectNats } from '../src/nats/connect.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { NATS_SKIP_MESSAGE, NatsServer, natsServerInstalled } from './support/nats-server.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);
const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

describe.skipIf(!installed)('start-up through a NATS outage', () => {
  it('retries its JetStream steps until the server is back, then consumes', async () => {
    const server = await NatsServer.start();
    closers.push(() => server.stop());
    const nc = await connectNats({ servers: server.url });
    closers.push(() => nc.close());
    const indexer = await ShardedIndexer.create({ shards: 0, blockSize: 16, keepWarmMs: 0 });
    closers.push(() => indexer.close());
    await server.kill();
    const starting = KvEventSubscriber.start({ indexer, namespace: 'outage', component: 'c', connection: nc, snapshotThreshold: null });
    let settled = false;
    void starting.then(() => (settled = true), () => (settled = true));
    await new Promise((r) => setTimeout(r, 6_000));
    expect(settled).toBe(false); // still trying, not failed
    await server.restart();
    const sub = await starting;
    closers.push(() => sub.close());
    const pub = await KvEventPublisher.connect({ servers: server.url, namespace: 'outage', component: 'c' });
    closers.push(() => pub.close());
    const seq = await pub.publish({ workerId: 7n, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: [{ blockHash: 1n, tokensHash: 2n }] } } });
    await sub.waitForSeq(seq);
    expect((await indexer.findMatches([2n])).scores).toEqual(new Map([[7n, 1]]));
  }, 60_000);
});
