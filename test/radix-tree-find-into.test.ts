/**
 * `RadixTree.findMatchesInto` (the allocation-free lookup) and `findMatches` give exactly the
 * Map-based model's scores on random event streams, in-thread and on a tree keeping its lookup arrays in shared memory
 * that starts tiny (so every array grows and the edge table is rebuilt in its spare buffer).
 */
import { describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import { createMatchResult, type MatchResult } from '../src/tree/match-result.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { sortedScores } from './support/compare.js';
import { generateStream } from './support/event-gen.js';

function asScores(r: MatchResult, n: number): [string, number][] {
  const m = new Map<bigint, number>();
  for (let i = 0; i < n; i++) m.set(r.workerIds[i]!, r.scores[i]!);
  return sortedScores({ scores: m, frequencies: [] });
}

describe('RadixTree.findMatchesInto', () => {
  it.each([
    ['in-thread', {}],
    ['shared memory, tiny initial capacity', { shared: true, initialCapacity: 2 }],
  ])('gives findMatches\' scores on random streams (%s)', (_name, options) => {
    const result = createMatchResult(1);
    let checked = 0;
    for (let seed = 1; seed <= 30; seed++) {
      const stream = generateStream(seed, 800);
      const tree = new RadixTree(options);
      const plain = new MapRadixTree(); // the Map-based model: scores by definition
      for (const op of stream.ops) {
        if (op.kind === 'event') {
          expect(tree.applyEvent(op.event)).toBe(plain.applyEvent(op.event));
        } else if (op.kind === 'removeWorker') {
          tree.removeWorker(op.workerId);
          plain.removeWorker(op.workerId);
        } else {
          const want = sortedScores(plain.findMatches(op.hashes, op.earlyExit));
          expect(asScores(result, tree.findMatchesInto(op.hashes, result, op.earlyExit))).toEqual(want);
          expect(sortedScores(tree.findMatches(op.hashes, op.earlyExit))).toEqual(want);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(1000);
  });

  it('publishes the shared layout only for a shared tree', () => {
    expect(new RadixTree().layout).toBeNull();
    const layout = new RadixTree({ shared: true }).layout!;
    expect(layout.header).toBeInstanceOf(SharedArrayBuffer);
    expect(layout.edgesA.growable).toBe(true);
  });
});
