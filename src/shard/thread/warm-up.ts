/**
 * Warm-up of a fresh shard thread, before it reports itself started (workers/shard.ts): a
 * synthetic fleet's events applied to a throwaway tree built exactly as the shard's own (shared
 * memory, the same options), through the same event-batch path, with lookups, then every
 * worker removed. The throwaway tree is dropped; nothing of it reaches the shard's tree, its
 * counts or its header.
 *
 * Why: a fresh isolate runs the apply path in V8's interpreter and baseline tiers while the
 * optimising compiler works in the background, for the first ~0.5 s of ingest: a fresh 2-shard
 * indexer ingested at 0.85x the speed of in-thread, against 1.6x once warm (issue 40). Paying
 * it before the indexer is handed out moves that cost to `create()`, where both shards warm up
 * in parallel. What it buys is small: on 1M pairs of a fleet workload (BENCHMARKS.md, fleet
 * scale, fresh processes) fresh 2-shard ingest went from 0.82x to 0.88x the speed of
 * in-thread (1,658 -> 1,549 ms) at 425 ms more in create(); warm shards run at 1.43x. The rest
 * of a fresh index's cost is growth, not code: a fresh in-thread tree ingests 2.9x slower than
 * a warm one (1,367 vs 471 ms) with no thread involved, its arrays doubling and faulting in
 * fresh pages as they fill. Hence opt-in (`warmUp: true`).
 */
import type { StoredBlock } from '../../protocol/types.js';
import { RadixTree } from '../../tree/radix-tree.js';
import { H } from '../../tree/shared-layout.js';
import { EventBatchWriter, emptyCounts } from '../wire/event-batch.js';
import { WRITE_SECTION_BLOCKS } from '../wire/tree-lock.js';
import type { ShardInit } from '../wire/messages.js';
import { applyInSections } from './apply-batch.js';

/** Synthetic workers; each round stores a chain on each and evicts part of an older one. */
const WORKERS = 16;
/**
 * Rounds: 16 rounds of 16 workers storing 32 blocks (and evicting 16 of an older chain) are
 * 12,032 block operations. What it costs (CPU time of the process, compiler threads included,
 * one fresh process per size, 2-core dev VM at load ~16): 2 rounds 55 ms, 8 rounds 155 ms, 16
 * rounds 248 ms, 64 rounds 418 ms; at 8 rounds V8 had optimised the store path (prepareStore,
 * checkStored, the edge table's insert and place), at 16 the removal path (resolveRemoved,
 * dropPair) and the lookup walk too (--trace-opt). Every shard thread pays it once, in
 * parallel, inside `create()`.
 */
export const WARM_ROUNDS = 16;
const SHARED = 16;
const PRIVATE = 32;

/** What a warm-up did (for tests). */
export interface WarmUpReport {
  blockOps: number;
  lookups: number;
  /** Events the throwaway tree did not accept as `ok` (0 unless the synthetic fleet is wrong). */
  notOk: number;
  ms: number;
}

const mix = (x: number): bigint => {
  // A cheap u64 spread of a small integer (distinct for distinct x): a Weyl step and xorshift.
  let h = BigInt(x) * 0x9e37_79b9_7f4a_7c15n;
  h &= 0xffff_ffff_ffff_ffffn;
  h ^= h >> 29n;
  return h | 1n;
};

/** Runs the warm-up (`rounds` as WARM_ROUNDS); returns what it did. */
export function warmUpShard(init: ShardInit, rounds = WARM_ROUNDS): WarmUpReport {
  const t0 = performance.now();
  const tree = new RadixTree({
    shared: true,
    ...(init.expirationMs === null ? {} : { expirationMs: init.expirationMs }),
    ...(init.maxPairs === null ? {} : { maxPairs: init.maxPairs }),
  });
  const header = new Int32Array(tree.layout!.header);
  const counts = emptyCounts();
  const writer = new EventBatchWriter();
  const workers = Array.from({ length: WORKERS }, (_, w) => mix(1_000_003 + w));
  const prompt: StoredBlock[] = Array.from({ length: SHARED }, (_, i) => ({ blockHash: mix(i + 1), tokensHash: mix(i + 1) }));
  const eventIds = new Array<bigint>(WORKERS).fill(0n);
  const held: bigint[][] = workers.map(() => []);
  let blockOps = 0;
  let lookups = 0;
  const query = new Uint32Array(2 * (SHARED + PRIVATE));
  const chains: StoredBlock[][] = [];
  for (let r = 0; r < rounds; r++) {
    // One batch per round, as the main thread sends them: every worker's events.
    chains.length = 0;
    for (let w = 0; w < WORKERS; w++) {
      const workerId = workers[w]!;
      const blocks: StoredBlock[] = [];
      for (let i = 0; i < PRIVATE; i++) {
        const h = mix(((r * WORKERS + w) * PRIVATE + i) * 7 + 1_000_000_007);
        blocks.push({ blockHash: h, tokensHash: h ^ 0x5555n });
      }
      chains.push(blocks);
      // The prompt once per worker, then each round a private chain under it.
      if (r === 0) {
        writer.push({ workerId, event: { eventId: eventIds[w]!++, data: { type: 'stored', parentHash: null, blocks: prompt } } });
        blockOps += SHARED;
      }
      writer.push({ workerId, event: { eventId: eventIds[w]!++, data: { type: 'stored', parentHash: prompt[SHARED - 1]!.blockHash, blocks } } });
      blockOps += PRIVATE;
      // Evict the leaf half of the chain stored two rounds ago (a Removed of its last blocks).
      const old = held[w]!;
      if (old.length >= 2 * PRIVATE) {
        const gone = old.splice(PRIVATE / 2, PRIVATE / 2).reverse();
        writer.push({ workerId, event: { eventId: eventIds[w]!++, data: { type: 'removed', blockHashes: gone } } });
        blockOps += gone.length;
        old.splice(0, PRIVATE / 2);
      }
      for (const b of blocks) old.push(b.blockHash);
    }
    applyInSections(tree, writer.take(), 0, counts, header, WRITE_SECTION_BLOCKS);
    // Lookups of this round's chains through the port path's word form.
    for (const blocks of chains) {
      const seq = [...prompt, ...blocks];
      for (let i = 0; i < seq.length; i++) {
        const t = seq[i]!.tokensHash;
        query[2 * i] = Number(t & 0xffff_ffffn);
        query[2 * i + 1] = Number(t >> 32n);
      }
      tree.findMatchesWords(query, 0, seq.length, false);
      lookups++;
    }
  }
  for (const w of workers) writer.pushRemoveWorker(w);
  applyInSections(tree, writer.take(), 0, counts, header, WRITE_SECTION_BLOCKS);
  let notOk = 0;
  for (const [status, n] of Object.entries(counts)) if (status !== 'ok') notOk += n;
  if (tree.size !== 0 || Atomics.load(header, H.FAILED) !== 0) notOk++;
  return { blockOps, lookups, notOk, ms: performance.now() - t0 };
}
