/**
 * Event batches and their buffer reuse: a batch written into a recycled buffer (stale words
 * past its end) applies exactly as the events themselves; the writer asks back only a few
 * buffers; a sharded indexer sending tiny batches (so buffers cycle constantly) matches the
 * in-thread tree, and so does one whose shards drop most batches (spare budget full); a write
 * section stops at the next record boundary once a reader queues.
 */
import { describe, expect, it } from 'vitest';
import { EventBatchWriter, emptyCounts } from '../src/shard/wire/event-batch.js';
import { applyBatch } from '../src/shard/thread/apply-batch.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { H, HEADER_WORDS } from '../src/tree/shared-layout.js';
import { hasWaiter } from '../src/shard/wire/tree-lock.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { generateStream } from './support/event-gen.js';

describe('EventBatchWriter buffer reuse', () => {
  it('refills a recycled buffer and the batch applies as the events do', () => {
    const stream = generateStream(5, 1500);
    const events = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    const direct = new RadixTree();
    for (const e of events) direct.applyEvent(e);

    const writer = new EventBatchWriter(64);
    const viaBatches = new RadixTree();
    const counts = emptyCounts();
    const seen = new Set<ArrayBufferLike>();
    let reused = 0;
    for (const e of events) {
      writer.push(e);
      if (writer.words < 200) continue;
      const words = writer.take();
      if (seen.has(words.buffer)) reused++;
      seen.add(words.buffer);
      applyBatch(viaBatches, words, counts);
      if (writer.askBack(words)) writer.recycle(words.buffer as ArrayBuffer);
      words.fill(0xdeadbeef); // a reused buffer arrives dirty; its next batch must not care
    }
    applyBatch(viaBatches, writer.take(), counts);
    expect(reused).toBeGreaterThan(10);
    expect(dumpTuples(viaBatches.dumpEvents())).toEqual(dumpTuples(direct.dumpEvents()));
    for (const doc of stream.docs) expect(sortedScores(viaBatches.findMatches(doc))).toEqual(sortedScores(direct.findMatches(doc)));
  });

  it('asks buffers back while they fit its byte budget, and keeps none grown past 4 MiB or under its first size', () => {
    const writer = new EventBatchWriter(16, 256); // 64-byte buffers, 256 bytes held at most
    const words = (bytes: number): Uint32Array => new Uint32Array(new ArrayBuffer(bytes));
    expect(Array.from({ length: 5 }, () => writer.askBack(words(64)))).toEqual([true, true, true, true, false]);
    const fresh = new EventBatchWriter(16, 1 << 30);
    expect(fresh.askBack(words(8 << 20))).toBe(false); // grown by a huge event: not kept
    expect(fresh.askBack(words(32))).toBe(false);
    // A spare taken into use is no longer held: one more may come back, not two.
    writer.recycle(new ArrayBuffer(64));
    writer.take();
    expect(writer.askBack(words(64))).toBe(true);
    expect(writer.askBack(words(64))).toBe(false);
  });
});

describe('ShardedIndexer with tiny batches', () => {
  it('matches the in-thread tree while batch buffers cycle between threads', async () => {
    const stream = generateStream(9, 3000);
    const events = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    const reference = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    const sharded = await ShardedIndexer.create({ shards: 1, blockSize: 4, batchWords: 48 });
    try {
      for (let i = 0; i < events.length; i++) {
        reference.applyEvent(events[i]!);
        sharded.applyEvent(events[i]!);
        // Yield now and then so acks come back (with their buffers) mid-stream.
        if (i % 20 === 0) await new Promise((r) => setImmediate(r));
      }
      expect(dumpTuples(await sharded.dumpEvents())).toEqual(dumpTuples(await reference.dumpEvents()));
      for (const doc of stream.docs) expect(sortedScores(await sharded.findMatches(doc))).toEqual(sortedScores(await reference.findMatches(doc)));
    } finally {
      await sharded.close();
      await reference.close();
    }
  });
});

describe('ShardedIndexer when the spares are full and shards drop batches', () => {
  it('matches the in-thread tree, no event lost or applied twice', async () => {
    const stream = generateStream(11, 3000);
    const events = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    const reference = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    // 48-word batches in 64 KiB buffers and the least spare budget (1 MiB a shard; needsDrain
    // is ignored, applyEvent never blocks): without a yield, hundreds of batches are in flight
    // and all but the first 16 a shard are dropped by the shard, not handed back.
    const sharded = await ShardedIndexer.create({ shards: 2, blockSize: 4, batchWords: 48, highWaterEvents: 1_000_000, highWaterBytes: 1 });
    try {
      for (const e of events) {
        reference.applyEvent(e);
        sharded.applyEvent(e);
      }
      await sharded.flush();
      const applied = (s: Awaited<ReturnType<ShardedIndexer['stats']>>): number =>
        s.reduce((k, x) => k + Object.values(x.events).reduce((a, b) => a + b, 0), 0);
      const shardStats = await sharded.stats();
      const refStats = await reference.stats();
      expect(applied(shardStats)).toBe(events.length);
      expect(applied(refStats)).toBe(events.length);
      expect(shardStats.reduce((k, s) => k + s.pairs, 0)).toBe(refStats.reduce((k, s) => k + s.pairs, 0));
      expect(dumpTuples(await sharded.dumpEvents())).toEqual(dumpTuples(await reference.dumpEvents()));
      for (const doc of stream.docs) expect(sortedScores(await sharded.findMatches(doc))).toEqual(sortedScores(await reference.findMatches(doc)));
    } finally {
      await sharded.close();
      await reference.close();
    }
  });
});

describe('write sections yield to a queued reader', () => {
  it('applyBatch stops after the record during which a reader queued, and resuming there applies the rest exactly', () => {
    const stream = generateStream(11, 400);
    const events = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    const writer = new EventBatchWriter(1 << 16);
    for (const e of events) writer.push(e);
    const words = writer.take();
    const direct = new RadixTree();
    applyBatch(direct, words, emptyCounts());

    const header = new Int32Array(new SharedArrayBuffer(HEADER_WORDS * 4));
    Atomics.add(header, H.LOCK, 0x10000); // the writer holds the lock: ticket 0 is served
    const tree = new RadixTree();
    const counts = emptyCounts();
    // No one queued: the whole batch in one call.
    const alone = new RadixTree();
    expect(applyBatch(alone, words, emptyCounts(), 0, words.length, header)).toBe(words.length);
    // A reader queued (a second ticket handed out): one record per call.
    Atomics.add(header, H.LOCK, 0x10000);
    let at = 0;
    let calls = 0;
    while (at < words.length) {
      const next = applyBatch(tree, words, counts, at, words.length, header);
      expect(next).toBeGreaterThan(at);
      at = next;
      calls++;
    }
    expect(calls).toBe(events.length);
    expect(dumpTuples(tree.dumpEvents())).toEqual(dumpTuples(direct.dumpEvents()));
    expect(dumpTuples(alone.dumpEvents())).toEqual(dumpTuples(direct.dumpEvents()));
    // Once the reader was served (its ticket came up), no more early stops.
    Atomics.add(header, H.LOCK, 1);
    expect(hasWaiter(header)).toBe(false);
  });
});
