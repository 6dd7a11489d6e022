/**
 * A snapshot in the object store holds exactly the index at its recorded `stream_seq`: the
 * uploaded object, decoded, has the same (worker, block, parent) tuples as an in-thread
 * RadixTree fed the stream's events up to that sequence, no fewer and no more. In-thread
 * (shards: 0) and with two shard threads; with the router caught up, with events arriving while
 * snapshots are taken, and with another caller dumping the same indexer at the same moment (the
 * snapshot's dump must still cover the events up to its sequence and none after, even when it
 * has to wait for that other dump).
 *
 * The events keep every worker's cache prefix-closed, so a sharded dump and an in-thread one
 * agree tuple for tuple (see test/support/prefix-closed-gen.ts).
 */

import type { JetStreamClient, JetStreamManager } from 'nats';
import { beforeAll, describe, expect, it } from 'vitest';
import { kvNames, type KvNames } from '../src/nats/names.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { downloadStableSnapshot, type SnapshotReport } from '../src/nats/snapshot.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { decodeSnapshot } from '../src/protocol/snapshot-reader.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples } from './support/compare.js';
import { BASE_WORKER_ID, Rng } from './support/event-gen.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';
import { prefixClosedEvents } from './support/prefix-closed-gen.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

/** Snapshots checked per test. */
const SNAPSHOTS = 6;
/**
 * Rounds of the concurrent-dump test. Fewer: each costs up to a pull's expiry (1 s) when the
 * router caught up before it was held again, and the first round already exposes a dump that
 * waits with its request unsent (20 of 20 runs).
 */
const SHARED_ROUNDS = 3;

describe.skipIf(!installed)('a snapshot holds exactly the index at its stream_seq', () => {
  const env = useNatsServer();
  let jsm: JetStreamManager;
  let js: JetStreamClient;

  beforeAll(async () => {
    jsm = await env.nc.jetstreamManager();
    js = env.nc.jetstream();
  });

  /** A publisher, an indexer and a router on a fresh stream, and the events to publish. */
  async function setUp(namespace: string, shards: number, events: RouterEvent[]): Promise<Scene> {
    const pub = await KvEventPublisher.connect({ namespace, component: 'backend', connection: env.nc });
    const indexer = await ShardedIndexer.create({ shards, blockSize: 16 });
    const router = await KvEventSubscriber.start({ indexer, namespace, component: 'backend', connection: env.nc });
    return new Scene(jsm, js, kvNames(namespace, 'backend'), pub, indexer, router, events);
  }

  it.each([0, 2])('with the router caught up (shards %i)', async (shards) => {
    const { events } = prefixClosedEvents(31, 3000);
    const s = await setUp(`seq-still-${shards}`, shards, events);
    try {
      for (let k = 1; k <= SNAPSHOTS; k++) {
        const last = await s.publish(Math.floor((events.length * (k - 1)) / SNAPSHOTS), Math.floor((events.length * k) / SNAPSHOTS));
        await s.router.waitForSeq(last);
        await s.ackedThrough(last);
        const report = await s.router.snapshotNow();
        expect(report?.streamSeq).toBe(last);
        await s.expectSnapshotMatches(report!);
      }
      expect(s.checked).toBe(SNAPSHOTS);
    } finally {
      await s.close();
    }
  });

  it.each([0, 2])('while events keep arriving (shards %i)', async (shards) => {
    const { events } = prefixClosedEvents(32, 60_000);
    const s = await setUp(`seq-moving-${shards}`, shards, events);
    try {
      s.feed(0);
      const seqs: number[] = [];
      await s.untilChecked(SNAPSHOTS, async () => {
        const report = await s.router.snapshotNow();
        if (report === null) return;
        await s.expectSnapshotMatches(report);
        seqs.push(report.streamSeq);
      });
      await s.stopFeed();
      // The index moved between the snapshots.
      expect(seqs[seqs.length - 1]).toBeGreaterThan(seqs[0]!);
    } finally {
      await s.close();
    }
  });

  it.each([0, 2])('while another caller dumps the same indexer (shards %i)', async (shards) => {
    // A large index first, so that dumps take milliseconds. Then rounds: with the router held,
    // a backlog is published; other dumps start, the snapshot is asked for, and the router is
    // let go, so it hands the backlog to the indexer while the snapshot's dump waits for the
    // others. That dump must still cover the events up to its sequence and none after.
    const bulk = bulkEvents(4, 10, 1000);
    const { events } = prefixClosedEvents(33, 60_000);
    const s = await setUp(`seq-shared-${shards}`, shards, [...bulk, ...events]);
    try {
      let published = await s.publish(0, bulk.length);
      await s.router.waitForSeq(published);
      await s.router.pause();
      await s.untilChecked(SHARED_ROUNDS, async () => {
        await s.ackedThrough(s.router.lastAppliedSeq);
        published = await s.publish(published, published + 2000);
        const others = [s.indexer.dumpSnapshot('bincode'), s.indexer.dumpEvents(), s.indexer.dumpSnapshot('bincode')];
        const snapshot = s.router.snapshotNow();
        s.router.resume();
        const report = await snapshot;
        // Held again for the next round (after its current pull: up to fetchExpiresMs when it
        // has caught up, so ask now rather than after the check).
        const held = s.router.pause();
        await Promise.all(others);
        if (report !== null) await s.expectSnapshotMatches(report);
        await held;
      });
    } finally {
      await s.close();
    }
  });
});

