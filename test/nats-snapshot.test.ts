/**
 * Snapshots through a real nats-server: the cycle of Dynamo's `test_indexers_sync` (router 1
 * consumes and snapshots, the stream is purged, router 2 starts later from snapshot + stream,
 * both agree), what a restore does to a cache that is not prefix-closed, the purge cap (an ack
 * floor ahead of what this router applied must not purge events its snapshot lacks), a Dynamo
 * snapshot without `stream_seq`, and `resetStates`.
 */

import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { AckPolicy, type JetStreamManager } from 'nats';
import { beforeAll, describe, expect, it } from 'vitest';
import { kvNames } from '../src/nats/names.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { lowestAckFloor } from '../src/nats/snapshot.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { encodeSnapshot } from '../src/protocol/snapshot-writer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { readWorkload } from '../src/trace/workload.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { prefixClosedEvents } from './support/prefix-closed-gen.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

const installed = natsServerInstalled();
const LIVENESS_MS = 60_000;
if (!installed) console.warn(NATS_SKIP_MESSAGE);

const WORKLOAD = fileURLToPath(new URL('../../shared/workloads/synthetic.jsonl.gz', import.meta.url));
const hasWorkload = existsSync(WORKLOAD);

/**
 * Events and lookups of the workload's first `lines` lines, or of a generated stream of `lines`
 * operations without it. Both keep every worker's cache prefix-closed.
 */
async function workloadSlice(lines: number): Promise<{ events: RouterEvent[]; queries: BigUint64Array[]; source: string }> {
  const events: RouterEvent[] = [];
  const queries: BigUint64Array[] = [];
  if (hasWorkload) {
    for await (const op of readWorkload(WORKLOAD, lines)) {
      if (op.op === 'event') events.push(op.event);
      else if (op.op === 'match') queries.push(op.seq);
    }
    return { events, queries, source: 'synthetic.jsonl.gz' };
  }
  // Prefix-closed, as the workload's engines are: a worker evicts only blocks it holds no child
  // of. Otherwise a dumped block whose parent its worker dropped is re-rooted on restore (the
  // case the re-rooting test below pins down), and router 2's scores would depend on where the
  // snapshot fell in the stream.
  const stream = prefixClosedEvents(5, lines);
  events.push(...stream.events);
  for (const doc of stream.docs) for (let n = 1; n <= doc.length; n++) queries.push(BigUint64Array.from(doc.slice(0, n)));
  return { events, queries, source: 'generated' };
}

