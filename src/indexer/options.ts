/** ShardedIndexer's options, their checks, and where its shard thread code lives. */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { ErrorCode, KvIndexError } from '../errors.js';

export interface ShardedIndexerOptions {
  /** Shard threads; 0 runs in the calling thread. At most 64. */
  shards: number;
  /** Tokens per block for `findMatchesForTokens`. */
  blockSize: number;
  /** Frequency window of `findMatches` (see RadixTree). */
  expirationMs?: number;
  /**
   * Hard memory budget in (worker, block) pairs across all shards (split evenly: each shard
   * holds at most `floor(maxPairs / shards)`). Over it, the least recently stored leaf blocks
   * are evicted, each as if its workers had removed it, down to 90 %; evictions are counted in
   * `stats()[i].evicted`. Default: no budget.
   */
  maxPairs?: number;
  /**
   * Capacity hint: the (worker, block) pairs the indexer expects to hold (split evenly over the
   * shards). Each tree's node arrays are sized for that many nodes in `create()` (a tree has at
   * most a node per pair; shared blocks need fewer) instead of growing in 1.25x steps as blocks
   * come, so their pages are written once, before the first event, rather than by the ingest.
   * Measured on 1M pairs of a fleet workload (fresh processes, 2-core VM, BENCHMARKS.md fleet
   * run 4): fresh in-thread ingest 2.0-2.9x faster with it (quiet host: 876 -> 418 ms, create()
   * 60 ms); 2 shards 716 -> 525 ms (their shared buffers grew in place already, no copies). The memory is taken at once: 29 bytes a node, the 20
   * of the node record and parent written at creation. More pairs than hinted still fit: the
   * arrays grow past it as without it. Default: none (the trees start small).
   */
  expectedPairs?: number;
  logger?: Logger;
  /** Backlog (queued + in-flight events) above which `needsDrain` is set. Default 65,536. */
  highWaterEvents?: number;
  /**
   * Bytes of event batches posted to the shards and not yet applied above which `needsDrain`
   * is set. Default 16 MiB. 65,536 events of a fleet workload (~130 blocks an event) are ~130
   * MB of batches, and what a burst left in the calling thread's heap stayed in its RSS (172 MB
   * after the 16.4M-pair ingest). Each shard's share (at least 1 MiB) also caps its batch ring
   * (src/shard/wire/batch-ring.ts: 8 batches of `batchWords`, 2 MiB by default), and
   * `needsDrain` is set too while a shard's ring is more than half full.
   */
  highWaterBytes?: number;
  /** Words of an event batch that trigger an immediate send. Default 64 Ki (256 KiB). */
  batchWords?: number;
  /**
   * With shard threads: a lookup sees every event applied before it (default true), waiting
   * until the shards have applied them. `false` answers from the latest applied state without
   * waiting (what a router under load wants: events in flight are a few milliseconds old).
   */
  readYourWrites?: boolean;
  /**
   * Niceness (0..19) of the shard threads, Linux only (elsewhere ignored): above 0 they yield
   * the CPU to the calling thread when cores are oversubscribed, so lookups and the router's
   * event loop are not kept waiting behind ingestion. Default 0 (same priority as the caller):
   * in the offered-load sweep at 2,000-7,000x (2 shards, `readYourWrites: false`, 2-core dev VM,
   * paired windows) nice 10 and 19 gave lookup p99 21-52 us against 24-50 at 0, no gain within
   * the noise, and 19 was worse at 7,000x (47-52 against 32-35 us); it helps lookups while the
   * shards ingest unpaced (BENCHMARKS.md: p99 8.5 against 14.5 us at 10).
   */
  shardNice?: number;
  /**
   * Keep-warm period in ms: 0 (off) or 1..60,000; default `DEFAULT_KEEP_WARM_MS`, or off with
   * `expirationMs`. While no lookup comes, a lookup of the latest request's first blocks every
   * period keeps the lookup path in the caches (keep-warm.ts: after 10 ms of idle time a
   * 2-shard lookup measured 52.5 us without it, 8.05 with a prime every 1 ms on the dev VM);
   * after a second without lookups the timer stops until the next one. Not with
   * `expirationMs`, where every lookup records the frequency trail.
   */
  keepWarmMs?: number;
  /**
   * With shard threads: each thread runs a synthetic fleet through a throwaway tree before
   * `create()` resolves, so that V8 has compiled the apply path before the first real batch
   * (src/shard/thread/warm-up.ts). Measured on 1M pairs of a fleet workload (fleet-scale
   * bench, fresh processes, 2-core dev VM): fresh 2-shard ingest at 0.88x the speed of
   * in-thread with it, 0.82x without; create() 704 against 279 ms. Most of a fresh indexer's
   * slowness is not compilation (fresh in-thread ingest is 2.9x its warm time too). Default
   * false: every short-lived indexer would pay it (three threaded test files took 388 s with it
   * on against 173 s without, on the loaded VM).
   */
  warmUp?: boolean;
}

