/**
 * A tree created with more than the default 1,024 node ids (`initialCapacity`, and the capacity
 * hints built on it) keeps one free-id bit per id: ids past 1,024 freed by removals are found and
 * reused, so the same churn never grows the arrays, and answers stay the model's.
 */
import { describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { replay, sortedScores } from './support/compare.js';

const N = 3_000;
const stored = (i: number, round: number): RouterEvent => ({
  workerId: 1n,
  event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: [{ blockHash: BigInt(round * 100_000 + i + 1), tokensHash: BigInt(round * 100_000 + i + 1) }] } },
});
const removed = (i: number, round: number): RouterEvent => ({ workerId: 1n, event: { eventId: 0n, data: { type: 'removed', blockHashes: [BigInt(round * 100_000 + i + 1)] } } });

describe('RadixTree initialCapacity above 1,024', () => {
  it('reuses freed ids past 1,024: the same churn three times takes no more memory', () => {
    const tree = new RadixTree({ initialCapacity: 4_096 });
    const model = new MapRadixTree();
    const bytes: number[] = [];
    for (let round = 0; round < 3; round++) {
      const events = [...Array.from({ length: N }, (_, i) => stored(i, round)), ...Array.from({ length: N - 10 }, (_, i) => removed(i, round))];
      expect(replay(tree, events).every((s) => s === 'ok')).toBe(true);
      replay(model, events);
      bytes.push(tree.bytes);
      for (const i of [0, 1_500, N - 11, N - 10, N - 1]) {
        const q = [BigInt(round * 100_000 + i + 1)];
        expect(sortedScores(tree.findMatches(q))).toEqual(sortedScores(model.findMatches(q)));
      }
    }
    expect([tree.size, tree.nodeCount]).toEqual([model.size, model.nodeCount]);
    expect(bytes[2]).toBe(bytes[0]);
  });
});
