/**
 * The shards' batch rings (src/shard/wire/batch-ring.ts): batches placed in shared memory, the
 * space handed back as the shard consumes it, and the fallback to a transferred buffer when a
 * batch does not fit. Real shard threads; every result is compared with an in-thread indexer
 * given the same calls in the same order.
 *
 * Ring sizes here: `highWaterBytes: 2 MiB` over 2 shards makes each shard's ring 1 MiB (its
 * share of the in-flight bound; threaded-engine.ts `ringBytes`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, type KvIndexError } from '../src/errors.js';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import type { OverlapScores, RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { BatchRingReader, BatchRingWriter, createBatchRing } from '../src/shard/wire/batch-ring.js';
import type { ShardStats } from '../src/shard/wire/messages.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { generateStream } from './support/event-gen.js';
import { createFaultyIndexer } from './support/faulty-shards.js';

const W = 0x9000_0000_0000_0000n;
const RING_WORDS = (1 << 20) / 4;
const SMALL_RINGS = { highWaterBytes: 2 << 20 } as const;
const enc = (e: RouterEvent): Uint8Array => new TextEncoder().encode(formatRouterEvent(e));

/**
 * A Stored chain of `n` blocks from the root, of family `salt`: chains of one family are
 * prefixes of each other, families share no hash (so every shard count agrees on them).
 */
function chain(workerId: bigint, n: number, salt: number): RouterEvent {
  const base = BigInt(salt) << 20n;
  const blocks = Array.from({ length: n }, (_, i) => ({ blockHash: 0xf000_0000_0000_0000n + base + BigInt(i), tokensHash: 0xe000_0000_0000_0000n + base + BigInt(i) }));
  return { workerId, event: { eventId: BigInt(salt), data: { type: 'stored', parentHash: null, blocks } } };
}
const toks = (n: number, salt: number): bigint[] => Array.from({ length: n }, (_, i) => 0xe000_0000_0000_0000n + (BigInt(salt) << 20n) + BigInt(i));

const sum = (stats: ShardStats[], f: (s: ShardStats) => number | null): number => stats.reduce((k, s) => k + (f(s) ?? 0), 0);

let open: ShardedIndexer[] = [];
afterEach(async () => {
  await Promise.all(open.map((ix) => ix.close()));
  open = [];
});
async function make(shards: number, extra: Partial<Parameters<typeof ShardedIndexer.create>[0]> = {}): Promise<ShardedIndexer> {
  const ix = await ShardedIndexer.create({ shards, blockSize: 4, ...extra });
  open.push(ix);
  return ix;
}

/** The same dump and the same answers to `docs` as the reference. */
async function expectSame(ix: ShardedIndexer, ref: ShardedIndexer, docs: readonly (readonly bigint[])[]): Promise<void> {
  expect(dumpTuples(await ix.dumpEvents())).toEqual(dumpTuples(await ref.dumpEvents()));
  for (const doc of docs) expect(sortedScores(await ix.findMatches(doc))).toEqual(sortedScores(await ref.findMatches(doc)));
}

describe('BatchRingWriter and BatchRingReader', () => {
  it('places batches contiguously, wraps past the end with the skipped words counted, and starts over when empty', () => {
    const shape = createBatchRing(100 * 4);
    const w = new BatchRingWriter(shape);
    const r = new BatchRingReader(shape);
    expect(w.place(101)).toBe(-1); // larger than the ring: never fits
    expect(w.place(40)).toBe(0);
    const end1 = w.end;
    expect(w.place(40)).toBe(40);
    const end2 = w.end;
    expect(w.place(40)).toBe(-1); // 80 used: full
    r.consumed(end1);
    expect(w.used).toBe(40);
    // 20 words left before the end: skipped, the batch starts at 0, and its end covers them.
    expect(w.place(40)).toBe(0);
    expect(w.used).toBe(100);
    expect(w.end - end2).toBe(60);
    expect(w.place(1)).toBe(-1);
    r.consumed(end2);
    // The wrapped batch holds 0..40, and the 20 skipped words count as used until it is consumed.
    expect(w.used).toBe(60);
    expect(w.place(30)).toBe(40);
    expect(w.place(20)).toBe(-1);
    r.consumed(w.end);
    expect(w.used).toBe(0);
    expect(w.place(10)).toBe(0); // empty: back to word 0, not after the last batch
  });

  it('hands the shard a view of exactly the words written', () => {
    const shape = createBatchRing(64 * 4);
    const w = new BatchRingWriter(shape);
    const r = new BatchRingReader(shape);
    const at = w.place(5);
    w.words.set([1, 2, 3, 4, 5], at);
    expect([...r.batch(at, 5)]).toEqual([1, 2, 3, 4, 5]);
  });
});

