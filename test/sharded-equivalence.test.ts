/**
 * The same event streams through `shards: 0, 1, 2, 3` give identical scores and equivalent
 * dumps: random streams of prefix-closed engines, random streams of any shape (partial removes
 * that leave a worker's blocks below a gap, re-stores, clears: event-gen.ts), and a slice of
 * each shared workload checked against its `expect` oracle.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { readWorkload } from '../src/trace/workload.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { generateStream, type Op } from './support/event-gen.js';
import { prefixClosedStream } from './support/prefix-closed-gen.js';
import { sharedWorkload } from './support/shared.js';

const SHARDS = [0, 1, 2, 3];
const open: ShardedIndexer[] = [];

async function fleet(): Promise<ShardedIndexer[]> {
  const all = await Promise.all(SHARDS.map((shards) => ShardedIndexer.create({ shards, blockSize: 16 })));
  open.push(...all);
  return all;
}

afterAll(async () => {
  await Promise.all(open.map((ix) => ix.close()));
});

/**
 * Runs `ops` through a fresh fleet (shards 0..3): every lookup must score alike (without
 * earlyExit, which applies with one tree only: README), and at the end the dumps must be
 * equivalent, their event ids counting from 0. Returns how many lookups it compared.
 */
async function runEverywhere(ops: readonly Op[], label: string): Promise<number> {
  const ixs = await fleet();
  let finds = 0;
  for (const op of ops) {
    if (op.kind === 'event') {
      for (const ix of ixs) ix.applyEvent(op.event);
    } else if (op.kind === 'removeWorker') {
      await Promise.all(ixs.map((ix) => ix.removeWorker(op.workerId)));
    } else {
      const results = await Promise.all(ixs.map((ix) => ix.findMatches(op.hashes)));
      const want = sortedScores(results[0]!);
      for (const [k, r] of results.entries()) expect(sortedScores(r), `${label}, shards ${SHARDS[k]}`).toEqual(want);
      finds++;
    }
  }
  const dumps = await Promise.all(ixs.map((ix) => ix.dumpEvents()));
  const want = dumpTuples(dumps[0]!);
  for (const d of dumps) {
    expect(dumpTuples(d)).toEqual(want);
    expect(d.map((e) => e.event.eventId)).toEqual(d.map((_, i) => BigInt(i)));
  }
  await Promise.all(ixs.map((ix) => ix.close()));
  return finds;
}

describe('sharded indexer equivalence', () => {
  it('random prefix-closed streams give identical scores and equivalent dumps for 0..3 shards', async () => {
    for (let seed = 1; seed <= 10; seed++) await runEverywhere(prefixClosedStream(seed, 600).ops, `seed ${seed}`);
  }, 120_000);

  it('random streams with partial removes give identical scores and equivalent dumps for 0..3 shards', async () => {
    // Scores stop at a worker's first gap and a node that loses its last worker keeps its
    // children, so a worker's blocks and scores depend on its own events only, not on which
    // workers share its shard's tree (before: 10.7 % of these lookups differed between one tree
    // and two).
    let finds = 0;
    for (let seed = 1; seed <= 40; seed++) finds += await runEverywhere(generateStream(seed, 400).ops, `seed ${seed}`);
    expect(finds).toBeGreaterThan(1000);
  }, 240_000); // ~40 s alone; 120 s ran out once with a benchmark and another suite on the two cores

  describe.each(['conversation', 'synthetic-perworker'])('workload slice %s', (name) => {
    const path = sharedWorkload(name);
    it.skipIf(path === null)('matches the expect oracle through every shard count', async () => {
      const ixs = await fleet();
      let mismatches = 0;
      let matches = 0;
      for await (const op of readWorkload(path!, 12_000)) {
        if (op.op === 'event') {
          for (const ix of ixs) ix.applyEvent(op.event);
        } else if (op.op === 'match') {
          matches++;
          const results = await Promise.all(ixs.map((ix) => ix.findMatches(op.seq)));
          for (const r of results) {
            const ok = r.scores.size === op.expect.size && [...op.expect].every(([w, s]) => r.scores.get(w) === s);
            if (!ok) mismatches++;
          }
        }
      }
      expect(matches).toBeGreaterThan(1000);
      expect(mismatches).toBe(0);
      const dumps = await Promise.all(ixs.map((ix) => ix.dumpEvents()));
      const want = dumpTuples(dumps[0]!);
      for (const d of dumps) expect(dumpTuples(d)).toEqual(want);
    }, 120_000);
  });
});
