/**
 * Warming an indexer before a timed run that starts from an empty index. A router's shard
 * threads run for hours, with their code compiled; a fresh `ShardedIndexer` starts fresh
 * isolates, and V8 compiles their hot code in background threads during the first ~0.5 s of
 * ingestion. On the 2-core dev VM that compilation took 60-130 ms of CPU on each of 4 platform
 * threads while 2 fresh shards ingested the conversation workload, and ingest+lookups took
 * 405-590 ms against 250-365 ms for the same run on warmed shards. The calling thread of
 * `shards: 0` is warm from the start, so a fair comparison warms both sides the same way: feed
 * the workload once, then remove every worker it named (the tree is empty again, its arrays
 * keep the capacity they grew to, on both sides alike).
 */
import type { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { createMatchResult } from '../src/tree/match-result.js';

export async function warmUp(ix: ShardedIndexer, events: Iterable<RouterEvent>, lookups: Iterable<BigUint64Array>): Promise<void> {
  const workers = new Set<bigint>();
  for (const e of events) {
    workers.add(e.workerId);
    ix.applyEvent(e);
    if (ix.needsDrain) await ix.drained();
  }
  await ix.flush();
  const result = createMatchResult();
  for (const seq of lookups) ix.findMatchesInto(seq, result);
  await removeAll(ix, workers);
}

/** Empties an indexer again: removes `workers` (all it holds) and flushes. */
export async function removeAll(ix: ShardedIndexer, workers: Iterable<bigint>): Promise<void> {
  for (const w of workers) await ix.removeWorker(w);
  await ix.flush();
}
