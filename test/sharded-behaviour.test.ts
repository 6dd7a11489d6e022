/** Ordering, worker assignment, restore, backpressure, options and faults of ShardedIndexer. */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import { computeBlockHashes } from '../src/hash/block-hash.js';
import { decodeSnapshot } from '../src/protocol/snapshot-reader.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { dumpTuples } from './support/compare.js';
import { createFaultyIndexer } from './support/faulty-shards.js';

const W1 = 0x694d99badb9f7c07n;
const W2 = W1 + 1n;
const W3 = W1 + 2n;

function stored(workerId: bigint, parent: bigint | null, blocks: [bigint, bigint][]): RouterEvent {
  return {
    workerId,
    event: { eventId: 0n, data: { type: 'stored', parentHash: parent, blocks: blocks.map(([blockHash, tokensHash]) => ({ blockHash, tokensHash })) } },
  };
}

/** A chain of n blocks whose hashes are far above 2^53. */
function chain(workerId: bigint, n: number, salt = 0n): RouterEvent {
  const blocks: [bigint, bigint][] = [];
  for (let i = 0; i < n; i++) blocks.push([0xf000_0000_0000_0000n + salt * 1000n + BigInt(i), 0xe000_0000_0000_0000n + BigInt(i)]);
  return stored(workerId, null, blocks);
}

const toks = (n: number): bigint[] => Array.from({ length: n }, (_, i) => 0xe000_0000_0000_0000n + BigInt(i));

let open: ShardedIndexer[] = [];
async function make(shards: number, extra: Partial<Parameters<typeof ShardedIndexer.create>[0]> = {}): Promise<ShardedIndexer> {
  const ix = await ShardedIndexer.create({ shards, blockSize: 4, ...extra });
  open.push(ix);
  return ix;
}
afterEach(async () => {
  await Promise.all(open.map((ix) => ix.close()));
  open = [];
});

describe('ShardedIndexer ordering', () => {
  it.each([0, 2])('a lookup right after applyEvent sees the event (shards: %i)', async (shards) => {
    const ix = await make(shards);
    ix.applyEvent(chain(W1, 5));
    ix.applyEvent(chain(W2, 3, 1n));
    const { scores } = await ix.findMatches(toks(5));
    expect(scores.get(W1)).toBe(5);
    expect(scores.get(W2)).toBe(3);
  });

  it('findMatchesForTokens hashes full blocks on the calling thread', async () => {
    const ix = await make(2);
    const tokens = Uint32Array.from({ length: 10 }, (_, i) => i);
    const local = computeBlockHashes(tokens, 4);
    ix.applyEvent(stored(W1, null, [[1n, local[0]!], [2n, local[1]!]]));
    expect((await ix.findMatchesForTokens(tokens)).scores.get(W1)).toBe(2);
  });
});

describe('ShardedIndexer lookup replies', () => {
  // Lookups read the shards' trees on the calling thread; with `expirationMs` (the frequency
  // trail is recorded in the shards) they go through the shards: the reply board, or the ports
  // when a lookup does not fit it. Both ways are covered.
  const THROUGH_SHARDS = { expirationMs: 1e12 };

  it.each([['on the calling thread', {}], ['through the shards', THROUGH_SHARDS]])('merges replies of hundreds of workers per shard (%s: too large for the reply board, so through the ports)', async (_how, extra) => {
    const ix = await make(2, extra);
    const many = 700; // 350 workers per shard: more than a reply-board region holds
    for (let w = 0n; w < BigInt(many); w++) ix.applyEvent(chain(W1 + w, 1 + Number(w % 3n), w));
    const { scores } = await ix.findMatches(toks(3));
    expect(scores.size).toBe(many);
    expect(scores.get(W1 + 2n)).toBe(3);
    expect(scores.get(W1 + 3n)).toBe(1);
  });

  it.each([['on the calling thread', {}], ['through the shards', THROUGH_SHARDS]])('answers lookups longer than a request region, and concurrent ones (%s: through the ports, and each from its own board slot)', async (_how, extra) => {
    const ix = await make(2, extra);
    ix.applyEvent(chain(W1, 6000));
    ix.applyEvent(chain(W2, 2, 1n));
    const long = await ix.findMatches(toks(6000)); // 4,096 hashes fit a request region
    expect([...long.scores].sort()).toEqual([[W1, 6000], [W2, 2]].sort());
    const lengths = Array.from({ length: 48 }, (_, i) => 1 + ((i * 37) % 300)); // more than the 32 slots
    const replies = await Promise.all(lengths.map((n) => ix.findMatches(toks(n))));
    for (const [i, r] of replies.entries()) {
      expect(r.scores.get(W1)).toBe(lengths[i]);
      expect(r.scores.get(W2)).toBe(Math.min(2, lengths[i]!));
    }
  });

  it('carries the frequency trail through the reply board, summed over shards', async () => {
    const ix = await make(2, { expirationMs: 60_000 });
    const base = await ShardedIndexer.create({ shards: 0, blockSize: 4, expirationMs: 60_000 });
    open.push(base);
    for (const e of [chain(W1, 3), chain(W2, 2, 1n)]) {
      ix.applyEvent(e);
      base.applyEvent(e);
    }
    await ix.findMatches(toks(3));
    await base.findMatches(toks(3));
    const a = await ix.findMatches(toks(3));
    const b = await base.findMatches(toks(3));
    // One earlier use of every visited node: one tree has 3 such nodes; the shards have
    // W1's 3-node path and W2's 2-node path, summed element-wise as Dynamo's sharded indexer.
    expect(b.frequencies).toEqual([1, 1, 1]);
    expect(a.frequencies).toEqual([2, 2, 1]);
    expect(a.scores).toEqual(b.scores);
  });
});

