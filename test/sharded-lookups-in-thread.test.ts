/**
 * Lookups on the calling thread, reading the shards' trees from shared memory: exact at every
 * quiescent point while shard threads churn events under continuous lookups (trees that start
 * tiny, so arrays grow and edge tables are rebuilt while lookups read them); read-your-writes
 * by default, the latest applied state without it; the allocation-free result. Shards stopped
 * inside units of writing (a fixture) are read past, never into a half-changed node: a control
 * run with the walk's guard removed fails the bounds of that test (a worker one block short).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../src/errors.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { createMatchResult, type MatchResult } from '../src/tree/match-result.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { readWorkload } from '../src/trace/workload.js';
import { sortedScores } from './support/compare.js';
import { generateStream, Rng, type Op } from './support/event-gen.js';
import { createFaultyIndexer } from './support/faulty-shards.js';
import { prefixClosedStream } from './support/prefix-closed-gen.js';
import { sharedWorkload } from './support/shared.js';

let open: ShardedIndexer[] = [];
afterEach(async () => {
  await Promise.all(open.map((ix) => ix.close()));
  open = [];
});

async function tiny(shards: number, extra: { readYourWrites?: boolean } = {}): Promise<ShardedIndexer> {
  const { ix } = await createFaultyIndexer({ shards, blockSize: 16, ...extra }, { initialCapacity: 4 });
  open.push(ix);
  return ix;
}

/** A MatchResult's first n entries in the form of `sortedScores`. */
function resultScores(r: MatchResult, n: number): [string, number][] {
  const out: [string, number][] = [];
  for (let i = 0; i < n; i++) out.push([r.workerIds[i]!.toString(), r.scores[i]!]);
  return out.sort(([a], [b]) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0));
}

const W = 0x694d99badb9f7c07n;
function chain(workerId: bigint, n: number, salt: bigint): RouterEvent {
  const blocks = Array.from({ length: n }, (_, i) => ({
    blockHash: 0xf000_0000_0000_0000n + salt * 1000n + BigInt(i),
    tokensHash: 0xe000_0000_0000_0000n + BigInt(i),
  }));
  return { workerId, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks } } };
}
const toks = (n: number): BigUint64Array => BigUint64Array.from({ length: n }, (_, i) => 0xe000_0000_0000_0000n + BigInt(i));

/**
 * Applies `ops` to `ix` and to an in-thread tree in random batches. After each batch is sent,
 * this thread keeps looking up while the shards apply it (any state they pass through must read
 * cleanly: no score past the query), then, once flushed, every doc must score as in the
 * in-thread tree, through each lookup call. Returns the lookups made during the batches.
 */
async function churn(ix: ShardedIndexer, ops: readonly Op[], docs: ReadonlyArray<BigUint64Array | readonly bigint[]>, seed: number): Promise<number> {
  const result = createMatchResult(1);
  const ref = new RadixTree();
  const rng = new Rng(seed);
  let lookups = 0;
  let i = 0;
  while (i < ops.length) {
    for (let b = 1 + rng.int(60); b > 0 && i < ops.length; b--, i++) {
      const op = ops[i]!;
      if (op.kind === 'event') {
        ix.applyEvent(op.event);
        ref.applyEvent(op.event);
      } else if (op.kind === 'removeWorker') {
        void ix.removeWorker(op.workerId);
        ref.removeWorker(op.workerId);
      }
    }
    await Promise.resolve(); // the queued batches go out now; the shards apply them while...
    for (let k = 0; k < 100; k++) {
      // ...this thread keeps reading.
      const doc = docs[k % docs.length]!;
      const n = ix.findMatchesInto(doc, result);
      for (let j = 0; j < n; j++) expect(result.scores[j]).toBeLessThanOrEqual(doc.length);
      lookups++;
    }
    await ix.flush();
    for (const doc of docs) {
      const want = sortedScores(ref.findMatches(doc));
      expect(sortedScores(ix.findMatchesSync(doc)), `seed ${seed}`).toEqual(want);
      expect(resultScores(result, ix.findMatchesInto(doc, result)), `seed ${seed}`).toEqual(want);
      expect(sortedScores(await ix.findMatches(doc)), `seed ${seed}`).toEqual(want);
    }
  }
  return lookups;
}

