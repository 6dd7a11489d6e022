/**
 * The member arrays' pool (src/tree/member-arrays.ts): arrays that grow in lockstep (every
 * worker joins each node of a shared prompt in turn) reuse the words their neighbours outgrew,
 * so the pool stays near the size of its members instead of keeping every outgrown generation;
 * and lookups stay exact while arrays grow in place, move into freed ranges and shrink away.
 */
import { describe, expect, it } from 'vitest';
import { fleet } from '../bench/fleet-gen.js';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { sortedScores } from './support/compare.js';

/** Pool words (capacity of the slot array) of a tree's member arrays. */
const poolWords = (t: RadixTree): number => (t.nodes.members as unknown as { mSlot: Int32Array }).mSlot.length;

const cleared = (workerId: bigint): RouterEvent => ({ workerId, event: { eventId: 2n, data: { type: 'cleared' } } });

describe('member arrays pool', () => {
  it('holds lockstep growth in under 1.6x its members (every outgrown generation kept was 1.88x)', () => {
    const f = fleet(512, 'shared', 16, 0);
    const tree = new RadixTree();
    for (const e of f.events) expect(tree.applyEvent(e)).toBe('ok');
    // 16 nodes of 512 members, arrays of 512 plus a capacity word each.
    const live = 16 * 513;
    // Outgrown generations 64 + 128 + 256 (+1 each) kept beside them: 1.88x.
    expect(16 * (65 + 129 + 257 + 513)).toBeGreaterThan(1.85 * live);
    expect(poolWords(tree)).toBeLessThan(1.6 * live);
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
});
