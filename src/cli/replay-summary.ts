/** What a replay measured (`runReplay`'s result), and the latency log it is built from. */
import type { ApplyStatus } from '../protocol/types.js';
import type { ClusterSimConfig } from '../trace/cluster-sim.js';
import type { InputKind } from '../trace/input-kind.js';

export interface ReplaySummary {
  file: string;
  /** Null when the input held no valid line. */
  kind: InputKind | null;
  gzip: boolean;
  /** Lines read (the last line number). */
  lines: number;
  shards: number;
  /** Timestamp compression factor, null for as fast as possible. */
  speed: number | null;
  /** The cluster simulation's settings (traces only). */
  sim: ClusterSimConfig | null;
  /** The KvRouter's settings (traces only). */
  routing: { temperature: number; credit: number } | null;
  /** Valid requests of a trace, lookups (`match` ops) of a workload, 0 for event streams. */
  requests: number;
  /** Events applied to the indexer. */
  events: number;
  cleared: number;
  blocksStored: number;
  blocksRemoved: number;
  /** Blocks the lookups walked (per lookup, the longest matched prefix). */
  blocksMatched: number;
  /** blocksStored + blocksRemoved + blocksMatched. */
  blockOps: number;
  /**
   * Indexer time, ms (replay-run.ts): in-thread, the time inside indexer calls; with shard
   * threads and lookups that do not wait, the longer of `callerMs` and `shardApplyMs` (they run
   * in parallel); otherwise with shard threads, wall time from a call until the shards have
   * caught up (a lookup's reply, a flush), the shards' applying included.
   */
  indexerMs: number;
  /** Shard threads only: whether lookups waited for the events sent before them (null in-thread). */
  readYourWrites: boolean | null;
  /**
   * Lookups answered before their shard applied every event sent before them (null unless
   * lookups did not wait).
   */
  lookupsEarly: number | null;
  /**
   * Early lookups whose answer differed from the truth and was right once the shards caught up
   * (replay-stale.ts); not in `mismatches`. Null unless lookups did not wait.
   */
  staleLookups: number | null;
  /** The calling thread's time inside indexer calls, ms (null unless lookups did not wait). */
  callerMs: number | null;
  /** The busiest shard's time applying events, ms (null unless lookups did not wait). */
  shardApplyMs: number | null;
  /** Whole replay loop, ms (simulation and pacing included). */
  wallMs: number;
  /** blockOps per second of indexer time. */
  blockOpsPerSec: number;
  lookups: number;
  lookupP50Us: number | null;
  lookupP99Us: number | null;
  lookupMaxUs: number | null;
  /** Block-weighted hit rate of the workers that served the requests. */
  hitRate: number | null;
  /** Block-weighted hit rate of the best worker per request (the oracle). */
  oracleHitRate: number | null;
  /** Lookups whose scores differ from the ground truth (trace: the cache models; workload: `expect`). */
  mismatches: number | null;
  applyStatus: Record<ApplyStatus, number>;
  /** Time of `dumpSnapshot('bincode')` after the replay, ms. */
  dumpMs: number;
  dumpBytes: number;
  dumpEvents: number;
  /** (worker, block) pairs in the final tree. */
  pairs: number;
  /** Bytes held by the tree's arrays. */
  treeBytes: number;
  bytesPerPair: number | null;
  badLines: number;
  /** First bad line numbers (1-based) and their reasons. */
  badLineNumbers: number[];
  badLineReasons: string[];
  /**
   * Why the input ended before its end (`KVX_CORRUPT_INPUT`: a corrupt or truncated gzip),
   * null when it was read to the end (or to `--limit`).
   */
  inputError: string | null;
}

/** Counters passed to a progress display. */
export interface ReplayProgress {
  /** How far into the input, 0..1. */
  fraction: number;
  lines: number;
  requests: number;
  events: number;
}

/** Latencies in microseconds, kept in a growing Float64Array (no per-sample object). */
export class LatencyLog {
  private values = new Float64Array(4096);
  private n = 0;
  private sorted = true;

  get count(): number {
    return this.n;
  }

  push(us: number): void {
    if (this.n === this.values.length) {
      const next = new Float64Array(this.values.length * 2);
      next.set(this.values);
      this.values = next;
    }
    this.values[this.n++] = us;
    this.sorted = false;
  }

  /** Nearest-rank percentile (p in 0..100); NaN when empty. */
  percentile(p: number): number {
    if (this.n === 0) return NaN;
    const v = this.values.subarray(0, this.n);
    if (!this.sorted) {
      v.sort();
      this.sorted = true;
    }
    const i = Math.min(this.n - 1, Math.max(0, Math.ceil((p / 100) * this.n) - 1));
    return v[i]!;
  }
}
