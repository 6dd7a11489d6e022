/**
 * Delivery tracking against a real server: a burst of events right after a router starts is
 * consumed without a "lost in transit" alarm and without recreating the consumer, over several
 * fresh runs (the issue measured a false alarm in 7 of 8 runs; this machine did not reproduce it
 * with the old code either, so the runs guard the behaviour rather than replay the bug); a real
 * loss (another client took deliveries from the router's consumer) recreates the consumer and
 * names the sequences; a message deleted from the stream is reported as such.
 */

import { describe, expect, it } from 'vitest';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples } from './support/compare.js';
import { generateStream } from './support/event-gen.js';
import { captureLog } from './support/log-capture.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

const RUNS = 6;

describe.skipIf(!installed)('delivery tracking under a burst', () => {
  const env = useNatsServer();

  it(`raises no loss alarm and recreates no consumer in ${RUNS} fresh runs of 3,000 events`, async () => {
    const stream = generateStream(31, 3000);
    const events = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    const reference = new RadixTree();
    for (const e of events) reference.applyEvent(e);
    const expected = dumpTuples(reference.dumpEvents());
    let alarms = 0;
    let resets = 0;
    for (let run = 0; run < RUNS; run++) {
      const ns = `burst${run}`;
      const log = captureLog('info');
      const ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
      const pub = await KvEventPublisher.connect({ namespace: ns, component: 'backend', servers: env.server.url });
      const sub = await KvEventSubscriber.start({ indexer: ix, namespace: ns, component: 'backend', servers: env.server.url, logger: log.logger });
      try {
        const { lastSeq } = await pub.publishAll(events);
        await sub.waitForSeq(lastSeq, 60_000);
        alarms += log.find('lost in transit').length;
        resets += sub.stats().consumerResets;
        expect(sub.stats().missedSeqs).toBe(0);
        expect(dumpTuples(await ix.dumpEvents())).toEqual(expected);
      } finally {
        await sub.close();
        await pub.close();
        await ix.close();
      }
    }
    expect({ alarms, resets }).toEqual({ alarms: 0, resets: 0 });
  }, 300_000);

  it('recreates the consumer on a real loss (deliveries taken by another client) and names the lost sequences', async () => {
    const events = generateStream(33, 200).ops.flatMap((op) => (op.kind === 'event' ? [op.event] : [])).slice(0, 20);
    const reference = new RadixTree();
    for (const e of events) reference.applyEvent(e);
    const log = captureLog('info');
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    const pub = await KvEventPublisher.connect({ namespace: 'gaplost', component: 'backend', servers: env.server.url });
    const sub = await KvEventSubscriber.start({ indexer: ix, namespace: 'gaplost', component: 'backend', servers: env.server.url, logger: log.logger, consumerName: 'victim' });
    try {
      const first = await pub.publishAll(events.slice(0, 10));
      await sub.waitForSeq(first.lastSeq, 60_000);
      await sub.pause();
      const second = await pub.publishAll(events.slice(10));
      // Another client pulls three deliveries from the router's own consumer and never acks them.
      const js = env.nc.jetstream();
      const thief = await (await js.consumers.get(pub.names.stream, 'victim')).fetch({ max_messages: 3, expires: 5_000 });
      const stolen: number[] = [];
      for await (const m of thief) {
        stolen.push(m.seq);
        if (stolen.length === 3) break;
      }
      expect(stolen).toEqual([first.lastSeq + 1, first.lastSeq + 2, first.lastSeq + 3]);
      sub.resume();
      await sub.waitForSeq(second.lastSeq, 60_000);
      expect(sub.stats()).toMatchObject({ lostDeliveries: 3, consumerResets: 1, applied: 20, duplicates: 0 });
      expect(log.find('lost in transit')[0]).toMatchObject({ lostSeqs: stolen });
      expect(dumpTuples(await ix.dumpEvents())).toEqual(dumpTuples(reference.dumpEvents()));
    } finally {
      await sub.close();
      await pub.close();
      await ix.close();
    }
  }, 120_000);

  it('reports a message deleted from the stream as missing from it, not as purged or lost in transit', async () => {
    const stream = generateStream(32, 40);
    const events = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : [])).slice(0, 5);
    const log = captureLog('info');
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    const pub = await KvEventPublisher.connect({ namespace: 'gapdel', component: 'backend', servers: env.server.url });
    const { lastSeq } = await pub.publishAll(events);
    const jsm = await env.nc.jetstreamManager();
    expect(await jsm.streams.deleteMessage(pub.names.stream, lastSeq - 2)).toBe(true);
    const sub = await KvEventSubscriber.start({ indexer: ix, namespace: 'gapdel', component: 'backend', servers: env.server.url, logger: log.logger });
    try {
      await sub.waitForSeq(lastSeq, 60_000);
      expect(sub.stats()).toMatchObject({ missedSeqs: 1, lostDeliveries: 0, consumerResets: 0, applied: 4 });
      expect(log.find('missing from the stream')).toHaveLength(1);
      expect(log.find('missing from the stream')[0]).toMatchObject({ from: lastSeq - 2, to: lastSeq - 2 });
      expect(log.find('purged or expired')).toHaveLength(0);
      expect(log.find('lost in transit')).toHaveLength(0);
    } finally {
      await sub.close();
      await pub.close();
      await ix.close();
    }
  }, 120_000);
});
