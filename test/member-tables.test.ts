/**
 * Member tables (src/tree/member-sets.ts `find`): sets of `TABLE_FROM`+ workers find a member
 * through their own table, smaller ones by a scan, and a pair is named by its node, so members
 * move (removal swaps, set growth) without their workers' lookups being told. Random churn on
 * prompts that 40 workers share takes sets across both thresholds many times; every status,
 * every worker's block count and every lookup is checked against the Map-based model, and each
 * worker's blocks are then removed by hash (each found through its lookup after all the moves).
 */
import { describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import { fleet } from '../bench/fleet-gen.js';
import type { RouterEvent, StoredBlock } from '../src/protocol/types.js';
import { TABLE_FROM, TABLE_UNDER } from '../src/tree/member-sets.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { sortedScores } from './support/compare.js';
import { Rng } from './support/event-gen.js';

const removed = (workerId: bigint, hashes: bigint[]): RouterEvent => ({ workerId, event: { eventId: 1n, data: { type: 'removed', blockHashes: hashes } } });
const cleared = (workerId: bigint): RouterEvent => ({ workerId, event: { eventId: 2n, data: { type: 'cleared' } } });
const blocksOf = (e: RouterEvent): StoredBlock[] => (e.event.data as { blocks: StoredBlock[] }).blocks;

/** The same chain under other block hashes (a worker that stores the blocks again, rehashed). */
function rehashed(e: RouterEvent, salt: bigint): RouterEvent {
  const blocks = blocksOf(e).map((b) => ({ ...b, blockHash: b.blockHash ^ salt }));
  return { workerId: e.workerId, event: { eventId: 3n, data: { type: 'stored', parentHash: null, blocks } } };
}

describe('member tables', () => {
  it('thresholds leave room for churn around them', () => {
    expect(TABLE_UNDER).toBeLessThan(TABLE_FROM);
  });

  it.each([1, 2, 3])('random churn across the table thresholds stays exact (seed %i)', (seed) => {
    const workers = 40;
    const f = fleet(workers, 'shared', 6, 2);
    const rng = new Rng(seed);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const apply = (e: RouterEvent): void => {
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    };
    const check = (): void => {
      for (const q of [f.prompt, f.chains[rng.u32() % workers]!, f.prompt.subarray(0, 3)]) {
        expect(sortedScores(tree.findMatches(q))).toEqual(sortedScores(model.findMatches(q)));
      }
      for (const w of f.workers) expect(tree.blockCount(w)).toBe(model.blockCount(w));
    };
    const salts = [0n, 0x5a5a_0000_0000_0001n, 0x1234_5678_9abc_def0n];
    for (let op = 0; op < 3_000; op++) {
      const w = rng.u32() % workers;
      const salt = salts[rng.u32() % salts.length]!;
      // Phases of 300 operations, mostly stores then mostly removals: sets grow past
      // `TABLE_FROM` and fall under `TABLE_UNDER` again and again.
      const r = (rng.u32() % 10) + (Math.floor(op / 300) % 2 === 0 ? -3 : 3);
      if (r < 5) {
        apply(rehashed(f.events[w]!, salt));
      } else if (r < 9) {
        // Some of the chain's blocks, under one of the hashes it may hold them by.
        const hashes = blocksOf(f.events[w]!).map((b) => b.blockHash ^ salt).filter(() => rng.u32() % 2 === 0);
        apply(removed(f.workers[w]!, hashes.reverse()));
      } else {
        apply(cleared(f.workers[w]!));
      }
      if (op % 50 === 0) check();
    }
    check();
    // Every pair left is found by its worker's lookup under the hash it holds.
    for (let w = 0; w < workers; w++) {
      for (const salt of salts) apply(removed(f.workers[w]!, blocksOf(f.events[w]!).map((b) => b.blockHash ^ salt).reverse()));
    }
    check();
    expect(tree.size).toBe(0);
    expect(tree.nodes.members.liveSets).toBe(0);
  });

  it('a store under a new hash in a large set is found by that hash, and not the old one', () => {
    const workers = 3 * TABLE_FROM;
    const f = fleet(workers, 'shared', 4, 0);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const apply = (e: RouterEvent): string => {
      const s = tree.applyEvent(e);
      expect(s).toBe(model.applyEvent(e));
      return s;
    };
    for (const e of f.events) apply(e);
    const salt = 0x77n;
    apply(rehashed(f.events[5]!, salt));
    const old = blocksOf(f.events[5]!).map((b) => b.blockHash);
    expect(apply(removed(f.workers[5]!, [old[3]!]))).toBe('block_not_found');
    expect(apply(removed(f.workers[5]!, [old[3]! ^ salt]))).toBe('ok');
    expect(tree.blockCount(f.workers[5]!)).toBe(3);
    expect(sortedScores(tree.findMatches(f.prompt))).toEqual(sortedScores(model.findMatches(f.prompt)));
  });
});

describe('member sets after a peak (in-thread)', () => {
  it('give their records and pool back, renumbered, and every lookup and removal stays exact', () => {
    // 32 prompts of 8 blocks, each shared by a group of 3 of the 96 workers: 256 sets of 3.
    const workers = 96;
    const f = fleet(workers, 'groups', 8, 1, 3);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    const apply = (e: RouterEvent): void => {
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    };
    const check = (): void => {
      for (let w = 0; w < workers; w += 5) {
        expect(sortedScores(tree.findMatches(f.chains[w]!))).toEqual(sortedScores(model.findMatches(f.chains[w]!)));
      }
      for (const w of f.workers) expect(tree.blockCount(w)).toBe(model.blockCount(w));
    };
    for (const e of f.events) apply(e);
    const m = tree.nodes.members;
    const peak = m.bytesBy;
    expect(m.liveSets).toBe(256);
    check();
    // Down to 2 shared prompts: every other group's second and third workers leave.
    for (let w = 2; w < workers; w += 3) if (w % 48 !== 2) apply(cleared(f.workers[w]!));
    for (let w = 1; w < workers; w += 3) if (w % 48 !== 1) apply(cleared(f.workers[w]!));
    expect(m.liveSets).toBe(16);
    const after = m.bytesBy;
    expect(after.records).toBeLessThan(peak.records / 4);
    expect(after.pool).toBeLessThan(peak.pool / 4);
    check();
    // Every pair left is removed by its hash; the sets come back and go again.
    for (const e of f.events) apply(e);
    expect(m.liveSets).toBe(256);
    check();
    for (let w = 0; w < workers; w++) apply(removed(f.workers[w]!, blocksOf(f.events[w]!).map((b) => b.blockHash).reverse()));
    expect(tree.size).toBe(0);
    expect(m.liveSets).toBe(0);
  });
});
describe('member tables past 65,535 positions', () => {
  it('take two words an entry, and stay exact through growth and removals', () => {
    // 1.5x steps from 2: a set of 66,000 workers has a capacity past 65,535 (61,446 -> 92,169),
    // and indexes past 16 bits.
    const workers = 66_000;
    const f = fleet(workers, 'shared', 2, 0);
    const tree = new RadixTree();
    const model = new MapRadixTree();
    for (const e of f.events) expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    const same = (): void => {
      expect(sortedScores(tree.findMatches(f.prompt))).toEqual(sortedScores(model.findMatches(f.prompt)));
    };
    same();
    // Removals from the middle and the ends (each a table delete and a moved last member), and
    // a store under a new hash (found by it, the old one gone).
    for (let w = 0; w < workers; w += 97) {
      const e = removed(f.workers[w]!, [blocksOf(f.events[w]!)[1]!.blockHash]);
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    }
    const re = rehashed(f.events[1]!, 0x99n);
    expect(tree.applyEvent(re)).toBe(model.applyEvent(re));
    same();
    for (let w = 0; w < workers; w += 13) {
      const e = removed(f.workers[w]!, blocksOf(w === 1 ? re : f.events[w]!).map((b) => b.blockHash).reverse());
      expect(tree.applyEvent(e)).toBe(model.applyEvent(e));
    }
    same();
    for (let w = 0; w < workers; w += 1_000) expect(tree.blockCount(f.workers[w]!)).toBe(model.blockCount(f.workers[w]!));
  }, 60_000);
});
