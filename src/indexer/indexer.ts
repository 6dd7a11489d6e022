/**
 * The indexer's one interface, and the engine contract behind it. `ShardedIndexer.create()`
 * picks an engine once: the local engine (`shards: 0`, one RadixTree on the calling thread) or
 * the threaded engine (shard threads, src/shard/main/). Neither branches on the other per call.
 *
 * Ordering contract (both engines): the indexer is linearizable in call order. Every call
 * behaves as if it ran at the moment it was made, against every event applied before it and
 * none after, whatever the ingestion path and whatever the call. The threaded engine gets this
 * from one ordered outbox per shard (src/shard/main/outbox.ts).
 */
import type { KvIndexError } from '../errors.js';
import type { BlockHashOptions } from '../hash/block-hash.js';
import type { OverlapScores, RouterEvent, SnapshotEncoding } from '../protocol/types.js';
import type { ShardStats } from '../shard/wire/messages.js';
import type { MatchResult } from '../tree/match-result.js';

/** What `Engine.firstBlock` found. */
export const FirstBlock = { Held: 0, Unheld: 1, Unknown: 2 } as const;
export type FirstBlock = (typeof FirstBlock)[keyof typeof FirstBlock];

/** The events an indexer emits, with their arguments. */
export interface IndexerEvents {
  /** The backlog fell under half the high-water mark after `needsDrain` was set. */
  drain: [];
  /** A shard thread failed; every later call fails with this error. */
  shardFailed: [error: KvIndexError];
  /** A JSON event parsed in a shard was malformed (it changed nothing); `tag` as given. */
  malformed: [error: KvIndexError, tag: number | undefined];
}

/**
 * Shard lookups on the calling thread that found a shard's lock held by a writer that had
 * stopped moving (descheduled): answered by reading past it (src/tree/unit-log.ts), or tried and
 * then waited for the lock (the writer moved, or its unit of writing was on the lookup's path).
 */
export interface ReadsPastWriter {
  answered: number;
  waited: number;
}

/** What an engine implements; `ShardedIndexer` adds the calls built on these. */
export interface Engine {
  readonly needsDrain: boolean;
  readonly liveThreads: number;
  readonly threadIds: number[];
  readonly readsPastWriter: ReadsPastWriter;
  /**
   * Nothing waits to be applied, and the engine is open: a lookup made now neither posts events
   * nor waits for a shard (keep-warm primes only then).
   */
  readonly idle: boolean;
  applyEvent(event: RouterEvent): void;

  applyEventJson(text: Uint8Array, tag?: number): void;
  applyEventJsonOnCaller(text: Uint8Array): void;
  findMatches(hashes: BigUint64Array | readonly bigint[]): Promise<OverlapScores>;
  /** The allocation-free lookup on the calling thread: fills `result`, returns the match count. */
  findMatchesInto(hashes: BigUint64Array | readonly bigint[], result: MatchResult, earlyExit?: boolean): number;
  findMatchesSync(hashes: BigUint64Array | readonly bigint[]): OverlapScores;
  /**
   * Whether any worker holds `first` (one tokens hash) as the first block of a sequence, as a
   * lookup made now would see: `Unheld` proves that every lookup starting with it scores
   * nothing, so a lookup through the tokens can skip hashing the rest (sharded-indexer.ts).
   * `wait`: with read-your-writes, whether it may block until the shards applied every event
   * before the call, as the synchronous lookups do; without it, a shard that lags makes the
   * answer `Unknown`. Always `Unknown` when the engine records a frequency trail
   * (`expirationMs`): the lookup itself is what records it.
   */
  firstBlock(first: BigUint64Array, wait: boolean): FirstBlock;
  /**
   * `findMatchesSync(hashes)` when it can be answered now on the calling thread, as `firstBlock`
   * decides (`wait`; never with a frequency trail); otherwise null. A tokens lookup asks it for
   * a prefix of its blocks before it hashes the rest (sharded-indexer.ts).
   */
  findMatchesNow(hashes: BigUint64Array, wait: boolean): OverlapScores | null;
  removeWorker(workerId: bigint): Promise<void>;
  dumpSnapshot(encoding: SnapshotEncoding): Promise<Uint8Array>;
  dumpEvents(): Promise<RouterEvent[]>;
  stats(): Promise<ShardStats[]>;
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** @internal What a bulk restore feeds (snapshot-restore.ts); both engines implement it. */
export interface StoredWordsSink {
  /**
   * @internal A Stored event on raw words, already checked (snapshot-restore.ts): `n` blocks as
   * (bLo, bHi, tLo, tHi) at `words[0 ..]`, the worker as a bigint and as u32 halves.
   */
  applyStoredWords(workerId: bigint, wLo: number, wHi: number, hasParent: boolean, pLo: number, pHi: number, words: Uint32Array, n: number): void;
  /**
   * @internal Room for `blocks` more stored blocks, `perWorker` of them per worker (the map is
   * the engine's to consume), before a bulk restore (in-thread: one growth, bulk-load.ts).
   */
  reserve(blocks: number, perWorker: Map<bigint, number>): void;
}

/** The indexer's public calls (implemented by `ShardedIndexer`). */
export interface Indexer extends Engine {
  readonly shardCount: number;
  applyEvents(events: Iterable<RouterEvent>): void;
  findMatchesForTokens(tokens: Uint32Array | readonly number[], options?: BlockHashOptions): Promise<OverlapScores>;
  findMatchesForTokensSync(tokens: Uint32Array | readonly number[], options?: BlockHashOptions): OverlapScores;
  restore(events: Iterable<RouterEvent> | AsyncIterable<RouterEvent>): Promise<void>;
  drained(): Promise<void>;
}
