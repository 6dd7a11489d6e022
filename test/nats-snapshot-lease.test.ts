/**
 * The snapshot lease against a real nats-server (snapshot-lease.ts): a lease left by a router
 * that died blocks snapshots until its time to live ends, a release never deletes a lease
 * another router took after this one's expired, and a router's own snapshot gives it back.
 * (Two live routers snapshotting at once: test/nats-snapshot-race.test.ts.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { SnapshotLease } from '../src/nats/snapshot-lease.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { kvNames } from '../src/nats/names.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The leases of these tests: each test checks a lease is still held a few NATS round trips
 * after it was taken, so a stall as long as the lease (of this process or of nats-server)
 * fails it. 3 s, not the 1 s minimum, for a loaded 2-core host; it costs 2 s per expiry waited for.
 */
const LEASE_MS = 3_000;

/** Retries `check` every 100 ms until it holds (a liveness bound, not a speed check). */
async function until(check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(100);
  }
}

describe.skipIf(!installed)('snapshot lease', () => {
  const env = useNatsServer();

  /** A publisher and a router on namespace `ns` with this lease, once the router acked `events` events. */
  async function routerWith(ns: string, snapshotLeaseMs: number, events: number): Promise<{ sub: KvEventSubscriber; last: number }> {
    const pub = await KvEventPublisher.connect({ servers: env.server.url, namespace: ns, component: 'c' });
    closers.push(() => pub.close());
    const indexer = await ShardedIndexer.create({ shards: 0, blockSize: 16, keepWarmMs: 0 });
    const sub = await KvEventSubscriber.start({ indexer, namespace: ns, component: 'c', servers: env.server.url, snapshotThreshold: null, snapshotLeaseMs });
    closers.push(() => indexer.close(), () => sub.close());
    let last = 0;
    for (let i = 0; i < events; i++) {
      const e: RouterEvent = { workerId: 7n, event: { eventId: BigInt(i), data: { type: 'stored', parentHash: null, blocks: [{ blockHash: 100n + BigInt(i), tokensHash: 900n + BigInt(i) }] } } };
      last = await pub.publish(e);
    }
    await sub.waitForSeq(last);
    const jsm = await env.nc.jetstreamManager();
    await until(async () => (await jsm.consumers.info(kvNames(ns, 'c').stream, sub.consumerName)).ack_floor.stream_seq >= last);
    return { sub, last };
  }

  it('a lease left by a dead router defers snapshots until it expires; a snapshot gives its own lease back', async () => {
    const names = kvNames('lease-dead', 'c');
    const { sub, last } = await routerWith('lease-dead', LEASE_MS, 20);
    const jsm = await env.nc.jetstreamManager();

    // A router that took the lease and died: its key stays until the bucket's max age.
    const dead = await env.nc.jetstream().views.kv(names.leaseBucket, { ttl: LEASE_MS, history: 1 });
    await dead.create('snapshot', new TextEncoder().encode('a router that died'));
    expect(await sub.snapshotNow()).toBeNull();
    expect(sub.stats()).toMatchObject({ snapshots: 0, snapshotsDeferred: 1 });
    expect((await jsm.streams.info(names.stream)).state.first_seq).toBe(1);

    // After its time to live the key is gone and the snapshot goes.
    await until(async () => (await dead.get('snapshot')) === null);
    expect(await sub.snapshotNow()).toMatchObject({ streamSeq: last, uploaded: true, purgedThrough: last });
    // And gave its lease back: another router can take it at once.
    const next = new SnapshotLease(env.nc.jetstream(), names.leaseBucket, LEASE_MS, 'another router', null);
    const grant = await next.acquire();
    expect(grant).toMatchObject({ revision: expect.any(Number) });
    await next.release(grant);
  });

  it('a release after the lease expired leaves the lease another router took meanwhile', async () => {
    const bucket = kvNames('lease-expired', 'c').leaseBucket;
    const js = env.nc.jetstream();
    const slow = new SnapshotLease(js, bucket, LEASE_MS, 'slow router', null);
    const other = new SnapshotLease(js, bucket, LEASE_MS, 'other router', null);
    const first = await slow.acquire();
    expect(first).toMatchObject({ revision: expect.any(Number) });
    expect(await other.acquire()).toBe('busy');
    // The slow router outlives its lease; the other takes it once it expired.
    let second: Awaited<ReturnType<SnapshotLease['acquire']>> = 'busy';
    await until(async () => (second = await other.acquire()) !== 'busy');
    expect(second).toMatchObject({ revision: expect.any(Number) });
    await slow.release(first); // must not delete the other router's lease
    expect(await slow.acquire()).toBe('busy');
    await other.release(second);
    const third = await slow.acquire();
    expect(third).toMatchObject({ revision: expect.any(Number) });
    await slow.release(third);
  });

  it('snapshotLeaseMs 0 takes no lease: a held one does not defer', async () => {
    const names = kvNames('lease-off', 'c');
    const { sub, last } = await routerWith('lease-off', 0, 1);
    const held = await env.nc.jetstream().views.kv(names.leaseBucket, { ttl: 60_000, history: 1 });
    await held.create('snapshot', new TextEncoder().encode('another router'));
    expect(await sub.snapshotNow()).toMatchObject({ streamSeq: last, uploaded: true });
    expect(sub.stats().snapshotsDeferred).toBe(0);
  });

  it('rejects a lease between 0 and 1,000 ms', async () => {
    const indexer = await ShardedIndexer.create({ shards: 0, blockSize: 16, keepWarmMs: 0 });
    closers.push(() => indexer.close());
    await expect(KvEventSubscriber.start({ indexer, namespace: 'x', component: 'c', servers: env.server.url, snapshotLeaseMs: 500 })).rejects.toMatchObject({
      code: 'KVX_INVALID_OPTION',
      message: expect.stringContaining('snapshotLeaseMs'),
    });
  });
});
