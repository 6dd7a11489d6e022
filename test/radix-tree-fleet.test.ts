/**
 * Fleets of hundreds of workers sharing prefixes, against the Map-based model: the active-set
 * lookup (`findMatchesInto`) and `findMatches` after stores, removals in the middle of shared
 * paths (a worker keeps blocks below one it dropped), clears, worker removal and returns; on
 * the in-thread tree and through 2 shard threads (there with prefix-closed changes only, the
 * case in which every shard count must agree).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { createMatchResult, type MatchResult } from '../src/tree/match-result.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { sortedScores } from './support/compare.js';
import { Rng } from './support/event-gen.js';
import { fleet } from '../bench/fleet-gen.js';

function asScores(r: MatchResult, n: number): [string, number][] {
  const m = new Map<bigint, number>();
  for (let i = 0; i < n; i++) m.set(r.workerIds[i]!, r.scores[i]!);
  return sortedScores({ scores: m, frequencies: [] });
}

const removed = (workerId: bigint, hashes: bigint[]): RouterEvent => ({ workerId, event: { eventId: 1n, data: { type: 'removed', blockHashes: hashes } } });
const cleared = (workerId: bigint): RouterEvent => ({ workerId, event: { eventId: 2n, data: { type: 'cleared' } } });

const open: ShardedIndexer[] = [];
afterAll(async () => {
  await Promise.all(open.map((ix) => ix.close()));
});

describe('fleets sharing prefixes', () => {
  it.each([
    [300, 'shared'],
    [400, 'groups'],
  ] as const)('%i workers (%s prompts): lookups equal the Map model through stores, mid-path removals, clears and worker removal', (workers, shape) => {
    const f = fleet(workers, shape, 24, 8, 50);
    const rng = new Rng(workers);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const result = createMatchResult(1);
    const check = (): void => {
      const queries = [f.prompt, f.chains[rng.int(workers)]!, f.chains[rng.int(workers)]!.subarray(0, 1 + rng.int(30)), f.chains[0]!];
      for (const q of queries) {
        const want = sortedScores(model.findMatches(q));
        expect(asScores(result, tree.findMatchesInto(q, result))).toEqual(want);
        expect(sortedScores(tree.findMatches(q))).toEqual(want);
      }
    };
    for (const e of f.events) {
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    }
    check();
    for (let step = 0; step < 300; step++) {
      const w = rng.int(workers);
      const id = f.workers[w]!;
      const blocks = (f.events[w]!.event.data as { blocks: { blockHash: bigint }[] }).blocks;
      const r = rng.int(10);
      let e: RouterEvent | null = null;
      if (r < 4) e = removed(id, [blocks[rng.int(blocks.length)]!.blockHash]); // often mid-path
      else if (r < 5) e = cleared(id);
      else if (r < 6) {
        tree.removeWorker(id);
        model.removeWorker(id);
      } else e = f.events[w]!; // (re)store the whole chain
      if (e !== null) expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
      if (step % 10 === 0) check();
    }
    check();
  });

  it('through 2 shard threads, prefix-closed: every lookup equals the in-thread tree', async () => {
    const f = fleet(300, 'groups', 24, 8, 40);
    const ix = await ShardedIndexer.create({ shards: 2, blockSize: 16 });
    open.push(ix);
    const tree = new RadixTree();
    const rng = new Rng(7);
    const result = createMatchResult();
    for (const e of f.events) {
      ix.applyEvent(e);
      tree.applyEvent(e);
    }
    const held = f.events.map((e) => (e.event.data as { blocks: { blockHash: bigint }[] }).blocks.length);
    for (let step = 0; step < 400; step++) {
      const w = rng.int(300);
      const id = f.workers[w]!;
      const blocks = (f.events[w]!.event.data as { blocks: { blockHash: bigint }[] }).blocks;
      let e: RouterEvent;
      if (held[w]! > 0 && rng.chance(0.7)) {
        held[w] = held[w]! - 1; // evict the leaf: the cache stays prefix-closed
        e = removed(id, [blocks[held[w]!]!.blockHash]);
      } else {
        held[w] = blocks.length;
        e = f.events[w]!;
      }
      ix.applyEvent(e);
      tree.applyEvent(e);
      if (step % 20 === 0) {
        for (const q of [f.prompt, f.chains[rng.int(300)]!]) {
          expect(asScores(result, ix.findMatchesInto(q, result))).toEqual(sortedScores(tree.findMatches(q)));
        }
      }
    }
  });
});
