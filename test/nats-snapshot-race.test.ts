/**
 * Two routers snapshotting at once, against a real nats-server: router B dumps at sequence 100
 * and its upload is slow (held inside the nats.js object store client: the only simulated
 * part), and router A snapshots at 150 meanwhile.
 * - Without the snapshot lease: A purges through 150, then B's older snapshot lands. A new
 *   router C must still restore every event: once it restored B's snapshot (100), resumed at
 *   151 and missed 101-150 while reporting ready (found by fuzzing).
 * - With it (the default): A finds the lease held and skips; after B's snapshot, A's goes.
 *
 * And a router starting while another purges: router C restored A's snapshot, and before C's
 * durable consumer existed (held inside the nats.js manager client: again the only simulated
 * part) A snapshotted and purged past it. C must restore the newer snapshot rather than wait
 * for the purged events for good (a CI run's two-router test hung on exactly that).
 */
import { connect, type JetStreamClient, type NatsConnection, type ObjectStore } from 'nats';
import { afterEach, describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { storedSnapshotSeq } from '../src/nats/snapshot.js';
import { kvNames } from '../src/nats/names.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { captureLog } from './support/log-capture.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

interface Gate {
  /** Uploads wait for it while set. */
  held: Promise<void> | null;
  /** Called when an upload starts waiting. */
  onWait: () => void;
}

/** A connection whose object store uploads wait while `gate.held` is set. */
async function slowUploads(url: string, gate: Gate): Promise<NatsConnection> {
  const nc = await connect({ servers: url });
  const jetstream = nc.jetstream.bind(nc);
  nc.jetstream = (...args: Parameters<NatsConnection['jetstream']>): JetStreamClient => {
    const js = jetstream(...args);
    const views = js.views;
    const os = views.os.bind(views);
    views.os = async (...a: Parameters<typeof os>): Promise<ObjectStore> => {
      const store = await os(...a);
      const put = store.putBlob.bind(store);
      store.putBlob = async (...p: Parameters<typeof put>) => {
        if (gate.held !== null) {
          gate.onWait();
          await gate.held;
        }
        return put(...p);
      };
      return store;
    };
    Object.defineProperty(js, 'views', { value: views }); // a getter: each read made new views
    return js;
  };
  return nc;
}

/** A connection whose durable consumer creations wait while `gate.held` is set. */
async function slowConsumers(url: string, gate: Gate): Promise<NatsConnection> {
  const nc = await connect({ servers: url });
  const manager = nc.jetstreamManager.bind(nc);
  nc.jetstreamManager = async (...args: Parameters<NatsConnection['jetstreamManager']>) => {
    const jsm = await manager(...args);
    const add = jsm.consumers.add.bind(jsm.consumers);
    jsm.consumers.add = async (...a: Parameters<typeof add>) => {
      if (gate.held !== null) {
        gate.onWait();
        await gate.held;
      }
      return add(...a);
    };
    return jsm;
  };
  return nc;
}

describe.skipIf(!installed)('concurrent snapshots', () => {
  const env = useNatsServer();

  it.each([
    ['without the lease (snapshotLeaseMs 0)', 0],
    ['with the lease (default)', undefined],
  ])('an older snapshot uploaded late never leaves the store short of purged events, %s', async (_how, leaseMs) => {
    const url = env.server.url;
    const ns = leaseMs === 0 ? 'snaprace' : 'snaprace-lease';
    const model = new RadixTree();
    let eventId = 0n;
    const ev = (i: number): RouterEvent => ({ workerId: 1n + BigInt(i % 3), event: { eventId: eventId++, data: { type: 'stored', parentHash: null, blocks: [{ blockHash: 1000n + BigInt(i), tokensHash: 5000n + BigInt(i) }] } } });
    const pub = await KvEventPublisher.connect({ servers: url, namespace: ns, component: 'c' });
    closers.push(() => pub.close());
    const publish = async (from: number, to: number): Promise<number> => {
      let last = 0;
      for (let i = from; i < to; i++) {
        const e = ev(i);
        last = await pub.publish(e);
        model.applyEvent(e);
      }
      return last;
    };
    const router = async (name: string, connection?: NatsConnection): Promise<{ indexer: ShardedIndexer; sub: KvEventSubscriber }> => {
      const indexer = await ShardedIndexer.create({ shards: 0, blockSize: 16, keepWarmMs: 0 });
      const sub = await KvEventSubscriber.start({
        indexer, namespace: ns, component: 'c', ...(connection ? { connection } : { servers: url }), snapshotThreshold: null, consumerName: name,
        ...(leaseMs === undefined ? {} : { snapshotLeaseMs: leaseMs }),
      });
      closers.push(() => indexer.close(), () => sub.close());
      return { indexer, sub };
    };
    const gate: Gate = { held: null, onWait: () => undefined };
    const ncB = await slowUploads(url, gate);
    closers.push(() => ncB.close());
    const a = await router('router-a');
    const b = await router('router-b', ncB);

    let last = await publish(0, 100);
    await a.sub.waitForSeq(last);
    await b.sub.waitForSeq(last);
    let release = (): void => undefined;
    gate.held = new Promise((r) => {
      release = r;
    });
    const waiting = new Promise<void>((r) => {
      gate.onWait = r;
    });
    const snapB = b.sub.snapshotNow(); // dumps at 100; its upload waits
    await waiting;
    last = await publish(100, 150);
    await a.sub.waitForSeq(last);
    await b.sub.waitForSeq(last);
    // Both ack floors must reach 150 for A to purge that far (a liveness bound only).
    const floorsAt = async (seq: number): Promise<boolean> => {
      const jsm = await env.nc.jetstreamManager();
      const consumers = await jsm.consumers.list(kvNames(ns, 'c').stream).next();
      return consumers.every((c) => c.ack_floor.stream_seq >= seq);
    };
    for (let i = 0; i < 500 && !(await floorsAt(last)); i++) await new Promise((r) => setTimeout(r, 20));
    const snapA = await a.sub.snapshotNow();
    const jsm = await env.nc.jetstreamManager();
    if (leaseMs === 0) {
      expect(snapA).toMatchObject({ streamSeq: 150, purgedThrough: 150 });
      gate.held = null;
      release();
      expect(await snapB).toMatchObject({ streamSeq: 100 });
    } else {
      // B holds the lease: A skips, dumping, uploading and purging nothing.
      expect(snapA).toBeNull();
      expect(a.sub.stats()).toMatchObject({ snapshots: 0, snapshotsDeferred: 1 });
      expect((await jsm.streams.info(kvNames(ns, 'c').stream)).state.first_seq).toBe(1);
      gate.held = null;
      release();
      expect(await snapB).toMatchObject({ streamSeq: 100, uploaded: true, purgedThrough: 100 });
      // B gave the lease back: A's snapshot goes now.
      expect(await a.sub.snapshotNow()).toMatchObject({ streamSeq: 150, uploaded: true, purgedThrough: 150 });
    }

    // The store covers every purged event again, and a new router restores all of them.
    expect(await storedSnapshotSeq(env.nc.jetstream(), kvNames(ns, 'c'))).toBeGreaterThanOrEqual(150);
    const c = await router('router-c');
    await c.sub.waitForSeq(last);
    const restored = new RadixTree();
    for (const e of await c.indexer.dumpEvents()) restored.applyEvent(e);
    expect(restored.size).toBe(model.size);
    expect(restored.size).toBe(150);
  });

  it('a router whose restore another router purged past restores the newer snapshot', async () => {
    const url = env.server.url;
    const ns = 'startrace';
    const stream = kvNames(ns, 'c').stream;
    const model = new RadixTree();
    const ev = (i: number): RouterEvent => ({ workerId: 1n + BigInt(i % 3), event: { eventId: BigInt(i), data: { type: 'stored', parentHash: null, blocks: [{ blockHash: 1000n + BigInt(i), tokensHash: 5000n + BigInt(i) }] } } });
    const pub = await KvEventPublisher.connect({ servers: url, namespace: ns, component: 'c' });
    closers.push(() => pub.close());
    const publish = async (from: number, to: number): Promise<number> => {
      let last = 0;
      for (let i = from; i < to; i++) {
        last = await pub.publish(ev(i));
        model.applyEvent(ev(i));
      }
      return last;
    };
    const open = async (name: string, more: Partial<Parameters<typeof KvEventSubscriber.start>[0]>): Promise<{ indexer: ShardedIndexer; sub: KvEventSubscriber }> => {
      const indexer = await ShardedIndexer.create({ shards: 0, blockSize: 16, keepWarmMs: 0 });
      closers.push(() => indexer.close());
      const sub = await KvEventSubscriber.start({ indexer, namespace: ns, component: 'c', servers: url, snapshotThreshold: null, consumerName: name, ...more });
      closers.push(() => sub.close());
      return { indexer, sub };
    };
    const a = await open('router-a', {});
    let last = await publish(0, 100);
    await a.sub.waitForSeq(last);
    expect(await a.sub.snapshotNow()).toMatchObject({ streamSeq: 100, purgedThrough: 100 });

    // C restores the snapshot at 100; its consumer creation then waits.
    const gate: Gate = { held: null, onWait: () => undefined };
    let release = (): void => undefined;
    gate.held = new Promise((r) => {
      release = r;
    });
    const waiting = new Promise<void>((r) => {
      gate.onWait = r;
    });
    const ncC = await slowConsumers(url, gate);
    closers.push(() => ncC.close());
    const log = captureLog('warn');
    const cStarted = (async () => {
      const indexer = await ShardedIndexer.create({ shards: 2, blockSize: 16, keepWarmMs: 0 });
      closers.push(() => indexer.close());
      const sub = await KvEventSubscriber.start({ indexer, namespace: ns, component: 'c', connection: ncC, snapshotThreshold: null, consumerName: 'router-c', logger: log.logger });
      closers.push(() => sub.close());
      return { indexer, sub };
    })();
    await waiting;

    // Meanwhile A snapshots at 200 and purges through it: nothing of C's holds the purge back.
    last = await publish(100, 200);
    await a.sub.waitForSeq(last);
    expect(await a.sub.snapshotNow()).toMatchObject({ streamSeq: 200, purgedThrough: 200 });
    const jsm = await env.nc.jetstreamManager();
    expect((await jsm.streams.info(stream)).state.first_seq).toBe(201);
    last = await publish(200, 250);
    gate.held = null;
    release();

    const c = await cStarted;
    // It restored the newer snapshot (before the fix it resumed at 101 and waited for good).
    expect(c.sub.restored).toMatchObject({ outcome: 'restored', resumeAfter: 200 });
    expect(log.find('restoring the newer one')).toEqual([expect.objectContaining({ resumeAfter: 100, firstSeq: 201 })]);
    await c.sub.waitForSeq(last, 20_000);
    expect(c.sub.stats().missedSeqs).toBe(0);
    const restored = new RadixTree();
    for (const e of await c.indexer.dumpEvents()) restored.applyEvent(e);
    expect(restored.size).toBe(model.size);
    expect(restored.size).toBe(250);
    expect(new Set(restored.dumpEvents().map((e) => e.workerId))).toEqual(new Set([1n, 2n, 3n]));
  });
});