describe('ShardedIndexer worker assignment', () => {
  it('puts a new worker on the shard with the fewest workers and moves a returning one', async () => {
    const ix = await make(2);
    ix.applyEvent(chain(W1, 2)); // shard 0
    ix.applyEvent(chain(W2, 2, 1n)); // shard 1
    await ix.removeWorker(W1); // shard 0 empty
    ix.applyEvent(chain(W3, 2, 2n)); // shard 0 (fewest)
    await ix.removeWorker(W2); // shard 1 empty
    ix.applyEvent(chain(W1, 4, 3n)); // back, now on shard 1
    const stats = await ix.stats();
    expect(stats.map((s) => s.workers)).toEqual([1, 1]);
    expect(stats.map((s) => s.pairs)).toEqual([2, 4]);
    const { scores } = await ix.findMatches(toks(4));
    expect(Object.fromEntries([...scores].map(([w, s]) => [w.toString(), s]))).toEqual({ [W3.toString()]: 2, [W1.toString()]: 4 });
  });
});

describe('ShardedIndexer restore', () => {
  it('a dump restored into another shard count gives the same dump and scores', async () => {
    const a = await make(2);
    for (let w = 0n; w < 6n; w++) a.applyEvent(chain(W1 + w, 3 + Number(w), w));
    const events = await a.dumpEvents();
    const b = await make(3);
    await b.restore(events);
    expect(dumpTuples(await b.dumpEvents())).toEqual(dumpTuples(events));
    expect(await b.findMatches(toks(8))).toEqual(await a.findMatches(toks(8)));
  });

  it('concurrent dumps each get a whole snapshot, in every encoding', async () => {
    const a = await make(2);
    for (let w = 0n; w < 5n; w++) a.applyEvent(chain(W1 + w, 2 + Number(w), w));
    const [x, y, z, j] = await Promise.all([a.dumpSnapshot(), a.dumpSnapshot(), a.dumpSnapshot('bincode-dp'), a.dumpSnapshot('jsonl')]);
    expect(Buffer.from(x!).equals(Buffer.from(y!))).toBe(true);
    const want = dumpTuples(await a.dumpEvents());
    expect(dumpTuples(decodeSnapshot(z!, 'bincode-dp'))).toEqual(want);
    expect(dumpTuples(decodeSnapshot(j!, 'jsonl'))).toEqual(want);
  });

  it('restores from an async iterable', async () => {
    const a = await make(0);
    async function* gen(): AsyncGenerator<RouterEvent> {
      yield chain(W1, 3);
      yield chain(W2, 2, 1n);
    }
    await a.restore(gen());
    expect((await a.stats())[0]!.pairs).toBe(5);
  });
});