/**
 * Bound of `expectedPairs`: a tree's node ids stay below 2^28 (node-store.ts `MAX_NODES`), so
 * a hint at or above it cannot be reserved in one tree.
 */
export const MAX_EXPECTED_PAIRS = 2 ** 28 - 1;

/** Keep-warm's default period (keep-warm.ts: why it is on by default). */
export const DEFAULT_KEEP_WARM_MS = 1;

/** The keep-warm period of checked options: 0 for off. */
export function keepWarmPeriod(o: ShardedIndexerOptions): number {
  return o.keepWarmMs ?? (o.expirationMs === undefined ? DEFAULT_KEEP_WARM_MS : 0);
}

/** The shard thread entry point of this build. */
export function shardWorkerFile(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  // From src/indexer (tests run the sources) the thread code is the build in dist/; from
  // dist/src/indexer it sits beside it in dist/workers.
  const file = import.meta.url.endsWith('.ts')
    ? resolve(here, '../../dist/workers/shard.js')
    : resolve(here, '../../workers/shard.js');
  if (!existsSync(file)) {
    throw new KvIndexError(ErrorCode.InvalidOption, `shard thread entry ${file} is missing: run 'npm run build'`);
  }
  return file;
}

/** Throws `KvIndexError` `InvalidOption` naming the first bad option. */
export function checkOptions(o: ShardedIndexerOptions): void {
  const bad = (what: string): never => {
    throw new KvIndexError(ErrorCode.InvalidOption, what);
  };
  if (typeof o !== 'object' || o === null) bad('options: expected an object');
  if (!Number.isInteger(o.shards) || o.shards < 0 || o.shards > 64) bad(`shards: expected an integer 0..64, got ${String(o.shards)}`);
  if (!Number.isInteger(o.blockSize) || o.blockSize < 1) bad(`blockSize: expected a positive integer, got ${String(o.blockSize)}`);
  if (o.expirationMs !== undefined && !(Number.isFinite(o.expirationMs) && o.expirationMs >= 0)) {
    bad(`expirationMs: expected a finite number >= 0, got ${String(o.expirationMs)}`);
  }
  if (o.maxPairs !== undefined && !(Number.isSafeInteger(o.maxPairs) && o.maxPairs >= Math.max(1, o.shards))) {
    bad(`maxPairs: expected an integer >= max(1, shards), got ${String(o.maxPairs)}`);
  }
  if (o.expectedPairs !== undefined && !(Number.isSafeInteger(o.expectedPairs) && o.expectedPairs >= 0 && o.expectedPairs < MAX_EXPECTED_PAIRS)) {
    bad(`expectedPairs: expected an integer 0..${MAX_EXPECTED_PAIRS - 1}, got ${String(o.expectedPairs)}`);
  }
  if (o.highWaterEvents !== undefined && !(Number.isInteger(o.highWaterEvents) && o.highWaterEvents > 0)) {
    bad(`highWaterEvents: expected a positive integer, got ${String(o.highWaterEvents)}`);
  }
  if (o.readYourWrites !== undefined && typeof o.readYourWrites !== 'boolean') {
    bad(`readYourWrites: expected a boolean, got ${String(o.readYourWrites)}`);
  }
  if (o.shardNice !== undefined && !(Number.isInteger(o.shardNice) && o.shardNice >= 0 && o.shardNice <= 19)) {
    bad(`shardNice: expected an integer 0..19, got ${String(o.shardNice)}`);
  }
  if (o.warmUp !== undefined && typeof o.warmUp !== 'boolean') bad(`warmUp: expected a boolean, got ${String(o.warmUp)}`);
  if (o.keepWarmMs !== undefined) {
    const ms = o.keepWarmMs;
    if (!(Number.isFinite(ms) && (ms === 0 || (ms >= 1 && ms <= 60_000)))) bad(`keepWarmMs: expected 0 (off) or a number 1..60000, got ${String(ms)}`);
    if (ms !== 0 && o.expirationMs !== undefined) bad('keepWarmMs: not with expirationMs (every lookup records the frequency trail)');
  }
  if (o.highWaterBytes !== undefined && !(Number.isInteger(o.highWaterBytes) && o.highWaterBytes > 0)) {
    bad(`highWaterBytes: expected a positive integer, got ${String(o.highWaterBytes)}`);
  }
  if (o.batchWords !== undefined && !(Number.isInteger(o.batchWords) && o.batchWords > 0)) {
    bad(`batchWords: expected a positive integer, got ${String(o.batchWords)}`);
  }
}