describe('lookups on the calling thread', () => {
  it.each([1, 2, 3])('are exact at every quiescent point while shards churn under continuous lookups (shards: %i)', async (shards) => {
    const ix = await tiny(shards, { readYourWrites: false });
    let lookups = 0;
    for (let seed = 1; seed <= 4; seed++) {
      const { ops, docs } = prefixClosedStream(100 + seed, 1500);
      lookups += await churn(ix, ops, docs, seed);
    }
    const stats = await ix.stats();
    expect(stats.reduce((n, s) => n + s.nodes, 0)).toBeGreaterThan(4 * shards); // the trees grew
    expect(lookups).toBeGreaterThan(1000);
  });

  it.each([1, 2, 3])('are exact at every quiescent point while shards churn streams with partial removes, stopped inside units (shards: %i)', async (shards) => {
    // Streams of any shape (event-gen.ts): a worker removes a block and keeps its children, so
    // nodes turn hollow and are freed with chains of hollow ancestors while lookups read the
    // trees (from tiny capacities, past writers the fixture stops inside units of writing).
    const { ix } = await createFaultyIndexer({ shards, blockSize: 16, readYourWrites: false }, { initialCapacity: 4, stallEvery: 40 });
    open.push(ix);
    let lookups = 0;
    for (let seed = 1; seed <= 6; seed++) {
      const stream = generateStream(300 + seed, 800);
      lookups += await churn(ix, stream.ops, stream.docs.map((d) => BigUint64Array.from(d)), seed);
    }
    expect(lookups).toBeGreaterThan(1000);
  });

  it('are exact on the conversation workload while 2 shards ingest it (skips without ../shared)', async () => {
    const path = sharedWorkload('conversation');
    if (path === null) return;
    const ix = await tiny(2, { readYourWrites: false });
    const ref = new RadixTree();
    const result = createMatchResult();
    let pending = 0;
    const lookups: BigUint64Array[] = [];
    for await (const op of readWorkload(path)) {
      if (op.op === 'event') {
        ix.applyEvent(op.event);
        ref.applyEvent(op.event);
        if (++pending % 500 === 0) {
          await Promise.resolve();
          for (const h of lookups.slice(-50)) ix.findMatchesInto(h, result);
        }
      } else if (op.op === 'match' && lookups.length < 2000) {
        lookups.push(op.seq);
      }
      if (pending >= 20_000) break;
    }
    await ix.flush();
    expect(pending).toBeGreaterThan(1000);
    expect(lookups.length).toBeGreaterThan(100);
    for (const h of lookups) {
      expect(resultScores(result, ix.findMatchesInto(h, result))).toEqual(sortedScores(ref.findMatches(h)));
    }
  });

  it.each([1, 2, 3])('see an event applied just before them by default, blocking until the shards have it (shards: %i)', async (shards) => {
    const ix = await tiny(shards);
    const result = createMatchResult();
    for (let w = 0n; w < 8n; w++) {
      ix.applyEvent(chain(W + w, 3 + Number(w), w));
      const n = ix.findMatchesInto(toks(20), result);
      expect(n).toBe(Number(w) + 1);
      expect(resultScores(result, n)).toContainEqual([(W + w).toString(), 3 + Number(w)]);
      expect(ix.findMatchesSync(toks(20)).scores.get(W + w)).toBe(3 + Number(w));
    }
  });

  it.each([1, 2])('never see part of the new blocks of a Stored event, only all of them (shards: %i)', async (shards) => {
    // Shards store a Stored event's new blocks outside the readers' lock and link them in one
    // step (apply-batch.ts): a lookup sees the worker on the blocks already in the tree (one
    // step each), then on all of the event's blocks at once, never on part of the new chain.
    // With 2 shards the two workers live in different trees, so all 300 blocks are new there.
    const ix = await tiny(shards, { readYourWrites: false });
    const result = createMatchResult();
    const other = W + 1n;
    ix.applyEvent(chain(other, 40, 2n)); // the first 40 blocks exist before each round
    const w1 = W.toString();
    const existing = shards === 1 ? 40 : 0;
    const score = (): number => resultScores(result, ix.findMatchesInto(toks(300), result)).find(([id]) => id === w1)?.[1] ?? 0;
    let between = 0;
    let seenBefore = 0;
    for (let round = 0; round < 30; round++) {
      ix.applyEvent(chain(W, 300, 10n + BigInt(round)));
      await Promise.resolve(); // the batch goes out at the end of this task's microtasks
      const deadline = performance.now() + 10_000;
      for (let s = score(); s !== 300; s = score()) {
        if (s > existing) between++;
        else seenBefore++;
        if (performance.now() > deadline) throw new Error(`round ${round}: the event never became visible (score ${s})`);
      }
      ix.applyEvent({ workerId: W, event: { eventId: 0n, data: { type: 'cleared' } } });
      await ix.flush();
      expect(score()).toBe(0);
    }
    expect(between).toBe(0);
    // The lookups did run while events were pending (so the check above could have failed).
    expect(seenBefore).toBeGreaterThan(0);
  });

  it('read past a shard writer stopped inside a unit: between the states before and after, exact once quiescent', async () => {
    // The fixture stops a shard for ~1 ms at every 40th of some points inside units of writing,
    // holding its lock, as a descheduled thread does, some while a node's worker set is half
    // changed: lookups meanwhile read past it, except on paths through the unit's nodes.
    const { ix } = await createFaultyIndexer({ shards: 2, blockSize: 16, readYourWrites: false }, { stallEvery: 40 });
    open.push(ix);
    const ref = new RadixTree();
    const result = createMatchResult(1);
    // Three token paths; workers 2d, 2d + 1, 2d + 6 and 2d + 7 store on path d, so that each
    // shard holds two workers on each path (workers take shards in turn).
    const paths = [0n, 1n, 2n].map((d) => BigUint64Array.from({ length: 700 }, (_, i) => 0xe000_0000_0000_0000n + d * 1000n + BigInt(i)));
    const store = (k: number, n: number): RouterEvent => {
      const d = (k >> 1) % 3;
      const blocks = Array.from({ length: n }, (_, i) => ({ blockHash: 0xf000_0000_0000_0000n + BigInt(k) * 1000n + BigInt(i), tokensHash: paths[d]![i]! }));
      return { workerId: W + BigInt(k), event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks } } };
    };
    let prev = paths.map(() => new Map<string, number>());
    let during = 0;
    // 12 rounds, or more (up to 38) until a lookup has read past a stopped shard (the fixture
    // stops units, but whether a lookup comes meanwhile is the scheduler's business).
    for (let round = 1; round <= 12 || (round <= 38 && ix.readsPastWriter.answered === 0); round++) {
      // Stores only: in odd rounds workers 0-5 extend their paths, in even rounds workers 6-11
      // join them on the same blocks (a node's second worker: where the fixture stops a unit
      // half done). Earlier blocks are re-stored as they were, so no score falls between
      // quiescent points, and in even rounds the scores of workers 0-5 do not move at all.
      const leaders = round % 2 === 1;
      for (let k = leaders ? 0 : 6; k < (leaders ? 6 : 12); k++) {
        const ev = store(k, 10 + 15 * (leaders ? round : round - 1));
        ix.applyEvent(ev);
        ref.applyEvent(ev);
      }
      await Promise.resolve(); // the batches go out; the shards apply them while this thread reads
      const seen: [number, [string, number][]][] = [];
      const until = performance.now() + 8;
      for (let q = 0; performance.now() < until; q = (q + 1) % 3) seen.push([q, resultScores(result, ix.findMatchesInto(paths[q]!, result))]);
      await ix.flush();
      const next = paths.map((p) => new Map(sortedScores(ref.findMatches(p))));
      for (let q = 0; q < 3; q++) expect(resultScores(result, ix.findMatchesInto(paths[q]!, result))).toEqual([...next[q]!]);
      for (const [q, s] of seen) {
        const got = new Map(s);
        for (const w of new Set([...got.keys(), ...next[q]!.keys()])) {
          const g = got.get(w) ?? 0;
          expect(g, `round ${round} path ${q} worker ${w}`).toBeGreaterThanOrEqual(prev[q]!.get(w) ?? 0);
          expect(g, `round ${round} path ${q} worker ${w}`).toBeLessThanOrEqual(next[q]!.get(w) ?? 0);
        }
      }
      during += seen.length;
      prev = next;
    }
    expect(during).toBeGreaterThan(100);
    expect(ix.readsPastWriter.answered).toBeGreaterThan(0);
  });

  it('answer from the latest applied state without waiting when readYourWrites is false', async () => {
    const ix = await tiny(2, { readYourWrites: false });
    ix.applyEvent(chain(W, 4, 1n));
    // Still queued (batches go out at the end of the task): not applied, so not seen.
    expect(ix.findMatchesSync(toks(4)).scores.size).toBe(0);
    await ix.flush();
    expect(ix.findMatchesSync(toks(4)).scores).toEqual(new Map([[W, 4]]));
  });

  it('name the worker a slot holds now in Map lookups, not the one that left it', async () => {
    const ix = await tiny(1);
    ix.applyEvent(chain(W, 3, 1n));
    expect(ix.findMatchesSync(toks(3)).scores).toEqual(new Map([[W, 3]]));
    expect((await ix.findMatches(toks(3))).scores).toEqual(new Map([[W, 3]]));
    await ix.removeWorker(W);
    ix.applyEvent(chain(W + 7n, 2, 2n)); // takes the freed slot
    expect(ix.findMatchesSync(toks(3)).scores).toEqual(new Map([[W + 7n, 2]]));
    expect((await ix.findMatches(toks(3))).scores).toEqual(new Map([[W + 7n, 2]]));
  });

  it('list the workers of a prompt held by many (member sets with id words) in Map lookups as the in-thread tree does', async () => {
    const ix = await tiny(2);
    const ref = new RadixTree();
    for (let w = 0n; w < 150n; w++) {
      // Every worker holds the first 3 blocks; every tenth holds 5.
      const e = chain(W + w, w % 10n === 0n ? 5 : 3, w);
      ix.applyEvent(e);
      ref.applyEvent(e);
    }
    for (const n of [1, 3, 4, 5]) {
      const want = sortedScores(ref.findMatches(toks(n)));
      expect(want.length).toBe(150);
      expect(sortedScores(ix.findMatchesSync(toks(n)))).toEqual(want);
      expect(sortedScores(await ix.findMatches(toks(n)))).toEqual(want);
    }
  });

  it('fill a caller-owned result, growing it only when more workers match than it holds', async () => {
    const ix = await tiny(2);
    for (let w = 0n; w < 40n; w++) ix.applyEvent(chain(W + w, 2, w));
    const result = createMatchResult(4);
    expect(ix.findMatchesInto(toks(2), result)).toBe(40);
    const ids = result.workerIds;
    expect(new Set(Array.from(ids.subarray(0, 40)))).toEqual(new Set(Array.from({ length: 40 }, (_, i) => W + BigInt(i))));
    expect(ix.findMatchesInto(toks(1), result)).toBe(40);
    expect(result.workerIds).toBe(ids); // big enough now: reused
    expect(Array.from(result.scores.subarray(0, 40))).toEqual(Array(40).fill(1));
    expect(ix.findMatchesInto(toks(2), result, true)).toBe(40); // earlyExit: single-worker nodes end the walk
  });

  it('earlyExit never cuts a walk at a node that workers of two shards share', async () => {
    // Two workers on two shards hold the same chain: each shard sees one holder per node, and
    // both walks once stopped after the first block (scores 1 where the in-thread tree says 3).
    const ix = await tiny(2);
    ix.applyEvent(chain(W, 3, 1n));
    ix.applyEvent(chain(W + 1n, 3, 1n));
    const tree = new RadixTree();
    tree.applyEvent(chain(W, 3, 1n));
    tree.applyEvent(chain(W + 1n, 3, 1n));
    const result = createMatchResult();
    const want = resultScores(result, tree.findMatchesInto(toks(3), result, true));
    expect(want).toEqual([[W.toString(), 3], [(W + 1n).toString(), 3]]);
    expect(resultScores(result, ix.findMatchesInto(toks(3), result, true))).toEqual(want);
  });

  it('with expirationMs on shard threads: synchronous lookups refuse, findMatches reports frequencies', async () => {
    const ix = await ShardedIndexer.create({ shards: 2, blockSize: 16, expirationMs: 60_000 });
    open.push(ix);
    ix.applyEvent(chain(W, 3, 1n));
    expect(() => ix.findMatchesInto(toks(3), createMatchResult())).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
    await ix.findMatches(toks(3));
    expect((await ix.findMatches(toks(3))).frequencies).toEqual([1, 1, 1]);
  });

  it('match the in-thread engine with shards: 0 too', async () => {
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 16 });
    open.push(ix);
    ix.applyEvent(chain(W, 5, 1n));
    ix.applyEvent(chain(W + 1n, 2, 2n));
    const result = createMatchResult();
    expect(resultScores(result, ix.findMatchesInto(toks(5), result))).toEqual([[W.toString(), 5], [(W + 1n).toString(), 2]]);
    expect(ix.findMatchesSync(toks(5)).scores).toEqual(new Map([[W, 5], [W + 1n, 2]]));
  });
});
