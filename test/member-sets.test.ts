/**
 * Member sets (src/tree/member-sets.ts): a node's workers in one contiguous array once it holds
 * two or more. Edge cases of the structure, each checked against the Map-based model and the
 * tree's own dump: a node going 1 -> 2 -> many -> 1 workers (inline again, its set freed);
 * sets that grow past each other and move (every moved member's lookup repointed); freed ranges
 * reused; removal from the middle (the last member takes the place, and is found again by its
 * hash); the same hash twice in one Removed event; a worker removed across thousands of nodes.
 * Shared memory: test/radix-tree-members.test.ts (2 shard threads reading sets as they grow and
 * move) and test/read-past-writer.test.ts (reads past a writer halfway through a set's change).
 */
import { describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import type { RouterEvent, StoredBlock } from '../src/protocol/types.js';
import { findChild } from '../src/tree/edge-table.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples, sortedScores } from './support/compare.js';

const stored = (workerId: bigint, parentHash: bigint | null, blocks: StoredBlock[]): RouterEvent => ({ workerId, event: { eventId: 0n, data: { type: 'stored', parentHash, blocks } } });
const removed = (workerId: bigint, hashes: bigint[]): RouterEvent => ({ workerId, event: { eventId: 1n, data: { type: 'removed', blockHashes: hashes } } });

/** Block `i` of a chain of tokens hashes 1000 + i, with the worker's own external hash. */
const block = (w: bigint, i: number): StoredBlock => ({ blockHash: w * 1_000_000n + BigInt(i), tokensHash: 1000n + BigInt(i) });
const chain = (w: bigint, n: number): RouterEvent => stored(w, null, Array.from({ length: n }, (_, i) => block(w, i)));

/** Both trees, every event applied to both with the same status. */
function pair(): { tree: RadixTree; model: MapRadixTree; apply: (e: RouterEvent) => string } {
  const tree = new RadixTree({ initialCapacity: 4 });
  const model = new MapRadixTree();
  return {
    tree,
    model,
    apply: (e) => {
      const s = tree.applyEvent(e);
      expect(s).toBe(model.applyEvent(e));
      return s;
    },
  };
}

function same(tree: RadixTree, model: MapRadixTree, queries: bigint[][]): void {
  for (const q of queries) expect(sortedScores(tree.findMatches(q))).toEqual(sortedScores(model.findMatches(q)));
  expect(tree.size).toBe(model.size);
  expect(dumpTuples(tree.dumpEvents())).toEqual(dumpTuples(model.dumpEvents()));
  // Every held pair is found by its worker's lookup (a member that moved was repointed).
  for (const w of tree.workers()) expect(tree.blockCount(w)).toBe(model.blockCount(w));
}

/** The worker set word of the node at the end of `path` (tokens hashes). */
function w0At(tree: RadixTree, path: bigint[]): number {
  const n = tree.nodes;
  let node = 0;
  for (const t of path) {
    node = findChild(tree.edges.slotsView, tree.edges.maskValue, n.parent, n.node, node, Number(t & 0xffffffffn) | 0, Number(t >> 32n) | 0);
    expect(node).toBeGreaterThan(0);
  }
  return n.w0(node);
}

const tokens = (n: number): bigint[] => Array.from({ length: n }, (_, i) => 1000n + BigInt(i));

describe('member sets', () => {
  it('a node goes 1 -> 2 -> many -> 1 workers: a set from the second, inline again at one, its set freed', () => {
    const { tree, model, apply } = pair();
    const q = [tokens(3), tokens(1)];
    apply(chain(1n, 3));
    expect(w0At(tree, tokens(1))).toBeGreaterThanOrEqual(0);
    apply(chain(2n, 3));
    const w = w0At(tree, tokens(1));
    expect(w).toBeLessThan(-1);
    const m = tree.nodes.members;
    expect(m.count(-w - 2)).toBe(2);
    same(tree, model, q);
    for (let k = 3n; k <= 100n; k++) apply(chain(k, 3));
    expect(m.count(-w0At(tree, tokens(1)) - 2)).toBe(100);
    expect(m.liveSets).toBe(3);
    same(tree, model, q);
    for (let k = 1n; k <= 99n; k++) apply(removed(k, [k * 1_000_000n + 2n, k * 1_000_000n + 1n, k * 1_000_000n]));
    // Worker 100 alone again: inline on every node, no set or member left.
    for (let d = 1; d <= 3; d++) expect(w0At(tree, tokens(d))).toBeGreaterThanOrEqual(0);
    expect(m.liveSets).toBe(0);
    expect(m.liveMembers).toBe(0);
    same(tree, model, q);
    // Its lookup points at the inline pairs: removing them frees the tree.
    expect(apply(removed(100n, [100_000_002n, 100_000_001n, 100_000_000n]))).toBe('ok');
    expect(tree.nodeCount).toBe(1);
  });

  it('sets that grow past each other move, every moved member still found by its hash; freed ranges are reused', () => {
    const { tree, model, apply } = pair();
    // Two nodes (two prompts) joined alternately: each growth of one finds the other's range
    // after it, so it moves (from cap 2 on: 3, 5, 8, 12, ...).
    const a = (w: bigint): RouterEvent => stored(w, null, [{ blockHash: w * 10n, tokensHash: 7n }]);
    const b = (w: bigint): RouterEvent => stored(w, null, [{ blockHash: w * 10n + 1n, tokensHash: 8n }]);
    for (let w = 1n; w <= 200n; w++) {
      apply(a(w));
      apply(b(w));
    }
    same(tree, model, [[7n], [8n]]);
    // Each worker's two pairs are where its lookup says: remove one of them by hash, every 3rd worker.
    for (let w = 3n; w <= 200n; w += 3n) expect(apply(removed(w, [w * 10n]))).toBe('ok');
    same(tree, model, [[7n], [8n]]);
    const m = tree.nodes.members;
    const used = m.poolUsed;
    // Dissolve both sets (all but one worker leave), then build them again: the pool reuses its ranges.
    for (let w = 2n; w <= 200n; w++) {
      tree.removeWorker(w);
      model.removeWorker(w);
    }
    expect(m.liveSets).toBe(0);
    expect(m.poolUsed).toBe(0);
    for (let w = 2n; w <= 200n; w++) {
      apply(a(w));
      apply(b(w));
    }
    same(tree, model, [[7n], [8n]]);
    expect(m.poolUsed).toBeLessThanOrEqual(used + 2 * 300);
  });

  it('removal from the middle: the last member takes the place and is removed by its hash after', () => {
    const { tree, model, apply } = pair();
    for (let w = 1n; w <= 10n; w++) apply(chain(w, 2));
    const set = -w0At(tree, tokens(1)) - 2;
    const m = tree.nodes.members;
    const off = m.offset(set);
    const last = m.mSlot[off + 9]!;
    const middle = m.mSlot[off + 4]!;
    const idOf = (slot: number): bigint => tree.slotIds[slot]!;
    // The middle worker drops both blocks (deepest first): the last member moves into its place.
    const mid = idOf(middle);
    apply(removed(mid, [mid * 1_000_000n + 1n, mid * 1_000_000n]));
    expect(m.mSlot[off + 4]).toBe(last);
    expect(m.mSlot[off + 9]).toBe(-1);
    same(tree, model, [tokens(2)]);
    // The moved worker's pair is found by its hash.
    const moved = idOf(last);
    expect(apply(removed(moved, [moved * 1_000_000n + 1n, moved * 1_000_000n]))).toBe('ok');
    same(tree, model, [tokens(2)]);
    expect(m.count(set)).toBe(8);
  });

  it('the same hash twice in one Removed event drops the pair once and reports the second missing', () => {
    const { tree, model, apply } = pair();
    for (let w = 1n; w <= 3n; w++) apply(chain(w, 1));
    // Worker 3 is the set's last member: no other takes its place, its position is cleared.
    expect(apply(removed(3n, [3_000_000n, 3_000_000n]))).toBe('block_not_found');
    same(tree, model, [tokens(1)]);
    // Worker 1 is the first: worker 2 moves into its place, and is not taken for it.
    expect(apply(removed(1n, [1_000_000n, 1_000_000n]))).toBe('block_not_found');
    same(tree, model, [tokens(1)]);
    expect(tree.blockCount(2n)).toBe(1);
  });

  it('a worker removed across thousands of shared nodes leaves every set exact', () => {
    const { tree, model, apply } = pair();
    const n = 3000;
    for (let w = 1n; w <= 3n; w++) apply(chain(w, n));
    // Worker 4 holds the first half only: a 4-member set per node there, 3 past it.
    apply(chain(4n, n / 2));
    const m = tree.nodes.members;
    expect(m.liveMembers).toBe(3 * n + n / 2);
    tree.removeWorker(2n);
    model.removeWorker(2n);
    expect(m.liveMembers).toBe(2 * n + n / 2);
    same(tree, model, [tokens(n), tokens(10)]);
    tree.removeWorker(1n);
    model.removeWorker(1n);
    // Past the half, worker 3 alone: inline again; before it, sets of workers 3 and 4.
    expect(m.liveSets).toBe(n / 2);
    expect(m.liveMembers).toBe(n);
    same(tree, model, [tokens(n), tokens(n / 2 + 1)]);
    tree.removeWorker(4n);
    model.removeWorker(4n);
    expect(m.liveSets).toBe(0);
    same(tree, model, [tokens(n)]);
  });
});
