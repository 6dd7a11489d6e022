/**
 * The member sets' pool (src/tree/member-sets.ts, range-pool.ts): sets that grow in lockstep
 * (every worker joins each node of a shared prompt in turn) reuse the positions their
 * neighbours outgrew, so the pool stays near the size of its sets instead of keeping every
 * outgrown generation; and lookups stay exact while sets grow in place, move into freed ranges
 * and shrink away.
 */
import { describe, expect, it } from 'vitest';
import { fleet } from '../bench/fleet-gen.js';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { sortedScores } from './support/compare.js';

/** Pool positions (capacity of the slot array) of a tree's member sets. */
const poolWords = (t: RadixTree): number => t.nodes.members.mSlot.length;

/** The capacity after `c` (member-sets.ts `growSet`): 1.5x, 1.25x from `MEMBERS_FROM` (64). */
const nextCap = (c: number): number => (c < 64 ? Math.max(c + 1, Math.ceil(c * 1.5)) : Math.ceil(c * 1.25));

/** A set's capacity once it holds `n` members: 2, then `nextCap` steps. */
function capacityFor(n: number): number {
  let c = 2;
  while (c < n) c = nextCap(c);
  return c;
}

const cleared = (workerId: bigint): RouterEvent => ({ workerId, event: { eventId: 2n, data: { type: 'cleared' } } });

describe('member sets pool', () => {
  it('keeps no outgrown generation in lockstep growth, and the pool under 1.3x its live sets (every generation kept was 2.9x)', () => {
    const f = fleet(512, 'shared', 16, 0);
    const tree = new RadixTree();
    for (const e of f.events) expect(tree.applyEvent(e)).toBe('ok');
    // 16 nodes of 512 members in sets of capacity 563.
    const live = 16 * capacityFor(512);
    expect(tree.nodes.members.poolUsed).toBe(live);
    // Every outgrown generation (2, 3, 5, ..., 473) kept beside them would be 2.9x.
    let all = 0;
    for (let c = 2; c < 512; c = nextCap(c)) all += c;
    expect(16 * all + live).toBeGreaterThan(2.8 * live);
    // In-thread, the live ranges slide down over the free ones before a move would grow the
    // pool (member-sets.ts `slidePool`): 1.22x here, the arrays' growth step and the last moves
    // (without: 1.65x, the free ranges of the generation before left behind).
    expect(poolWords(tree)).toBeLessThan(1.3 * live);
    const model = new MapRadixTree();
    for (const e of f.events) model.applyEvent(e);
    for (const q of [f.prompt, f.chains[0]!, f.chains[511]!]) expect(sortedScores(tree.findMatches(q))).toEqual(sortedScores(model.findMatches(q)));
  });

  it('keeps lookups exact while arrays grow, move into freed ranges and shrink away', () => {
    const f = fleet(300, 'shared', 6, 2);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const check = (): void => {
      for (const q of [f.prompt, f.chains[0]!, f.chains[299]!]) {
        expect(sortedScores(tree.findMatches(q))).toEqual(sortedScores(model.findMatches(q)));
      }
    };
    const apply = (e: RouterEvent): void => {
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    };
    for (const e of f.events) apply(e);
    check();
    // Clear every other worker (arrays shrink under the lower threshold and come back), then
    // store them again in reverse order (arrays grow into the ranges the shrinking freed).
    for (let w = 0; w < 300; w += 2) apply(cleared(f.workers[w]!));
    check();
    for (let w = 298; w >= 0; w -= 2) apply(f.events[w]!);
    check();
    for (let w = 0; w < 300; w++) if (w % 3 !== 0) apply(cleared(f.workers[w]!));
    check();
    for (let w = 0; w < 300; w++) if (w % 3 !== 0) apply(f.events[w]!);
    check();
    expect(tree.size).toBe(model.size);
  });

  it('keeps each worker\'s own hashes through slides: removals by them, and a dump that rebuilds the same tree', () => {
    // Lockstep growth past 64 members slides the pool (in-thread) many times over.
    const f = fleet(700, 'shared', 12, 1);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const apply = (e: RouterEvent): void => {
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    };
    for (const e of f.events) apply(e);
    const blocks = (w: number): { blockHash: bigint }[] => (f.events[w]!.event.data as { blocks: { blockHash: bigint }[] }).blocks;
    // Every third worker removes its last 4 prompt blocks and its private one, by its own hashes.
    for (let w = 0; w < 700; w += 3) {
      apply({ workerId: f.workers[w]!, event: { eventId: 1n, data: { type: 'removed', blockHashes: blocks(w).slice(8).map((b) => b.blockHash) } } });
    }
    // A hash another worker holds is not this worker's: nothing is removed.
    apply({ workerId: f.workers[1]!, event: { eventId: 1n, data: { type: 'removed', blockHashes: [blocks(2)[0]!.blockHash] } } });
    for (let w = 0; w < 700; w += 3) apply(f.events[w]!);
    const rebuilt = new RadixTree();
    for (const e of tree.dumpEvents()) expect(rebuilt.applyEvent(e)).toBe('ok');
    for (const q of [f.prompt, f.chains[0]!, f.chains[1]!, f.chains[699]!]) {
      const want = sortedScores(model.findMatches(q));
      expect(sortedScores(tree.findMatches(q))).toEqual(want);
      expect(sortedScores(rebuilt.findMatches(q))).toEqual(want);
    }
    for (let w = 0; w < 700; w += 7) {
      expect(tree.blockCount(f.workers[w]!)).toBe(model.blockCount(f.workers[w]!));
      expect(rebuilt.blockCount(f.workers[w]!)).toBe(model.blockCount(f.workers[w]!));
    }
    // Every pair goes by its worker's own hashes, in both trees.
    for (const t of [tree, rebuilt]) {
      for (let w = 0; w < 700; w++) {
        expect(t.applyEvent({ workerId: f.workers[w]!, event: { eventId: 2n, data: { type: 'removed', blockHashes: blocks(w).map((b) => b.blockHash) } } })).toBe('ok');
      }
      expect(t.size).toBe(0);
    }
  });
});

