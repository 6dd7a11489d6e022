/**
 * A worker's lookup (worker-table.ts) under long probe runs: every block hash of the worker is
 * chosen so that its home falls in the first or the last 2 % of the table at any capacity, so
 * entries sit far past the 7 slots a slot's distance field records exactly, and runs wrap
 * around the table's end. Stores, removals (by hash, repeated and absent hashes, in the middle
 * of chains), clears and re-stores, with a second worker sharing the chains (member pairs in
 * the same runs), against the Map-based model.
 */
import { describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { hashKey } from '../src/tree/worker-table.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { Rng } from './support/event-gen.js';

/** A u64 whose worker-table home is at the very start or end of any table (2^32 / 50 each side). */
function clusteredHash(rng: Rng): bigint {
  const edge = 0x1_0000_0000 / 50;
  for (;;) {
    const lo = rng.u32();
    const hi = rng.u32();
    const k = hashKey(lo | 0, hi | 0) >>> 0;
    if (k < edge || k >= 0x1_0000_0000 - edge) return (BigInt(hi) << 32n) | BigInt(lo);
  }
}

let eventId = 0n;
const stored = (workerId: bigint, parentHash: bigint | null, blocks: { blockHash: bigint; tokensHash: bigint }[]): RouterEvent => ({
  workerId,
  event: { eventId: eventId++, data: { type: 'stored', parentHash, blocks } },
});
const removed = (workerId: bigint, blockHashes: bigint[]): RouterEvent => ({ workerId, event: { eventId: eventId++, data: { type: 'removed', blockHashes } } });
const cleared = (workerId: bigint): RouterEvent => ({ workerId, event: { eventId: eventId++, data: { type: 'cleared' } } });

describe('worker tables with long probe runs', () => {
  it.each([1, 2, 3])('stay exact through stores, removals, clears and re-stores (seed %i)', (seed) => {
    const rng = new Rng(seed);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const A = 11n;
    const B = 22n;
    // 40 chains of 50 blocks: A's block hashes all clustered; B stores the first half of each
    // chain with its own hashes, so A's pairs there are members of a set.
    const chains = Array.from({ length: 40 }, () =>
      Array.from({ length: 50 }, () => ({ tokens: rng.u64(), a: clusteredHash(rng), b: rng.u64() })),
    );
    const storeA = (c: number, upTo = 50): RouterEvent =>
      stored(A, null, chains[c]!.slice(0, upTo).map((x) => ({ blockHash: x.a, tokensHash: x.tokens })));
    const storeB = (c: number): RouterEvent =>
      stored(B, null, chains[c]!.slice(0, 25).map((x) => ({ blockHash: x.b, tokensHash: x.tokens })));
    const apply = (e: RouterEvent): void => {
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    };
    const check = (): void => {
      expect(tree.blockCount(A)).toBe(model.blockCount(A));
      expect(tree.size).toBe(model.size);
      for (let q = 0; q < 6; q++) {
        const c = chains[rng.int(chains.length)]!;
        const hashes = c.slice(0, 1 + rng.int(50)).map((x) => x.tokens);
        expect(sortedScores(tree.findMatches(hashes))).toEqual(sortedScores(model.findMatches(hashes)));
      }
    };
    for (let c = 0; c < chains.length; c++) {
      apply(storeB(c));
      apply(storeA(c));
    }
    check();
    for (let step = 0; step < 600; step++) {
      const c = rng.int(chains.length);
      const r = rng.int(20);
      if (r < 12) {
        // One to four of A's hashes, anywhere in a chain, a repeat and an absent one at times.
        const hs = Array.from({ length: 1 + rng.int(4) }, () => chains[c]![rng.int(50)]!.a);
        if (rng.chance(0.2)) hs.push(hs[0]!);
        if (rng.chance(0.1)) hs.push(clusteredHash(rng));
        apply(removed(A, hs));
      } else if (r < 18) apply(storeA(c, 1 + rng.int(50)));
      else if (r < 19) apply(rng.chance(0.5) ? removed(B, [chains[c]![rng.int(25)]!.b]) : storeB(c));
      else apply(cleared(A));
      if (step % 25 === 0) check();
    }
    check();
    // Every hash A holds is found for removal exactly once; none it does not hold is.
    for (const chain of chains) {
      for (const x of chain) apply(removed(A, [x.a, x.a]));
    }
    expect(tree.blockCount(A)).toBe(0);
    expect(dumpTuples(tree.dumpEvents())).toEqual(dumpTuples(model.dumpEvents()));
  });

  it('a dump of a clustered table restores into a tree that answers alike', () => {
    const rng = new Rng(9);
    const tree = new RadixTree();
    let parent: bigint | null = null;
    const blocks: { blockHash: bigint; tokensHash: bigint }[] = [];
    for (let i = 0; i < 3000; i++) blocks.push({ blockHash: clusteredHash(rng), tokensHash: rng.u64() });
    for (let i = 0; i < blocks.length; i += 100) {
      tree.applyEvent(stored(5n, parent, blocks.slice(i, i + 100)));
      parent = blocks[i + 99]!.blockHash;
    }
    // Remove every third block's hash from the middle of the run, then restore from a dump.
    for (let i = 1; i < blocks.length; i += 3) expect(tree.applyEvent(removed(5n, [blocks[i]!.blockHash]))).toBe('ok');
    const copy = new RadixTree();
    for (const e of tree.dumpEvents()) copy.applyEvent(e);
    expect(dumpTuples(copy.dumpEvents())).toEqual(dumpTuples(tree.dumpEvents()));
    for (let i = 0; i < blocks.length; i++) {
      const want = i % 3 === 1 ? 'block_not_found' : 'ok';
      expect(copy.applyEvent(removed(5n, [blocks[i]!.blockHash])), `block ${i}`).toBe(want);
    }
    expect(copy.size).toBe(0);
  });
});
