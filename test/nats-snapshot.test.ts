/**
 * Snapshots through a real nats-server: the cycle of Dynamo's `test_indexers_sync` (router 1
 * consumes and snapshots, the stream is purged, router 2 starts later from snapshot + stream,
 * both agree), the purge cap (an ack floor ahead of what this router applied must not purge
 * events its snapshot lacks), a Dynamo snapshot without `stream_seq`, and `resetStates`.
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
import { ShardedIndexer } from '../src/shard/sharded-indexer.js';
import { readWorkload } from '../src/trace/workload.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { prefixClosedEvents } from './support/prefix-closed-gen.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

const installed = natsServerInstalled();
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
  // of. Otherwise a dumped block whose parent its worker dropped is re-rooted on restore, and
  // router 2's scores would depend on where the snapshot fell in the stream.
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
      await r1.waitForSeq(first.lastSeq);
      await until(async () => r1.stats().snapshots >= 1 && (await jsm.streams.info(names.stream)).state.first_seq > 1);
      const second = await pub.publishAll(events.slice(cut));
      await r1.waitForSeq(second.lastSeq);
      const purgedTo = (await jsm.streams.info(names.stream)).state.first_seq - 1;
      expect(purgedTo).toBeGreaterThan(0);

      ix2 = await ShardedIndexer.create({ shards: 2, blockSize: 64 });
      r2 = await KvEventSubscriber.start({ indexer: ix2, namespace: 'cycle', component: 'backend', connection: env.nc });
      expect(r2.restored.outcome).toBe('restored');
      expect(r2.restored.events).toBeGreaterThan(0);
      // The snapshot covers at least what was purged, so router 2 needs nothing that is gone.
      expect(r2.restored.resumeAfter).toBeGreaterThanOrEqual(purgedTo);
      await r2.waitForSeq(second.lastSeq);
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