describe('ShardedIndexer batch rings', () => {
  it('carries steady ingestion that honours needsDrain through the rings alone, many times round', async () => {
    const ix = await make(2, { ...SMALL_RINGS, batchWords: 1024 });
    const ref = await make(0);
    let words = 0;
    for (let i = 0; i < 8000; i++) {
      const e = chain(W + BigInt(i % 16), 20 + (i % 81), i % 40);
      words += 7 + 4 * (20 + (i % 81));
      ix.applyEvent(e);
      ref.applyEvent(e);
      if (ix.needsDrain) await ix.drained();
    }
    await ix.flush();
    const stats = await ix.stats();
    expect(words).toBeGreaterThan(3 * 2 * RING_WORDS); // 3x the rings' words passed through them
    expect(sum(stats, (s) => s.transferredBatches)).toBe(0);
    expect(sum(stats, (s) => s.ringBatches)).toBeGreaterThan(1000);
    expect(sum(stats, (s) => s.events.ok)).toBe(8000);
    await expectSame(ix, ref, [toks(100, 0), toks(40, 39), toks(7, 13)]);
  });

  it('sends batches the full ring cannot take in transferred buffers, in order among the ring batches', async () => {
    const stream = generateStream(21, 3000);
    const small = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    const ix = await make(2, { ...SMALL_RINGS, batchWords: 1024, highWaterEvents: 1_000_000 });
    const ref = await make(0);
    // needsDrain ignored, no yield: big chains (~3.2 KB each, ~5 MB in all) fill the rings, and
    // the stream's own events (stores, removals, clears) land in ring and transferred batches.
    const events: RouterEvent[] = [];
    for (let i = 0; i < small.length; i++) {
      events.push(small[i]!);
      events.push(chain(W + BigInt(i % 8), 200, 100_000 + (i % 16)));
    }
    for (const e of events) ix.applyEvent(e);
    for (const e of events) ref.applyEvent(e);
    await ix.flush();
    const stats = await ix.stats();
    expect(sum(stats, (s) => s.transferredBatches)).toBeGreaterThan(0);
    expect(sum(stats, (s) => s.ringBatches)).toBeGreaterThan(0);
    expect(sum(stats, (s) => s.events.ok)).toBe(sum(await ref.stats(), (s) => s.events.ok));
    await expectSame(ix, ref, [...stream.docs, toks(200, 100_000), toks(200, 100_007)]);
  });

  it('sends a batch larger than the ring in a transferred buffer, between ring batches', async () => {
    const ix = await make(1, { ...SMALL_RINGS, highWaterBytes: 1 << 20 });
    const ref = await make(0);
    const huge = chain(W, 70_000, 1); // 280,007 words: over the ring's 262,144
    const before = chain(W + 1n, 10, 2);
    // Removes the huge chain's tail: must apply after it.
    const after: RouterEvent = { workerId: W, event: { eventId: 3n, data: { type: 'removed', blockHashes: [0xf000_0000_0000_0000n + (1n << 20n) + 69_999n] } } };
    for (const e of [before, huge, after]) {
      ix.applyEvent(e);
      ref.applyEvent(e);
      await Promise.resolve(); // each posted as its own batch
    }
    const stats = await ix.stats();
    expect(stats[0]!.transferredBatches).toBe(1);
    expect(stats[0]!.ringBatches).toBe(2);
    expect(stats[0]!.pairs).toBe(10 + 69_999);
    await expectSame(ix, ref, [toks(70_000, 1), toks(10, 2)]);
  });

  it.each([undefined, 60_000])('answers each lookup against exactly the events queued before it (expirationMs %s)', async (expirationMs) => {
    const opts = { ...SMALL_RINGS, batchWords: 512, highWaterEvents: 1_000_000, ...(expirationMs === undefined ? {} : { expirationMs }) };
    const ix = await make(2, opts);
    const ref = await make(0, expirationMs === undefined ? {} : { expirationMs });
    const got: Promise<OverlapScores>[] = [];
    const want: Promise<OverlapScores>[] = [];
    for (let i = 0; i < 1200; i++) {
      // Workers store chains of one family and clear them: the answer to the lookup changes
      // with almost every event.
      const w = W + BigInt(i % 6);
      const e: RouterEvent = i % 5 === 4
        ? { workerId: w, event: { eventId: BigInt(i), data: { type: 'cleared' } } }
        : chain(w, 1 + (i * 37) % 150, 0);
      ix.applyEvent(e);
      ref.applyEvent(e);
      if (i % 7 === 0) {
        got.push(ix.findMatches(toks(150, 0)));
        want.push(ref.findMatches(toks(150, 0)));
      }
    }
    const a = await Promise.all(got);
    const b = await Promise.all(want);
    expect(a.map((s) => sortedScores(s))).toEqual(b.map((s) => sortedScores(s)));
    expect(sum(await ix.stats(), (s) => s.ringBatches)).toBeGreaterThan(100);
  });

  it('carries JSON records through the rings, reporting rejections with their tags', async () => {
    const ix = await make(2, { ...SMALL_RINGS, batchWords: 1024 });
    const ref = await make(0);
    const tags: (number | undefined)[] = [];
    const codes: string[] = [];
    ix.on('malformed', (e: KvIndexError, tag?: number) => {
      codes.push(e.code);
      tags.push(tag);
    });
    // First events through applyEvent (a JSON event of an unknown worker is parsed on the
    // calling thread); then ~2.6 MB of JSON text, a bad record every 50, parsed in the shards.
    for (let w = 0n; w < 8n; w++) {
      ix.applyEvent(chain(W + w, 1, 7));
      ref.applyEvent(chain(W + w, 1, 7));
    }
    const bad: number[] = [];
    for (let i = 0; i < 500; i++) {
      const w = W + BigInt(i % 8);
      if (i % 50 === 25) {
        ix.applyEventJson(new TextEncoder().encode(`{"worker_id":${w},"event":{"event_id":1,"data":{"moved":{}}}}`), i);
        bad.push(i);
      } else {
        const e = chain(w, 60, 1000 + (i % 10));
        ix.applyEventJson(enc(e), i);
        ref.applyEvent(e);
      }
      if (ix.needsDrain) await ix.drained();
    }
    await ix.flush();
    const stats = await ix.stats();
    expect(tags.sort((x, y) => x! - y!)).toEqual(bad);
    expect(new Set(codes)).toEqual(new Set([ErrorCode.UnknownVariant]));
    expect(sum(stats, (s) => s.malformed)).toBe(bad.length);
    expect(sum(stats, (s) => s.transferredBatches)).toBe(0);
    expect(sum(stats, (s) => s.ringBatches)).toBeGreaterThan(0);
    await expectSame(ix, ref, [toks(60, 1003), toks(1, 7)]);
  });

  it('orders worker removals among ring batches', async () => {
    const ix = await make(2, { ...SMALL_RINGS, batchWords: 256, highWaterEvents: 1_000_000 });
    const ref = await make(0);
    const done: Promise<void>[] = [];
    for (let i = 0; i < 600; i++) {
      const w = W + BigInt(i % 5);
      const e = chain(w, 1 + (i % 40), i % 7);
      ix.applyEvent(e);
      ref.applyEvent(e);
      if (i % 9 === 8) {
        done.push(ix.removeWorker(w));
        done.push(ref.removeWorker(w));
      }
    }
    await Promise.all(done);
    const stats = await ix.stats();
    expect(sum(stats, (s) => s.ringBatches)).toBeGreaterThan(50);
    expect(sum(stats, (s) => s.transferredBatches)).toBe(0);
    await expectSame(ix, ref, [toks(40, 0), toks(40, 6)]);
  });

  it('fails the indexer when a shard fails on a batch in its ring, and when a shard dies with batches in its ring', async () => {
    const failing = await createFaultyIndexer({ shards: 2, blockSize: 4, ...SMALL_RINGS, batchWords: 256, highWaterEvents: 1_000_000 }, { failOnWorker: W + 3n });
    open.push(failing.ix);
    for (let i = 0; i < 200; i++) failing.ix.applyEvent(chain(W + BigInt(i % 3), 20, i));
    failing.ix.applyEvent(chain(W + 3n, 5, 999));
    for (let i = 200; i < 300; i++) failing.ix.applyEvent(chain(W + BigInt(i % 3), 20, i));
    const err = await failing.ix.flush().catch((e: unknown) => e as KvIndexError);
    expect(err).toMatchObject({ code: ErrorCode.ShardFailed });
    expect(() => failing.ix.applyEvent(chain(W, 1, 1))).toThrow(/shard/);

    const dying = await createFaultyIndexer({ shards: 2, blockSize: 4, ...SMALL_RINGS, batchWords: 256, highWaterEvents: 1_000_000 });
    open.push(dying.ix);
    // ~1.3 MB queued without a yield: batches in both rings (and transferred ones) when shard 1 dies.
    for (let i = 0; i < 2000; i++) dying.ix.applyEvent(chain(W + BigInt(i % 4), 40, i));
    expect((await dying.kill(1)).message).toMatch(/shard 1/);
    await expect(dying.ix.findMatches(toks(40, 0))).rejects.toMatchObject({ code: ErrorCode.ShardFailed });
    await expect(dying.ix.flush()).rejects.toMatchObject({ code: ErrorCode.ShardFailed });
    await expect(dying.ix.stats()).rejects.toMatchObject({ code: ErrorCode.ShardFailed });
    expect(() => dying.ix.applyEvent(chain(W, 1, 1))).toThrow(/shard 1/);
  });
});
