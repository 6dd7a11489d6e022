/**
 * ApproxIndex over a real RadixTree: routing decisions become blocks with a TTL, re-routing a
 * prefix re-arms it, expired blocks leave the tree, and size pruning removes the earliest
 * expiries first, deepest block first, leaving prefixes.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import { ApproxIndex } from '../src/router/approx-index.js';
import { RadixTree } from '../src/tree/radix-tree.js';

const W1 = 0x8000_0000_0000_0001n;
const W2 = 0x8000_0000_0000_0002n;

/** A prompt of n blocks: local hashes base+i, sequence hashes distinct per path. */
function prompt(base: bigint, n: number): { local: BigUint64Array; seq: BigUint64Array } {
  const local = BigUint64Array.from({ length: n }, (_, i) => base + BigInt(i));
  const seq = BigUint64Array.from({ length: n }, (_, i) => (base << 8n) + BigInt(i) + 0xabc0_0000_0000_0000n);
  return { local, seq };
}

function setup(options: { maxBlocks?: number; ttlMs?: number } = {}): { tree: RadixTree; ix: ApproxIndex; clock: { t: number } } {
  const clock = { t: 0 };
  const tree = new RadixTree();
  const ix = new ApproxIndex(tree, { ...options, now: () => clock.t });
  return { tree, ix, clock };
}

const score = (tree: RadixTree, local: BigUint64Array, w: bigint): number => tree.findMatches(local).scores.get(w) ?? 0;

describe('ApproxIndex: TTL', () => {
  it('a decision stores the prompt for the worker for 120 s by default, then it leaves the tree', () => {
    const { tree, ix, clock } = setup();
    const p = prompt(100n, 4);
    ix.recordDecision(W1, p.local, p.seq);
    expect(score(tree, p.local, W1)).toBe(4);
    expect(ix.size).toBe(4);
    clock.t = 119_999;
    expect(ix.expire()).toBe(0);
    expect(score(tree, p.local, W1)).toBe(4);
    clock.t = 120_000;
    expect(ix.expire()).toBe(4);
    expect(score(tree, p.local, W1)).toBe(0);
    expect(tree.size).toBe(0);
    expect(ix.stats()).toEqual({ decisions: 1, expired: 4, pruned: 0 });
  });

  it('routing a prefix again re-arms only the prefix: the tail expires first', () => {
    const { tree, ix, clock } = setup();
    const p = prompt(100n, 4);
    ix.recordDecision(W1, p.local, p.seq);
    clock.t = 60_000;
    ix.recordDecision(W1, p.local.subarray(0, 2), p.seq.subarray(0, 2));
    expect(tree.size).toBe(4); // the same blocks again: no duplicate pairs
    clock.t = 120_000;
    expect(ix.expire()).toBe(2);
    expect(score(tree, p.local, W1)).toBe(2);
    clock.t = 180_000;
    expect(ix.expire()).toBe(2);
    expect(tree.size).toBe(0);
  });

  it('expiry runs on the next decision too, and a custom TTL applies', () => {
    const { tree, ix, clock } = setup({ ttlMs: 5_000 });
    const a = prompt(100n, 3);
    const b = prompt(200n, 2);
    ix.recordDecision(W1, a.local, a.seq);
    clock.t = 5_000;
    ix.recordDecision(W2, b.local, b.seq);
    expect(score(tree, a.local, W1)).toBe(0);
    expect(score(tree, b.local, W2)).toBe(2);
    expect(ix.size).toBe(2);
  });
});

describe('ApproxIndex: pruning', () => {
  it('over maxBlocks, prunes to 80 %: earliest expiry first, deepest first, never the later decision', () => {
    const { tree, ix, clock } = setup({ maxBlocks: 10 });
    const a = prompt(100n, 6);
    const b = prompt(200n, 6);
    ix.recordDecision(W1, a.local, a.seq);
    clock.t = 1;
    ix.recordDecision(W2, b.local, b.seq); // 12 armed > 10: down to 8
    expect(ix.size).toBe(8);
    expect(ix.stats().pruned).toBe(4);
    expect(score(tree, a.local, W1)).toBe(2); // W1 keeps its 2-block prefix
    expect(score(tree, b.local, W2)).toBe(6); // W2 untouched
    expect(tree.size).toBe(8);
  });

  it('at exactly maxBlocks nothing is pruned', () => {
    const { ix } = setup({ maxBlocks: 6 });
    const a = prompt(100n, 6);
    ix.recordDecision(W1, a.local, a.seq);
    expect(ix.size).toBe(6);
    expect(ix.stats().pruned).toBe(0);
  });

  it('a hot prefix re-armed many times keeps one timer per block (stale heap entries skipped)', () => {
    const { tree, ix, clock } = setup({ maxBlocks: 100 });
    const p = prompt(100n, 8);
    for (let i = 0; i < 5_000; i++) {
      clock.t = i;
      ix.recordDecision(W1, p.local, p.seq);
    }
    expect(ix.size).toBe(8);
    expect(ix.stats().pruned).toBe(0);
    clock.t = 4_999 + 119_999;
    expect(ix.expire()).toBe(0);
    clock.t = 4_999 + 120_000;
    expect(ix.expire()).toBe(8);
    expect(tree.size).toBe(0);
  });

  it('bad options throw KVX_INVALID_OPTION', () => {
    for (const o of [{ ttlMs: 0 }, { maxBlocks: 0 }, { pruneTargetRatio: 1 }, { ttlMs: Infinity }]) {
      let err: unknown = null;
      try {
        new ApproxIndex(new RadixTree(), o);
      } catch (e) {
        err = e;
      }
      expect((err as KvIndexError).code).toBe(ErrorCode.InvalidOption);
    }
  });
});