describe.skipIf(!installed)('snapshots', () => {
  const env = useNatsServer();
  let jsm: JetStreamManager;

  beforeAll(async () => {
    jsm = await env.nc.jetstreamManager();
  });

  it(`router 2 starts from router 1's snapshot plus the stream; dumps and scores agree (${hasWorkload ? 'workload slice' : 'generated events: ../shared absent'})`, async () => {
    const { events, queries } = await workloadSlice(3000);
    const cut = Math.floor(events.length * 0.6);
    const names = kvNames('cycle', 'backend');
    const pub = await KvEventPublisher.connect({ namespace: 'cycle', component: 'backend', connection: env.nc });
    const ix1 = await ShardedIndexer.create({ shards: 2, blockSize: 64 });
    const r1 = await KvEventSubscriber.start({
      indexer: ix1,
      namespace: 'cycle',
      component: 'backend',
      connection: env.nc,
      snapshotThreshold: 200,
      snapshotIntervalMs: 100,
    });
    let ix2: ShardedIndexer | null = null;
    let r2: KvEventSubscriber | null = null;
    try {
      expect(r1.restored.outcome).toBe('none');
      const first = await pub.publishAll(events.slice(0, cut));
      // A liveness bound, not a speed check: a 2-core machine shared with other heavy work once
      // took over 10 s (the default) here, while the router retried JetStream requests.
      await r1.waitForSeq(first.lastSeq, LIVENESS_MS);
      await until(async () => r1.stats().snapshots >= 1 && (await jsm.streams.info(names.stream)).state.first_seq > 1);
      const second = await pub.publishAll(events.slice(cut));
      await r1.waitForSeq(second.lastSeq, LIVENESS_MS);
      const purgedTo = (await jsm.streams.info(names.stream)).state.first_seq - 1;
      expect(purgedTo).toBeGreaterThan(0);

      ix2 = await ShardedIndexer.create({ shards: 2, blockSize: 64 });
      r2 = await KvEventSubscriber.start({ indexer: ix2, namespace: 'cycle', component: 'backend', connection: env.nc });
      expect(r2.restored.outcome).toBe('restored');
      expect(r2.restored.events).toBeGreaterThan(0);
      // The snapshot covers at least what was purged, so router 2 needs nothing that is gone.
      expect(r2.restored.resumeAfter).toBeGreaterThanOrEqual(purgedTo);
      await r2.waitForSeq(second.lastSeq, LIVENESS_MS);
      expect(r2.stats().missedSeqs).toBe(0);

      expect(dumpTuples(await ix2.dumpEvents())).toEqual(dumpTuples(await ix1.dumpEvents()));
      for (const q of queries) {
        expect(sortedScores(await ix2.findMatches(q))).toEqual(sortedScores(await ix1.findMatches(q)));
      }
    } finally {
      await r2?.close();
      await r1.close();
      await ix2?.close();
      await ix1.close();
    }
  });

  it('re-roots on restore the blocks a worker kept below a block it removed (the one inexact case)', async () => {
    // Tokens hashes A..D are one path; W1 and W2 both store it, then W2 drops B alone. B stays
    // (W1 holds it), so live W2 still sits on A, C and D. A dump cannot name W2's parent for C
    // (W2 has no hash on B), so C and D are dumped with parent_hash null, and restoring them
    // roots them: router 2 has W2 on a second path C, D from the root. shards: 0 so both
    // workers share one tree (with shards, W2's shard would detach its emptied B with C and D).
    const [A, B, C, D] = [0xa1n, 0xb2n, 0xc3n, 0xd4n];
    const W1 = 0x694d99badb9f7c07n;
    const W2 = 0x694d99badb9f7c08n;
    const ev = (workerId: bigint, eventId: bigint, data: RouterEvent['event']['data']): RouterEvent => ({ workerId, event: { eventId, data } });
    const blocks = (hashes: bigint[]): { blockHash: bigint; tokensHash: bigint }[] => hashes.map((h, i) => ({ blockHash: h, tokensHash: [A, B, C, D][i]! }));
    const events = [
      ev(W1, 0n, { type: 'stored', parentHash: null, blocks: blocks([1n, 2n, 3n, 4n]) }),
      ev(W2, 0n, { type: 'stored', parentHash: null, blocks: blocks([71n, 72n, 73n, 74n]) }),
      ev(W2, 1n, { type: 'removed', blockHashes: [72n] }),
    ];
    const names = kvNames('reroot', 'backend');
    const pub = await KvEventPublisher.connect({ namespace: 'reroot', component: 'backend', connection: env.nc });
    const ix1 = await ShardedIndexer.create({ shards: 0, blockSize: 64 });
    const r1 = await KvEventSubscriber.start({ indexer: ix1, namespace: 'reroot', component: 'backend', connection: env.nc });
    let ix2: ShardedIndexer | null = null;
    let r2: KvEventSubscriber | null = null;
    try {
      const { lastSeq } = await pub.publishAll(events);
      await r1.waitForSeq(lastSeq);
      await ackedThrough(jsm, names.stream, r1.consumerName, lastSeq);
      expect(await r1.snapshotNow()).toMatchObject({ streamSeq: lastSeq, events: 3 });
      ix2 = await ShardedIndexer.create({ shards: 0, blockSize: 64 });
      r2 = await KvEventSubscriber.start({ indexer: ix2, namespace: 'reroot', component: 'backend', connection: env.nc });
      expect(r2.restored).toMatchObject({ outcome: 'restored', resumeAfter: lastSeq, events: 3 });

      // Both dumps are the same: the orphaned chain C, D has parent_hash null in each.
      const dumped = dumpTuples(await ix1.dumpEvents());
      expect(dumped).toEqual([`${W1}/1/${A}/-`, `${W1}/2/${B}/1`, `${W1}/3/${C}/2`, `${W1}/4/${D}/3`, `${W2}/71/${A}/-`, `${W2}/73/${C}/-`, `${W2}/74/${D}/73`].sort());
      expect(dumpTuples(await ix2.dumpEvents())).toEqual(dumped);

      // On A, B, C, D the scores agree: W2 scores its blocks up to its gap at B, so C and D
      // never counted (they did before scores stopped at a worker's first gap: 3 live, 1
      // restored). Only a query that starts at C tells the restored tree apart.
      const live = async (q: bigint[]): Promise<[string, number][]> => sortedScores(await ix1.findMatches(q));
      const restored = async (q: bigint[]): Promise<[string, number][]> => sortedScores(await ix2!.findMatches(q));
      expect(await live([A, B, C, D])).toEqual([[`${W1}`, 4], [`${W2}`, 1]]);
      expect(await restored([A, B, C, D])).toEqual(await live([A, B, C, D]));
      expect(await live([C, D])).toEqual([]);
      expect(await restored([C, D])).toEqual([[`${W2}`, 2]]);
      // Where W2's cache is prefix-closed (A alone), nothing changed.
      expect(await restored([A])).toEqual(await live([A]));
      expect(await live([A])).toEqual([[`${W1}`, 1], [`${W2}`, 1]]);
    } finally {
      await r2?.close();
      await r1.close();
      await ix2?.close();
      await ix1.close();
    }
  });

  it('never purges past the last sequence this router applied, even when every ack floor is ahead', async () => {
    const { events } = await workloadSlice(1000);
    expect(events.length).toBeGreaterThanOrEqual(300);
    const names = kvNames('cap', 'backend');
    const pub = await KvEventPublisher.connect({ namespace: 'cap', component: 'backend', connection: env.nc });
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 64 });
    const router = await KvEventSubscriber.start({ indexer: ix, namespace: 'cap', component: 'backend', connection: env.nc, keepConsumer: true });
    const js = env.nc.jetstream();
    let ix2: ShardedIndexer | null = null;
    let r2: KvEventSubscriber | null = null;
    try {
      const a = await pub.publishAll(events.slice(0, 100));
      await router.waitForSeq(a.lastSeq);
      await router.pause();
      const b = await pub.publishAll(events.slice(100, 200));
      // What nats-server 2.9.10 can do after a purge: the router's own consumer gets an ack floor
      // past what it delivered to the router. Here the test takes the deliveries itself.
      const stolen = await js.consumers.get(names.stream, router.consumerName);
      let lastStolen = null;
      for await (const m of await stolen.fetch({ max_messages: 100, expires: 2_000 })) lastStolen = m;
      expect(await lastStolen?.ackAck()).toBe(true);
      // And another router that has acked everything.
      await jsm.consumers.add(names.stream, { durable_name: 'other', ack_policy: AckPolicy.All });
      const other = await js.consumers.get(names.stream, 'other');
      let lastOther = null;
      for await (const m of await other.fetch({ max_messages: 200, expires: 2_000 })) lastOther = m;
      expect(await lastOther?.ackAck()).toBe(true);
      expect(await lowestAckFloor(jsm, names.stream)).toMatchObject({ floor: b.lastSeq });

      const report = await router.snapshotNow();
      expect(router.lastAppliedSeq).toBe(a.lastSeq);
      expect(report).toMatchObject({ streamSeq: a.lastSeq, purgedThrough: a.lastSeq, purged: 100 });
      expect((await jsm.streams.info(names.stream)).state.first_seq).toBe(a.lastSeq + 1);

      // The router notices the deliveries it never got and re-reads them.
      router.resume();
      const c = await pub.publishAll(events.slice(200, 300));
      await router.waitForSeq(c.lastSeq);
      expect(router.stats()).toMatchObject({ applied: 300, consumerResets: 1, missedSeqs: 0 });
      const reference = new RadixTree();
      for (const e of events.slice(0, 300)) reference.applyEvent(e);
      expect(dumpTuples(await ix.dumpEvents())).toEqual(dumpTuples(reference.dumpEvents()));

      // Snapshot + what is left of the stream is the whole history.
      ix2 = await ShardedIndexer.create({ shards: 0, blockSize: 64 });
      r2 = await KvEventSubscriber.start({ indexer: ix2, namespace: 'cap', component: 'backend', connection: env.nc });
      expect(r2.restored).toMatchObject({ outcome: 'restored', resumeAfter: a.lastSeq });
      await r2.waitForSeq(c.lastSeq);
      expect(dumpTuples(await ix2.dumpEvents())).toEqual(dumpTuples(reference.dumpEvents()));
    } finally {
      await r2?.close();
      await router.close();
      await ix2?.close();
      await ix.close();
    }
  });

  it('loads a Dynamo snapshot (no stream_seq) and then the whole stream', async () => {
    const { events } = await workloadSlice(300);
    const names = kvNames('dynamo-snap', 'backend');
    const head = events.slice(0, 60);
    const tail = events.slice(60);
    const reference = new RadixTree();
    for (const e of head) reference.applyEvent(e);
    const js = env.nc.jetstream();
    const os = await js.views.os(names.bucket);
    await os.putBlob({ name: names.snapshotKey }, encodeSnapshot(reference.dumpEvents(), 'bincode'));
    for (const e of tail) reference.applyEvent(e);
    const pub = await KvEventPublisher.connect({ namespace: 'dynamo-snap', component: 'backend', connection: env.nc });
    const { lastSeq } = await pub.publishAll(tail);
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 64 });
    const router = await KvEventSubscriber.start({ indexer: ix, namespace: 'dynamo-snap', component: 'backend', connection: env.nc });
    try {
      expect(router.restored).toMatchObject({ outcome: 'restored', resumeAfter: 0, events: reference.dumpEvents().length > 0 ? expect.any(Number) : 0 });
      await router.waitForSeq(lastSeq);
      expect(router.stats().applied).toBe(tail.length);
      expect(dumpTuples(await ix.dumpEvents())).toEqual(dumpTuples(reference.dumpEvents()));
    } finally {
      await router.close();
      await ix.close();
    }
  });

  it('a snapshot of an earlier stream of the same name (stream deleted and made again) is not loaded', async () => {
    // Its stream_seq (500) is past the new stream's end: loading it once resumed after 500 and
    // skipped the new stream's events, serving the old stream's blocks instead.
    const { events } = await workloadSlice(80);
    const names = kvNames('reborn', 'backend');
    const os = await env.nc.jetstream().views.os(names.bucket);
    const old = events.slice(0, 10);
    const meta = { stream_seq: '500', encoding: 'bincode' };
    await os.putBlob({ name: names.snapshotKey, metadata: meta }, encodeSnapshot(old, 'bincode'));
    const fresh = events.slice(10);
    const pub = await KvEventPublisher.connect({ namespace: 'reborn', component: 'backend', connection: env.nc });
    const { lastSeq } = await pub.publishAll(fresh);
    expect(lastSeq).toBeLessThan(500);
    const reference = new RadixTree();
    for (const e of fresh) reference.applyEvent(e);
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 64 });
    const router = await KvEventSubscriber.start({ indexer: ix, namespace: 'reborn', component: 'backend', connection: env.nc });
    try {
      expect(router.restored).toMatchObject({ outcome: 'foreign', resumeAfter: 0, events: 0 });
      await router.waitForSeq(lastSeq);
      expect(dumpTuples(await ix.dumpEvents())).toEqual(dumpTuples(reference.dumpEvents()));
    } finally {
      await router.close();
      await ix.close();
    }
  });

  it('resetStates purges the stream and deletes the bucket instead of loading', async () => {
    const { events } = await workloadSlice(200);
    const names = kvNames('reset', 'backend');
    const pub = await KvEventPublisher.connect({ namespace: 'reset', component: 'backend', connection: env.nc });
    await pub.publishAll(events);
    const os = await env.nc.jetstream().views.os(names.bucket);
    await os.putBlob({ name: names.snapshotKey }, encodeSnapshot(events.slice(0, 5), 'bincode'));
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 64 });
    const router = await KvEventSubscriber.start({ indexer: ix, namespace: 'reset', component: 'backend', connection: env.nc, resetStates: true });
    try {
      expect(router.restored.outcome).toBe('reset');
      expect((await jsm.streams.info(names.stream)).state.messages).toBe(0);
      await expect(jsm.streams.info(`OBJ_${names.bucket}`)).rejects.toThrow(/not found/);
      expect((await ix.stats())[0]!.pairs).toBe(0);
    } finally {
      await router.close();
      await ix.close();
    }
  });
});

/** Polls `cond` every 50 ms until true; fails after 10 s. */
async function until(cond: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('condition not met within 10 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Waits until `consumer` has acked through `seq` on the server. The subscriber acks without
 * waiting for the server's reply, so right after `waitForSeq` the ack floor can still be behind,
 * and a snapshot would find nothing to purge and be skipped.
 */
async function ackedThrough(jsm: JetStreamManager, stream: string, consumer: string, seq: number): Promise<void> {
  await until(async () => (await jsm.consumers.info(stream, consumer)).ack_floor.stream_seq >= seq);
}
