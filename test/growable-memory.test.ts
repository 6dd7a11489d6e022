/**
 * In-thread trees keep their large arrays in growable memory (src/tree/array-store.ts): they grow
 * in place, in steps of 1/16, and `sharedBytes` counts what `process.memoryUsage()` does not.
 * Worker tables of a page or more get pages of their own (worker-table.ts).
 */
import { describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { replay, sortedScores } from './support/compare.js';

/** One chain of `n` blocks of worker `w`, hashes from `base`. */
const chain = (w: bigint, base: number, n: number): RouterEvent => ({
  workerId: w,
  event: {
    eventId: 0n,
    data: { type: 'stored', parentHash: null, blocks: Array.from({ length: n }, (_, i) => ({ blockHash: BigInt(base + i + 1) + (w << 40n), tokensHash: BigInt(base + i + 1) })) },
  },
});

describe('growable tree memory', () => {
  it('grows the node arrays in place, in small steps, and answers as the model', () => {
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const node = tree.nodes.node.buffer;
    expect(node).toBeInstanceOf(SharedArrayBuffer);
    const events = Array.from({ length: 400 }, (_, k) => chain(1n + BigInt(k % 3), k * 500, 500)); // 200,000 nodes
    expect(replay(tree, events).every((s) => s === 'ok')).toBe(true);
    replay(model, events);
    // The same buffer, grown: no copy.
    expect(tree.nodes.node.buffer).toBe(node);
    const cap = tree.nodes.node.length / 4;
    const live = tree.nodeCount;
    expect(cap).toBeGreaterThanOrEqual(live);
    // At most one step of 1/16 past what the nodes needed (1.25x steps left up to a quarter).
    expect(cap).toBeLessThanOrEqual(Math.ceil(live * (17 / 16)) + 16_384);
    for (const k of [0, 1, 199, 399]) {
      const q = Array.from({ length: 600 }, (_, i) => BigInt(k * 500 + i + 1));
      expect(sortedScores(tree.findMatches(q))).toEqual(sortedScores(model.findMatches(q)));
    }
    expect([tree.size, tree.nodeCount]).toEqual([model.size, model.nodeCount]);
  });

  it('counts its shared memory: most of a large tree, none of it in memoryUsage().arrayBuffers', () => {
    const tree = new RadixTree();
    replay(tree, Array.from({ length: 100 }, (_, k) => chain(1n + BigInt(k % 4), k * 1000, 1000)));
    expect(tree.sharedBytes).toBeGreaterThan(0.9 * tree.bytes);
    expect(tree.sharedBytes).toBeLessThanOrEqual(tree.bytes);
    // The growable buffers are not in memoryUsage(): memory figures must add `sharedBytes`.
    const before = process.memoryUsage().arrayBuffers;
    const grown = new RadixTree();
    replay(grown, Array.from({ length: 50 }, (_, k) => chain(9n, k * 1000, 1000)));
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(grown.sharedBytes / 2);
  });

  it('gives worker tables of a page or more pages of their own, grown in place in whole pages, and keeps small ones in the tree\'s slab', () => {
    const tree = new RadixTree();
    replay(tree, [chain(1n, 0, 2_000), chain(2n, 100_000, 20)]);
    const paged = tree.tables.find((t) => t !== null && t.count === 2_000)!.slots.buffer;
    expect(paged).toBeInstanceOf(SharedArrayBuffer);
    replay(tree, [chain(1n, 2_000, 3_000)]); // two more 1.5x steps, in the same buffer
    const tables = tree.tables.filter((t) => t !== null);
    const big = tables.find((t) => t.count === 5_000)!;
    expect(big.slots.buffer).toBe(paged);
    const small = tables.find((t) => t.count === 20)!;
    expect(big.slots.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(big.slots.byteLength % 4096).toBe(0);
    expect(big.sharedBytes).toBe(big.bytes);
    // A small table is a range of the slab (counted by the tree, not by the table).
    expect(small.slots.buffer).toBe(tree.tableSlab.a.buffer);
    expect(small.sharedBytes).toBe(0);
    expect(small.bytes).toBe(0);
    // Every block of the paged table is still found and removed.
    const removed: RouterEvent = { workerId: 1n, event: { eventId: 1n, data: { type: 'removed', blockHashes: Array.from({ length: 5_000 }, (_, i) => BigInt(i + 1) + (1n << 40n)) } } };
    expect(replay(tree, [removed])).toEqual(['ok']);
    expect(tree.size).toBe(20);
  });

  it('keeps small worker tables in one slab: ranges outgrown or of removed workers are reused, and lookups stay exact', () => {
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const remove = (w: bigint): void => {
      tree.removeWorker(w);
      model.removeWorker(w);
    };
    const both = (events: RouterEvent[]): void => {
      expect(replay(tree, events)).toEqual(replay(model, events));
    };
    // 200 workers, each table grown by steps through the slab (chains of 5, then 40 more blocks).
    both(Array.from({ length: 200 }, (_, w) => chain(BigInt(w + 1), 0, 5)));
    both(Array.from({ length: 200 }, (_, w) => chain(BigInt(w + 1), 5 + w * 100, 40)));
    const slab = tree.tableSlab.bytes;
    for (let w = 1; w <= 200; w += 2) remove(BigInt(w));
    // New workers, their tables stepping through the same sizes, take the removed ones' ranges:
    // the slab does not grow.
    both(Array.from({ length: 100 }, (_, w) => chain(BigInt(1000 + w), 0, 5)));
    both(Array.from({ length: 100 }, (_, w) => chain(BigInt(1000 + w), 5 + w * 100, 40)));
    expect(tree.tableSlab.bytes).toBe(slab);
    for (const w of [2n, 200n, 1000n, 1099n]) expect(tree.blockCount(w)).toBe(model.blockCount(w));
    for (const q of [[1n, 2n, 3n, 4n, 5n], Array.from({ length: 45 }, (_, i) => BigInt(i < 5 ? i + 1 : 105 + i))]) {
      expect(sortedScores(tree.findMatches(q))).toEqual(sortedScores(model.findMatches(q)));
    }
    // A table outgrows the slab into pages of its own, and is found whole there.
    both([chain(2n, 500_000, 3_000)]);
    expect(tree.blockCount(2n)).toBe(model.blockCount(2n));
    const big = tree.tables.find((t) => t !== null && t.count > 3_000)!;
    expect(big.slots.buffer).not.toBe(tree.tableSlab.a.buffer);
    const removed: RouterEvent = { workerId: 2n, event: { eventId: 1n, data: { type: 'removed', blockHashes: Array.from({ length: 3_000 }, (_, i) => BigInt(500_000 + i + 1) + (2n << 40n)) } } };
    both([removed]);
    expect([tree.size, tree.nodeCount]).toEqual([model.size, model.nodeCount]);
  });
});

describe('a shard tree sized by what a Stored event adds', () => {
  it('does not grow its arrays for the blocks of an event it already holds (a conversation resending its history)', async () => {
    const { ShardedIndexer } = await import('../src/indexer/sharded-indexer.js');
    const ix = await ShardedIndexer.create({ shards: 1, blockSize: 16 });
    try {
      const bytes = async (): Promise<number> => (await ix.stats()).reduce((k, s) => k + s.bytes, 0);
      ix.applyEvent(chain(1n, 0, 1_000)); // 1,001 of the 1,024 initial node slots
      await ix.flush();
      const before = await bytes();
      // The same 1,000 blocks under another worker, plus 10 new ones: 10 nodes and at most 1 edge.
      ix.applyEvent(chain(2n, 0, 1_010));
      await ix.flush();
      const grown = (await bytes()) - before;
      // Sized by the event's length it grew a whole step (16,384 nodes of 29 bytes) and
      // doubled both edge buffers; by what it adds, the 10 nodes fit the slots it had.
      expect(grown).toBeLessThan(16_384 * 16);
      const q = Array.from({ length: 1_010 }, (_, i) => BigInt(i + 1));
      const scores = ix.findMatchesSync(q).scores;
      expect([scores.get(1n), scores.get(2n)]).toEqual([1_000, 1_010]);
    } finally {
      await ix.close();
    }
  });
});
