/**
 * Root keys (edge-table.ts `ROOT_SLOTS`): the counting filter of the root's children that lets a
 * lookup stop without probing the edge table. Random streams whose first blocks collide in the
 * filter's bits (many keys per slot) check after every event that each count equals the root
 * children the table holds with those bits, and that lookups equal the Map-based reference's
 * (`findMatches`, and `findMatchesInto`, which probes the first hash before copying the rest).
 */
import { describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import { ROOT_MASK, ROOT_SLOTS } from '../src/tree/edge-table.js';
import { createMatchResult } from '../src/tree/match-result.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { Rng } from './support/event-gen.js';
import { sortedScores } from './support/compare.js';

/** 24 first-block keys on 4 filter slots (low bits 5, 6, 7, 8), high halves apart. */
const FIRST = Array.from({ length: 24 }, (_, i) => (BigInt(i + 1) << 32n) | BigInt(5 + (i % 4) + ROOT_SLOTS * (1 + (i >> 2))));

describe('root keys', () => {
  it('count exactly the root children by key bits, through stores, removes and clears, and never hide one', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const rng = new Rng(seed);
      const tree = new RadixTree({ initialCapacity: 4 });
      const result = createMatchResult(1);
      const model = new MapRadixTree();
      // Per worker, the chains it stored: [block hashes], to remove some later.
      const held = new Map<bigint, bigint[][]>();
      let eventId = 0n;
      let ext = 1n;
      for (let op = 0; op < 150; op++) {
        const worker = BigInt(1 + rng.int(3));
        const mine = held.get(worker) ?? [];
        held.set(worker, mine);
        let data: RouterEvent['event']['data'];
        const r = rng.int(10);
        if (r < 6 || mine.length === 0) {
          const first = FIRST[rng.int(FIRST.length)]!;
          const n = 1 + rng.int(3);
          const blocks = Array.from({ length: n }, (_, i) => ({ blockHash: ext++, tokensHash: i === 0 ? first : first * 31n + BigInt(i) }));
          mine.push(blocks.map((b) => b.blockHash));
          data = { type: 'stored', parentHash: null, blocks };
        } else if (r < 9) {
          const chain = mine[rng.int(mine.length)]!;
          // A chain's first block alone (its children stay: hollow root child) or all of it.
          data = { type: 'removed', blockHashes: rng.int(2) === 0 ? [chain[0]!] : [...chain] };
        } else {
          held.set(worker, []);
          data = { type: 'cleared' };
        }
        const e: RouterEvent = { workerId: worker, event: { eventId: eventId++, data } };
        expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
        const counts = new Int32Array(ROOT_SLOTS);
        for (const k of FIRST) {
          const slot = Number(k & BigInt(ROOT_MASK));
          if (tree.edges.find(0, Number(k & 0xffff_ffffn), Number(k >> 32n)) >= 0) counts[slot] = counts[slot]! + 1;
        }
        // Only these keys are ever root children: every other count must stay 0.
        let total = 0;
        for (const c of tree.edges.rootCounts) total += c;
        expect([5, 6, 7, 8].map((s) => tree.edges.rootCounts[s])).toEqual([5, 6, 7, 8].map((s) => counts[s]));
        expect(total).toBe(counts.reduce((a, b) => a + b, 0));
        for (const k of FIRST) {
          const q = [k, k * 31n + 1n];
          const want = sortedScores(model.findMatches(q));
          expect(sortedScores(tree.findMatches(q))).toEqual(want);
          // findMatchesInto takes the first step on the first hash alone before it copies the
          // rest (radix-tree.ts): it must neither miss a root child nor mis-copy the rest, also
          // past the scratch's first size (a long tail of hashes nobody holds).
          const long = new BigUint64Array(700);
          long.set(q);
          for (let i = 2; i < long.length; i++) long[i] = BigInt(9_000_000 + i);
          for (const hashes of [BigUint64Array.from(q), long, BigUint64Array.of(k)]) {
            const n = tree.findMatchesInto(hashes, result);
            const got = [...result.workerIds.subarray(0, n)].map((w, i) => [w, result.scores[i]!] as const);
            const expected = hashes.length === 1 ? sortedScores(model.findMatches([k])) : want;
            expect(sortedScores({ scores: new Map(got), frequencies: [] })).toEqual(expected);
          }
        }
      }
    }
  });
});
