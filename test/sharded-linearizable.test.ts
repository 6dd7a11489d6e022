/**
 * The ordering contract, as a property: the indexer is linearizable in call order. Random
 * bursts of calls are issued without awaiting (every ingestion path, lookups, dumps in every
 * encoding, stats, worker removal, flush; clears are events), on 1, 2 and 3 shards and
 * in-thread. Each call's result is compared with an in-thread RadixTree fed the same events up
 * to the call's position, computed at the moment the call was made. The generator keeps worker
 * caches prefix-closed (prefix-closed-gen.ts), so every shard count must agree exactly.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import { decodeSnapshot } from '../src/protocol/snapshot-reader.js';
import type { ApplyStatus, RouterEvent, SnapshotEncoding } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { ShardStats } from '../src/shard/wire/messages.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { Rng } from './support/event-gen.js';
import { prefixClosedStream } from './support/prefix-closed-gen.js';

const enc = (e: RouterEvent): Uint8Array => new TextEncoder().encode(formatRouterEvent(e));
const ENCODINGS: SnapshotEncoding[] = ['bincode', 'bincode-dp', 'jsonl'];

/** What the shards' stats add up to, compared with the reference tree's. */
function statsTotals(stats: ShardStats[]): unknown {
  const sum = (f: (s: ShardStats) => number): number => stats.reduce((n, s) => n + f(s), 0);
  return {
    workers: sum((s) => s.workers),
    pairs: sum((s) => s.pairs),
    ok: sum((s) => s.events.ok),
    parentNotFound: sum((s) => s.events.parent_block_not_found),
    blockNotFound: sum((s) => s.events.block_not_found),
    malformed: sum((s) => s.malformed),
  };
}

const open: ShardedIndexer[] = [];
afterAll(async () => {
  await Promise.all(open.map((ix) => ix.close()));
});

/**
 * Runs one random stream through `ix` in bursts of unawaited calls; returns how many calls were
 * checked. Every expectation is computed from `ref` synchronously at the call.
 */
async function runBursts(ix: ShardedIndexer, seed: number, ops: number): Promise<number> {
  const rng = new Rng(seed * 7 + 3);
  const stream = prefixClosedStream(seed, ops);
  const ref = new RadixTree();
  const counts: Record<ApplyStatus, number> = { ok: 0, parent_block_not_found: 0, block_not_found: 0, invalid_block_sequence: 0 };
  const refStats = (): unknown => ({
    workers: ref.workers().length,
    pairs: ref.size,
    ok: counts.ok,
    parentNotFound: counts.parent_block_not_found,
    blockNotFound: counts.block_not_found,
    malformed: 0,
  });
  let checked = 0;
  let pending: Promise<void>[] = [];
  const expectLater = <T>(p: Promise<T>, want: unknown, seen: (v: T) => unknown, what: string): void => {
    pending.push(p.then((v) => expect(seen(v), what).toEqual(want)));
    checked++;
  };
  /** A dump, stats or flush call at this position, checked against the reference now. */
  const probe = (at: number): void => {
    const r = rng.int(6);
    if (r < 3) {
      const encoding = ENCODINGS[r]!;
      expectLater(ix.dumpSnapshot(encoding), dumpTuples(ref.dumpEvents()), (b) => dumpTuples(decodeSnapshot(b, encoding)), `dumpSnapshot(${encoding}) at op ${at}`);
    } else if (r === 3) {
      expectLater(ix.dumpEvents(), dumpTuples(ref.dumpEvents()), dumpTuples, `dumpEvents at op ${at}`);
    } else if (r === 4) {
      expectLater(ix.stats(), refStats(), statsTotals, `stats at op ${at}`);
    } else {
      pending.push(ix.flush());
    }
  };

  let i = 0;
  const all = stream.ops;
  while (i < all.length) {
    const burst = 1 + rng.int(40);
    for (let b = 0; b < burst && i < all.length; b++, i++) {
      const op = all[i]!;
      if (op.kind === 'event') {
        // A run of events given together through applyEvents, or one through a path at random.
        const path = rng.int(4);
        if (path === 0) ix.applyEvent(op.event);
        else if (path === 1) ix.applyEventJson(enc(op.event), i);
        else if (path === 2) ix.applyEventJsonOnCaller(enc(op.event));
        else ix.applyEvents([op.event]);
        counts[ref.applyEvent(op.event)]++;
      } else if (op.kind === 'removeWorker') {
        pending.push(ix.removeWorker(op.workerId)); // not awaited: later calls must still see it
        ref.removeWorker(op.workerId);
      } else {
        const want = sortedScores(ref.findMatches(op.hashes));
        expectLater(ix.findMatches(op.hashes), want, sortedScores, `findMatches at op ${i}`);
      }
      if (rng.chance(0.08)) probe(i);
      // Now and then let the microtask that posts batches run, with calls still in flight.
      if (rng.chance(0.05)) await Promise.resolve();
      if (rng.chance(0.02)) await new Promise((r) => setImmediate(r));
    }
    probe(i);
    if (rng.chance(0.5)) {
      await Promise.all(pending);
      pending = [];
    }
  }
  await Promise.all(pending);
  // The end state, once more, after everything settled.
  expect(dumpTuples(await ix.dumpEvents())).toEqual(dumpTuples(ref.dumpEvents()));
  expect(statsTotals(await ix.stats())).toEqual(refStats());
  return checked;
}

describe('the indexer is linearizable in call order', () => {
  it.each([0, 1, 2, 3])('random bursts of unawaited calls match a tree fed the same prefix (shards: %i)', async (shards) => {
    let checked = 0;
    for (let seed = 1; seed <= 12; seed++) {
      const ix = await ShardedIndexer.create({ shards, blockSize: 16, batchWords: seed % 3 === 0 ? 64 : 64 * 1024 });
      open.push(ix);
      checked += await runBursts(ix, seed, 500);
      await ix.close();
    }
    expect(checked).toBeGreaterThan(500);
  });
});