describe('ShardedIndexer backpressure', () => {
  it('sets needsDrain above the high-water mark and emits drain once applied', async () => {
    const ix = await make(2, { highWaterEvents: 50, batchWords: 64 });
    let drains = 0;
    ix.on('drain', () => drains++);
    for (let i = 0; i < 500; i++) ix.applyEvent(chain(W1 + BigInt(i % 7), 3, BigInt(i)));
    expect(ix.needsDrain).toBe(true);
    await ix.drained();
    expect(ix.needsDrain).toBe(false);
    expect(drains).toBe(1);
    await ix.flush();
    const stats = await ix.stats();
    expect(stats.reduce((n, s) => n + s.events.ok, 0)).toBe(500);
  });

  it('sets needsDrain when the batch bytes in flight pass highWaterBytes, far under highWaterEvents', async () => {
    // Each event of 300 blocks (1,207 words, ~4.8 KB) is a batch of its own: 500 events are
    // ~2.4 MB in flight, counted as their words in the batch rings (1 MiB a shard here), as
    // their buffers once the rings are full.
    const ix = await make(2, { highWaterEvents: 1_000_000, highWaterBytes: 256 * 1024, batchWords: 64 });
    let drains = 0;
    ix.on('drain', () => drains++);
    for (let i = 0; i < 10; i++) ix.applyEvent(chain(W1 + BigInt(i % 7), 300, BigInt(i)));
    expect(ix.needsDrain).toBe(false); // 10 batches, 48 KB: under the mark
    for (let i = 10; i < 500; i++) ix.applyEvent(chain(W1 + BigInt(i % 7), 300, BigInt(i)));
    expect(ix.needsDrain).toBe(true);
    await ix.drained();
    expect(ix.needsDrain).toBe(false);
    expect(drains).toBe(1);
    await ix.flush();
    const stats = await ix.stats();
    expect(stats.reduce((n, s) => n + s.events.ok, 0)).toBe(500);
    expect((await ix.findMatches(toks(3))).scores.size).toBe(7);
  });
});

describe('ShardedIndexer validation', () => {
  it.each([
    [{ shards: -1, blockSize: 4 }, 'shards'],
    [{ shards: 1.5, blockSize: 4 }, 'shards'],
    [{ shards: 65, blockSize: 4 }, 'shards'],
    [{ shards: 1, blockSize: 0 }, 'blockSize'],
    [{ shards: 0, blockSize: 4, expirationMs: -1 }, 'expirationMs'],
    [{ shards: 0, blockSize: 4, highWaterEvents: 0 }, 'highWaterEvents'],
    [{ shards: 0, blockSize: 4, highWaterBytes: 0 }, 'highWaterBytes'],
    [{ shards: 0, blockSize: 4, highWaterBytes: 1.5 }, 'highWaterBytes'],
  ])('rejects %o naming %s', async (options, field) => {
    const err = await ShardedIndexer.create(options).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KvIndexError);
    expect((err as KvIndexError).code).toBe(ErrorCode.InvalidOption);
    expect((err as KvIndexError).message).toContain(field);
  });

  it.each([0, 1, 2])('drops a hash a Removed event repeats once, counting the repeat as not found (shards: %i)', async (shards) => {
    // Shards find a Removed event's pairs before they take the readers' lock and drop them
    // under it: the repeat must find its pair gone, not drop it twice.
    const ix = await make(shards);
    ix.applyEvent(chain(W1, 3));
    ix.applyEvent(chain(W2, 2, 7n)); // W2 shares the first 2 blocks (in the same tree with 1 shard)
    const h = (salt: bigint, i: number): bigint => 0xf000_0000_0000_0000n + salt * 1000n + BigInt(i);
    ix.applyEvent({ workerId: W1, event: { eventId: 1n, data: { type: 'removed', blockHashes: [h(0n, 2), h(0n, 2), h(0n, 1), h(0n, 1)] } } });
    expect((await ix.findMatches(toks(3))).scores).toEqual(new Map([[W1, 1], [W2, 2]]));
    const stats = await ix.stats();
    expect(stats.reduce((n, s) => n + s.events.block_not_found, 0)).toBe(1);
    ix.applyEvent(stored(W1, h(0n, 0), [[h(0n, 1), toks(2)[1]!], [h(0n, 2), toks(3)[2]!]]));
    expect((await ix.findMatches(toks(3))).scores).toEqual(new Map([[W1, 3], [W2, 2]]));
  });

  it.each([0, 2])('rejects a malformed event on the calling thread and keeps working (shards: %i)', async (shards) => {
    const ix = await make(shards);
    ix.applyEvent(chain(W1, 2));
    const bad = chain(W2, 2);
    (bad.event.data as { blocks: { blockHash: bigint }[] }).blocks[1]!.blockHash = -5n;
    expect(() => ix.applyEvent(bad)).toThrow(/block_hash/);
    expect(() => ix.applyEvent({ workerId: 2n ** 64n, event: { eventId: 0n, data: { type: 'cleared' } } })).toThrow(KvIndexError);
    expect((await ix.findMatches(toks(2))).scores).toEqual(new Map([[W1, 2]]));
    expect((await ix.stats()).reduce((n, s) => n + s.events.ok, 0)).toBe(1);
  });
});

