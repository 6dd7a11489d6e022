/**
 * A tree built from a dump by the sized bulk path (src/tree/bulk-load.ts: node arrays and worker
 * lookups reserved from the snapshot's counts, then raw-word stores) answers every lookup as the
 * tree that was dumped: the workload has nodes held by one to 70 workers (member sets with id words from
 * 64), worker ids 0 and 2^64-1, a worker whose first event is rejected, and a worker that also
 * held blocks before the load. A second workload adds removals that leave hollow nodes; there a
 * dump re-roots the orphaned chains (dump.ts, the one inexact case, Dynamo's too), so the bulk
 * path is held to the event path on the same bytes instead. Both in-thread (`loadBincode`) and
 * through `ShardedIndexer.restoreSnapshot` with 0 and 2 shard threads.
 */
import { describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { decodeSnapshot } from '../src/protocol/snapshot-reader.js';
import { encodeSnapshot } from '../src/protocol/snapshot-writer.js';
import type { OverlapScores, RouterEvent } from '../src/protocol/types.js';
import { loadBincode } from '../src/tree/bulk-load.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { xorshift32 } from './support/rng.js';

const MAX = 2n ** 64n - 1n;

interface Workload {
  events: RouterEvent[];
  /** Tokens-hash paths from the root to every stored block: the lookups. */
  paths: bigint[][];
}

/**
 * 70 workers (ids 0, 2^64-1 and 68 large ones) over 4 shared prompts: each worker stores a
 * prompt (the first 3 prompts' nodes gather 20-70 workers) and then private sessions below it,
 * some with branches. With `removals`, some workers drop a middle block of a session (hollow
 * nodes when no one else holds it) or a whole prompt block.
 */
function workload(seed: number, removals: boolean): Workload {
  const r = xorshift32(seed);
  const workers = [0n, MAX, ...Array.from({ length: 68 }, (_, i) => MAX - 1n - BigInt(i) * 0x1_0000_0001n)];
  const events: RouterEvent[] = [];
  const paths: bigint[][] = [];
  const tok = (a: number, b: number): bigint => (BigInt(a) << 40n) | (BigInt(b) << 8n) | 0x81n | (1n << 63n);
  let id = 0n;
  const push = (w: bigint, data: RouterEvent['event']['data']): void => {
    events.push({ workerId: w, event: { eventId: id++, data } });
  };
  // A worker whose first event names a parent it never stored: rejected, then a real store.
  push(workers[5]!, { type: 'stored', parentHash: 0xdeadn, blocks: [{ blockHash: 1n, tokensHash: tok(99, 0) }] });
  workers.forEach((w, wi) => {
    // 66 workers on prompt 0 (a member set with id words: >= 64 workers), the last 4 on prompts 1-3 alone.
    const shared = wi < 66 ? 0 : wi - 65;
    const len = 6 + (shared % 3);
    const salt = BigInt(wi + 1) << 20n;
    const pBlocks = Array.from({ length: len }, (_, i) => ({ blockHash: salt + BigInt(i), tokensHash: tok(shared, i) }));
    push(w, { type: 'stored', parentHash: null, blocks: pBlocks });
    const base = pBlocks.map((b) => b.tokensHash);
    for (let i = 1; i <= len; i++) paths.push(base.slice(0, i));
    let last = pBlocks[len - 1]!.blockHash;
    let lastPath = base;
    for (let s = 0; s < 3; s++) {
      const n = 1 + (r() % 5);
      const from = s === 2 && r() % 2 === 0 ? pBlocks[r() % len]! : null; // a branch off the prompt
      const parent = from === null ? last : from.blockHash;
      const parentPath = from === null ? lastPath : base.slice(0, pBlocks.indexOf(from) + 1);
      const blocks = Array.from({ length: n }, (_, i) => ({ blockHash: salt + 1000n * BigInt(s + 1) + BigInt(i), tokensHash: tok(100 + wi * 4 + s, i) }));
      push(w, { type: 'stored', parentHash: parent, blocks });
      const p = [...parentPath, ...blocks.map((b) => b.tokensHash)];
      for (let i = parentPath.length + 1; i <= p.length; i++) paths.push(p.slice(0, i));
      last = blocks[n - 1]!.blockHash;
      lastPath = p;
      if (removals && n >= 3 && r() % 3 === 0) push(w, { type: 'removed', blockHashes: [blocks[1]!.blockHash] });
    }
    if (removals && wi % 7 === 0) push(w, { type: 'removed', blockHashes: [pBlocks[2]!.blockHash] });
    if (removals && wi === 9) push(w, { type: 'cleared' });
  });
  // Distinct paths only (66 workers share the prompt's).
  const seen = new Set<string>();
  return { events, paths: paths.filter((p) => !seen.has(p.join()) && seen.add(p.join()) !== null) };
}

const norm = (s: OverlapScores): Array<[string, number]> => [...s.scores].map(([w, n]): [string, number] => [String(w), n]).sort((a, b) => (a[0] < b[0] ? -1 : 1));

function answers(tree: { findMatches(h: bigint[]): OverlapScores }, paths: bigint[][]): Array<Array<[string, number]>> {
  return paths.map((p) => norm(tree.findMatches(p)));
}

describe('a tree built from a dump by the sized bulk path', () => {
  it('answers every lookup as the dumped tree: shared nodes up to 70 workers, ids 0 and 2^64-1, a rejected first event', () => {
    const { events, paths } = workload(3, false);
    const source = new RadixTree();
    for (const e of events) source.applyEvent(e);
    expect(source.workers()).toContain(MAX);
    const bytes = source.dumpSnapshot('bincode');
    const fast = new RadixTree();
    const report = loadBincode(fast, bytes);
    expect(report.rejected).toBe(0);
    expect(report.storedBlocks).toBe(source.size);
    expect(fast.size).toBe(source.size);
    expect(fast.nodeCount).toBe(source.nodeCount);
    expect(fast.workers()).toEqual(source.workers());
    for (const w of source.workers()) expect(fast.blockCount(w)).toBe(source.blockCount(w));
    const want = answers(source, paths);
    expect(want.some((a) => a.length >= 64)).toBe(true); // the member-array node is looked up
    expect(answers(fast, paths)).toEqual(want);
    // Loaded again through the event path: the same tree, event for event.
    const slow = new RadixTree();
    for (const e of decodeSnapshot(bytes)) slow.applyEvent(e);
    expect(fast.dumpEvents()).toEqual(slow.dumpEvents());
  });

  it('loads into a tree that already holds some of the workers (their lookups are sized before their first event)', () => {
    const { events, paths } = workload(5, false);
    const half = Math.floor(events.length / 2);
    const source = new RadixTree();
    for (const e of events) source.applyEvent(e);
    const a = new RadixTree();
    const b = new RadixTree();
    for (const e of events.slice(0, half)) {
      a.applyEvent(e);
      b.applyEvent(e);
    }
    // The second half as a snapshot: its parents are in the first half, which both trees hold.
    const tail = events.slice(half);
    const report = loadBincode(a, encodeSnapshot(tail));
    let rejected = 0;
    for (const e of tail) if (b.applyEvent(e) !== 'ok') rejected++;
    expect(report.rejected).toBe(rejected);
    expect(a.size).toBe(source.size);
    expect(answers(a, paths)).toEqual(answers(b, paths));
    expect(answers(a, paths)).toEqual(answers(source, paths));
    expect(a.dumpEvents()).toEqual(b.dumpEvents());
  });

  it('with hollow nodes and re-rooted chains: the same tree as the event path on the same dump', () => {
    const { events, paths } = workload(7, true);
    const source = new RadixTree();
    for (const e of events) source.applyEvent(e);
    const bytes = source.dumpSnapshot('bincode');
    const fast = new RadixTree();
    loadBincode(fast, bytes);
    const slow = new RadixTree();
    for (const e of decodeSnapshot(bytes)) slow.applyEvent(e);
    expect(fast.size).toBe(source.size);
    expect(fast.dumpEvents()).toEqual(slow.dumpEvents());
    expect(answers(fast, paths)).toEqual(answers(slow, paths));
  });

  it('ShardedIndexer.restoreSnapshot, 0 and 2 shards, answers as the dumped tree', async () => {
    const { events, paths } = workload(11, false);
    const source = new RadixTree();
    for (const e of events) source.applyEvent(e);
    const bytes = source.dumpSnapshot('bincode');
    const want = answers(source, paths);
    for (const shards of [0, 2]) {
      const ix = await ShardedIndexer.create({ shards, blockSize: 4 });
      try {
        const summary = await ix.restoreSnapshot(bytes);
        expect(summary.storedBlocks).toBe(source.size);
        const got: Array<Array<[string, number]>> = [];
        for (const p of paths) got.push(norm(await ix.findMatches(p)));
        expect(got).toEqual(want);
        expect((await ix.stats()).reduce((n, s) => n + s.pairs, 0)).toBe(source.size);
      } finally {
        await ix.close();
      }
    }
  });
});
