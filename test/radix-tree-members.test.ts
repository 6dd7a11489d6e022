/**
 * Member sets' id words (src/tree/member-sets.ts) and the bulk listing of the lookup walk
 * (walk.ts): nodes crossing the thresholds both ways (built at 64 workers, dropped under 32, rebuilt),
 * arrays relocated as they grow, members swapped out on removal, and every branch of the walk
 * around a bulk set (it lasts to the end; gives way to a few workers, continuing or new; to
 * many; changes again after giving way; a dropped worker comes back deeper), each lookup
 * checked against the Map-based model, in-thread and through 2 shard threads.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import { fleet } from '../bench/fleet-gen.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent, StoredBlock } from '../src/protocol/types.js';
import { MEMBERS_FROM, MEMBERS_UNDER, SET_WORDS } from '../src/tree/member-sets.js';
import { createMatchResult, type MatchResult } from '../src/tree/match-result.js';
import { findChild } from '../src/tree/edge-table.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { sortedScores } from './support/compare.js';
import { Rng } from './support/event-gen.js';
import { createFaultyIndexer } from './support/faulty-shards.js';

function asScores(r: MatchResult, n: number): [string, number][] {
  const m = new Map<bigint, number>();
  for (let i = 0; i < n; i++) {
    expect(m.has(r.workerIds[i]!), `worker ${r.workerIds[i]} listed twice`).toBe(false);
    m.set(r.workerIds[i]!, r.scores[i]!);
  }
  return sortedScores({ scores: m, frequencies: [] });
}

const removed = (workerId: bigint, hashes: bigint[]): RouterEvent => ({ workerId, event: { eventId: 1n, data: { type: 'removed', blockHashes: hashes } } });
const stored = (workerId: bigint, parentHash: bigint | null, blocks: StoredBlock[]): RouterEvent => ({ workerId, event: { eventId: 0n, data: { type: 'stored', parentHash, blocks } } });
const blocksOf = (e: RouterEvent): StoredBlock[] => (e.event.data as { blocks: StoredBlock[] }).blocks;

/** The offset of the id words of the member set on the path's node at `depth` (1-based), or -1. */
function memberOffset(tree: RadixTree, path: BigUint64Array, depth: number): number {
  let node = 0;
  const n = tree.nodes;
  for (let i = 0; i < depth; i++) {
    const lo = Number(path[i]! & 0xffffffffn);
    const hi = Number(path[i]! >> 32n);
    const c = findChild(tree.edges.slotsView, tree.edges.maskValue, n.parent, n.node, node, lo | 0, hi | 0);
    if (c === -1) throw new Error(`no node at depth ${i + 1}`);
    node = c;
  }
  const w = n.w0(node);
  return w >= 0 ? -1 : n.members.sets[(-w - 2) * SET_WORDS + 4]!;
}

const open: ShardedIndexer[] = [];
afterAll(async () => {
  await Promise.all(open.map((ix) => ix.close()));
});