describe('ShardedIndexer faults', () => {
  it('a shard whose event handler throws fails pending and later calls, naming the shard', async () => {
    const { ix } = await createFaultyIndexer({ shards: 2, blockSize: 4 }, { failOnWorker: W2 });
    open.push(ix);
    ix.applyEvent(chain(W1, 2)); // shard 0
    ix.applyEvent(chain(W2, 2, 1n)); // shard 1: fails there
    const err = await ix.findMatches(toks(2)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KvIndexError);
    expect((err as KvIndexError).code).toBe(ErrorCode.ShardFailed);
    expect((err as KvIndexError).message).toMatch(/shard 1/);
    expect(() => ix.applyEvent(chain(W1, 1))).toThrow(/shard 1/);
    await expect(ix.dumpEvents()).rejects.toThrow(/shard 1/);
    await ix.close();
    expect(ix.liveThreads).toBe(0);
  });

  it('once a sync lookup sees a shard failed, the next call throws too, before the shard\'s message arrives', async () => {
    const { ix } = await createFaultyIndexer({ shards: 2, blockSize: 4 }, { failOnWorker: W2 });
    open.push(ix);
    ix.applyEvent(chain(W1, 2)); // shard 0
    ix.applyEvent(chain(W2, 2, 1n)); // shard 1: fails there
    // Synchronous from here on: the shard's 'fatal' message cannot be delivered in between, so
    // only the shared failed flag the lookup saw can make the next calls fail.
    expect(() => ix.findMatchesSync(toks(2))).toThrow(/shard 1/);
    expect(() => ix.applyEvent(chain(W1, 1))).toThrow(/shard 1/);
    expect(() => ix.findMatchesSync(toks(2))).toThrow(/shard 1/);
    await expect(ix.dumpEvents()).rejects.toThrow(/shard 1/);
    await ix.close();
  });

  it('a shard thread that dies fails every call fast and close still returns', async () => {
    const { ix, kill } = await createFaultyIndexer({ shards: 2, blockSize: 4 });
    open.push(ix);
    ix.applyEvent(chain(W1, 2));
    await kill(1);
    const err = await ix.findMatches(toks(2)).catch((e: unknown) => e);
    expect((err as KvIndexError).code).toBe(ErrorCode.ShardFailed);
    expect((err as KvIndexError).message).toMatch(/shard 1/);
    await expect(ix.stats()).rejects.toThrow(/shard 1/);
    await ix.close();
    expect(ix.liveThreads).toBe(0);
  });

  it('close() settles every pending drained() and restore() with KVX_CLOSED, and later drained() too', async () => {
    // Over its backlog limit when close() runs: the stopped threads send no more acks, so these
    // waits once never settled (found by fuzzing). The liveness bound below only fails the test.
    const ix = await ShardedIndexer.create({ shards: 2, blockSize: 4, highWaterEvents: 4 });
    open.push(ix);
    for (let i = 0; i < 1000; i++) ix.applyEvent(chain(W1 + BigInt(i % 4), 1, BigInt(i)));
    expect(ix.needsDrain).toBe(true);
    const events = Array.from({ length: 200_000 }, (_, i) => chain(W1 + BigInt(i % 8), 1, BigInt(i)));
    const settled = (p: Promise<unknown>): Promise<unknown> => Promise.race([
      p.then(() => 'resolved', (e: unknown) => (e as KvIndexError).code),
      new Promise((res) => setTimeout(() => res('pending after 10 s'), 10_000)),
    ]);
    const waits = [settled(ix.drained()), settled(ix.restore(events))];
    await ix.close();
    expect(await Promise.all(waits)).toEqual([ErrorCode.Closed, ErrorCode.Closed]);
    expect(await settled(ix.drained())).toBe(ErrorCode.Closed);
  });

  it('leaves no thread running after close and rejects later calls', async () => {
    const ix = await make(3);
    expect(ix.liveThreads).toBe(3);
    expect(new Set(ix.threadIds).size).toBe(3);
    await ix.close();
    expect(ix.liveThreads).toBe(0);
    await expect(ix.findMatches(toks(1))).rejects.toMatchObject({ code: ErrorCode.Closed });
  });
});