/**
 * The pieces of one test, and the reference: an in-thread RadixTree advanced through the
 * published events as snapshots of later sequences are checked.
 */
class Scene {
  /** Snapshots found equal to the reference. */
  checked = 0;
  private readonly reference = new RadixTree();
  private referenceSeq = 0;

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    readonly names: KvNames,
    readonly pub: KvEventPublisher,
    readonly indexer: ShardedIndexer,
    readonly router: KvEventSubscriber,
    /** Event i goes to stream sequence i + 1 (checked as it is published). */
    readonly events: readonly RouterEvent[],
  ) {}

  /**
   * Publishes events `from` to `to` (exclusive), all in flight at once, and checks each landed
   * at stream sequence index + 1 (one connection: the server numbers them in sending order).
   * Returns the last sequence.
   */
  async publish(from: number, to: number): Promise<number> {
    if (to > this.events.length) throw new Error(`only ${this.events.length} events to publish, asked for ${to}`);
    const seqs = await Promise.all(this.events.slice(from, to).map((e) => this.pub.publish(e)));
    seqs.forEach((seq, i) => {
      if (seq !== from + i + 1) throw new Error(`event ${from + i} landed at stream sequence ${seq}, not ${from + i + 1}`);
    });
    return to;
  }

  /**
   * Publishes from event `from` on, 100 at a time, in the background until `stopFeed()` or out
   * of events. `stopFeed()` waits for the publishes in flight and rethrows a publishing failure.
   */
  feed(from: number): void {
    let stopped = false;
    const running = (async () => {
      for (let at = from; !stopped && at < this.events.length; at += 100) {
        await this.publish(at, Math.min(at + 100, this.events.length));
      }
    })();
    running.catch(() => undefined); // reported by stopFeed()
    this.stopFeed = async () => {
      stopped = true;
      await running;
    };
  }

  /** Stops the background publishing of `feed()`, if any. */
  stopFeed: () => Promise<void> = async () => {};

  /**
   * Runs `attempt` until `n` snapshots were checked. A snapshot is skipped (null) while nothing
   * can be purged yet; fails after 500 attempts rather than hanging.
   */
  async untilChecked(n: number, attempt: () => Promise<void>): Promise<void> {
    for (let i = 0; this.checked < n; i++) {
      if (i === 500) throw new Error(`only ${this.checked} of ${n} snapshots taken in 500 attempts`);
      await attempt();
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Waits until the router's acks through `seq` reached the server (they are not awaited). */
  async ackedThrough(seq: number): Promise<void> {
    for (let i = 0; (await this.jsm.consumers.info(this.names.stream, this.router.consumerName)).ack_floor.stream_seq < seq; i++) {
      if (i === 500) throw new Error(`acks through ${seq} did not reach the server`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /**
   * Downloads the object the report describes and expects its recorded sequence to be the
   * report's and its contents to be the reference's at exactly that sequence.
   */
  async expectSnapshotMatches(report: SnapshotReport): Promise<void> {
    const snap = await downloadStableSnapshot(this.jsm, this.js, this.names, 2, 0);
    expect(snap).toMatchObject({ stable: true, meta: { streamSeq: report.streamSeq, encoding: 'bincode' } });
    const seq = report.streamSeq;
    expect(seq).toBeGreaterThanOrEqual(this.referenceSeq);
    for (; this.referenceSeq < seq; this.referenceSeq++) this.reference.applyEvent(this.events[this.referenceSeq]!);
    const decoded = decodeSnapshot(snap!.bytes, 'bincode');
    const want = dumpTuples(this.reference.dumpEvents());
    const got = dumpTuples(decoded);
    if (!sameList(got, want)) {
      // The usual failure is events after `seq` in the snapshot: say which, not 10^5 tuples.
      const wanted = new Set(want);
      const extra = got.filter((t) => !wanted.has(t));
      const present = new Set(got);
      const missing = want.filter((t) => !present.has(t));
      expect.fail(
        `snapshot ${this.checked + 1} at stream_seq ${seq} differs from the index at that sequence: ` +
          `${extra.length} tuples too many (first: ${extra.slice(0, 3).join(', ')}), ` +
          `${missing.length} missing (first: ${missing.slice(0, 3).join(', ')}); ` +
          `the router had applied through ${this.router.lastAppliedSeq}`,
      );
    }
    this.checked++;
  }

  /** Stops publishing (a failure is left to the test's own assertions), the router and the indexer. */
  async close(): Promise<void> {
    await this.stopFeed().catch(() => undefined);
    await this.router.close();
    await this.indexer.close();
  }
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * `workers` workers that each store `chains` chains of `blocks` blocks from the root, with
 * random hashes: a large index that never evicts (prefix-closed), on workers of its own.
 */
function bulkEvents(workers: number, chains: number, blocks: number): RouterEvent[] {
  const rng = new Rng(77);
  const out: RouterEvent[] = [];
  for (let w = 0; w < workers; w++) {
    const workerId = BASE_WORKER_ID + 1_000_000n + BigInt(w);
    for (let c = 0; c < chains; c++) {
      out.push({
        workerId,
        event: {
          eventId: BigInt(c),
          data: { type: 'stored', parentHash: null, blocks: Array.from({ length: blocks }, () => ({ blockHash: rng.u64(), tokensHash: rng.u64() })) },
        },
      });
    }
  }
  return out;
}