describe('member sets with id words', () => {
  it('are built at the threshold, dropped under the lower one and rebuilt, with exact lookups throughout', () => {
    const workers = 100;
    const f = fleet(workers, 'shared', 12, 4);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const result = createMatchResult(1);
    const check = (): void => {
      for (const q of [f.prompt, f.chains[0]!, f.chains[workers - 1]!, f.prompt.subarray(0, 5)]) {
        const want = sortedScores(model.findMatches(q));
        expect(asScores(result, tree.findMatchesInto(q, result))).toEqual(want);
        expect(sortedScores(tree.findMatches(q))).toEqual(want);
      }
    };
    const apply = (e: RouterEvent): void => {
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    };
    for (let w = 0; w < workers; w++) {
      apply(f.events[w]!);
      expect(memberOffset(tree, f.prompt, 1) >= 0, `${w + 1} workers`).toBe(w + 1 >= MEMBERS_FROM);
      if (w % 7 === 0 || w + 1 === MEMBERS_FROM) check();
    }
    // Down: each worker drops its whole chain (leaf first), until under the lower threshold.
    let holders = workers;
    for (let w = 0; holders >= MEMBERS_UNDER - 1; w++, holders--) {
      apply(removed(f.workers[w]!, blocksOf(f.events[w]!).map((b) => b.blockHash).reverse()));
      expect(memberOffset(tree, f.prompt, 1) >= 0, `${holders - 1} holders`).toBe(holders - 1 >= MEMBERS_UNDER);
      if (holders % 5 === 0) check();
    }
    check();
    // Up again past the threshold: rebuilt from the list.
    for (let w = 0; w < workers - holders; w++) apply(f.events[w]!);
    expect(memberOffset(tree, f.prompt, 1)).toBeGreaterThanOrEqual(0);
    check();
  });

  it.each([1, 2, 3])('random churn on a 150-worker prompt stays exact (seed %i)', (seed) => {
    const workers = 150;
    const f = fleet(workers, 'shared', 16, 6);
    const rng = new Rng(seed);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const result = createMatchResult(1);
    const apply = (e: RouterEvent): void => {
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    };
    for (const e of f.events) apply(e);
    for (let step = 0; step < 600; step++) {
      const w = rng.int(workers);
      const id = f.workers[w]!;
      const blocks = blocksOf(f.events[w]!);
      const r = rng.int(12);
      if (r < 4) apply(removed(id, [blocks[rng.int(blocks.length)]!.blockHash])); // mid-path: the set changes by one
      else if (r < 5) apply(removed(id, blocks.slice(rng.int(blocks.length)).map((b) => b.blockHash).reverse())); // a suffix
      else if (r < 6) apply({ workerId: id, event: { eventId: 2n, data: { type: 'cleared' } } });
      else if (r < 7) {
        tree.removeWorker(id);
        model.removeWorker(id);
      } else if (r < 8) {
        // A worker that keeps only the tail of another's chain: it joins deep in the path
        // without the prompt (a new worker where the bulk set gives way).
        const other = blocksOf(f.events[rng.int(workers)]!);
        const from = 10 + rng.int(other.length - 10);
        apply(stored(id, null, other));
        apply(removed(id, other.slice(0, from).map((b) => b.blockHash)));
      } else apply(f.events[w]!);
      if (step % 3 === 0) {
        const chain = f.chains[rng.int(workers)]!;
        for (const q of [f.prompt, chain, chain.subarray(0, 1 + rng.int(chain.length))]) {
          const want = sortedScores(model.findMatches(q));
          expect(asScores(result, tree.findMatchesInto(q, result))).toEqual(want);
          expect(sortedScores(tree.findMatches(q))).toEqual(want);
          expect(asScores(result, tree.findMatchesInto(q, result, true))).toEqual(sortedScores(model.findMatches(q, true)));
        }
      }
    }
  });

  it('a bulk set that gives way to a few workers lists each once: continuing ones with the whole run, workers that missed the prompt not at all', () => {
    const workers = 80;
    const f = fleet(workers, 'shared', 10, 3);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    for (const e of f.events) {
      tree.applyEvent(e);
      model.applyEvent(e);
    }
    // Three more workers hold worker 0's private blocks without its prompt: after the prompt the
    // set gives way to worker 0 (continuing from depth 1) and these three, which missed the
    // prompt and so score nothing (a prefix cache cannot reuse blocks past a gap).
    const chain = blocksOf(f.events[0]!);
    for (const id of [1n, 2n, 3n]) {
      for (const e of [stored(id, null, chain), removed(id, chain.slice(0, 10).map((b) => b.blockHash))]) {
        expect(tree.applyEvent(e)).toBe('ok');
        expect(model.applyEvent(e)).toBe('ok');
      }
    }
    const result = createMatchResult(1);
    const n = tree.findMatchesInto(f.chains[0]!, result);
    const got = new Map(asScores(result, n));
    expect(n).toBe(workers);
    expect(got.get(f.workers[0]!.toString())).toBe(13);
    for (const id of ['1', '2', '3']) expect(got.has(id)).toBe(false);
    for (let w = 1; w < workers; w++) expect(got.get(f.workers[w]!.toString())).toBe(10);
    expect(asScores(result, n)).toEqual(sortedScores(model.findMatches(f.chains[0]!)));

    // A fourth joins one block deeper: the set changes again after giving way, so the bulk set
    // is visited after all, its members keeping the run that ended at depth 10.
    for (const e of [stored(4n, null, chain), removed(4n, chain.slice(0, 11).map((b) => b.blockHash))]) {
      tree.applyEvent(e);
      model.applyEvent(e);
    }
    const n2 = tree.findMatchesInto(f.chains[0]!, result);
    const got2 = new Map(asScores(result, n2));
    expect(n2).toBe(workers);
    expect(got2.has('4')).toBe(false);
    expect(got2.get(f.workers[0]!.toString())).toBe(13);
    for (let w = 1; w < workers; w++) expect(got2.get(f.workers[w]!.toString())).toBe(10);
    expect(asScores(result, n2)).toEqual(sortedScores(model.findMatches(f.chains[0]!)));
  });

  it('through 2 shard threads from tiny capacities: lookups read member sets in shared memory as they grow and move', async () => {
    const workers = 200;
    const f = fleet(workers, 'shared', 12, 4);
    const { ix } = await createFaultyIndexer({ shards: 2, blockSize: 16 }, { initialCapacity: 4 });
    open.push(ix);
    const tree = new RadixTree();
    const rng = new Rng(11);
    const result = createMatchResult();
    const held = f.events.map((e) => blocksOf(e).length);
    for (let w = 0; w < workers; w++) {
      ix.applyEvent(f.events[w]!);
      tree.applyEvent(f.events[w]!);
      if (w % 25 === 0) expect(asScores(result, ix.findMatchesInto(f.prompt, result))).toEqual(sortedScores(tree.findMatches(f.prompt)));
    }
    for (let step = 0; step < 500; step++) {
      const w = rng.int(workers);
      const blocks = blocksOf(f.events[w]!);
      let e: RouterEvent;
      if (held[w]! > 0 && rng.chance(0.75)) {
        held[w] = held[w]! - 1; // leaf first: prefix-closed, as every shard count must agree then
        e = removed(f.workers[w]!, [blocks[held[w]!]!.blockHash]);
      } else {
        held[w] = blocks.length;
        e = f.events[w]!;
      }
      ix.applyEvent(e);
      tree.applyEvent(e);
      if (step % 10 === 0) {
        for (const q of [f.prompt, f.chains[rng.int(workers)]!]) {
          expect(asScores(result, ix.findMatchesInto(q, result))).toEqual(sortedScores(tree.findMatches(q)));
          expect(sortedScores(await ix.findMatches(q))).toEqual(sortedScores(tree.findMatches(q)));
        }
      }
    }
  });
});
