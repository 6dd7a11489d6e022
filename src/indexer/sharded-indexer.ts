/**
 * The indexer: one class, one interface (indexer.ts), two engines chosen once in `create()`.
 * `shards: 0` runs a RadixTree on the calling thread (the embedded default for small
 * deployments and tests); `shards >= 1` routes events to shard threads (src/shard/main/).
 *
 * Ordering: linearizable in call order (see indexer.ts and the README). A lookup, dump, stats,
 * flush or worker removal sees every event applied before the call and none after, whatever
 * the ingestion path.
 *
 * Backpressure: `applyEvent` never blocks. While more than `highWaterEvents` events are queued
 * or in flight, `needsDrain` is true; the indexer emits `'drain'` once the backlog falls under
 * half of that. Callers that produce faster than the shards apply should wait for `'drain'`
 * (or `await indexer.drained()`); `restore` does so itself.
 */
import { EventEmitter } from 'node:events';
import { ErrorCode, KvIndexError } from '../errors.js';
import type { BlockHashOptions } from '../hash/block-hash.js';
import type { OverlapScores, RouterEvent, SnapshotEncoding } from '../protocol/types.js';
import { ThreadedEngine, type EngineReport } from '../shard/main/threaded-engine.js';
import type { ShardThreadSpec } from '../shard/main/thread-shard.js';
import type { ShardStats } from '../shard/wire/messages.js';
import { createMatchResult, type MatchResult } from '../tree/match-result.js';
import { FirstBlock, type Engine, type Indexer, type IndexerEvents, type ReadsPastWriter, type StoredWordsSink } from './indexer.js';
import { restoreBincode } from './snapshot-restore.js';
import type { BincodeSummary } from '../tree/bulk-load.js';
import { KeepWarm } from './keep-warm.js';
import { LocalEngine } from './local-engine.js';
import { checkOptions, keepWarmPeriod, shardWorkerFile, type ShardedIndexerOptions } from './options.js';
import { FIRST_UNHELD, TokensCut, type CutProbes } from './tokens-cut.js';

export type { ShardedIndexerOptions } from './options.js';
export { CUT_MIN_TOKENS } from './cut-gate.js';

/** Keep-warm's lookup before any request: one block (any value: a match is harmless, nothing records it). */
const PRIME = BigUint64Array.of(0x6b76_696e_6465_7821n);
/**
 * Keep-warm looks up at most this many leading blocks of the latest request. Why the latest
 * request's and not one block: requests share prefixes (system prompts, a conversation's
 * history), so its path is the part of the trees the next request most likely walks. After
 * 10 ms of idle time, 2 shards, conversation tree (dev VM, one probe, p50): 28-30 us primed
 * with one block, 12.6-14 with the latest request's first 32; 8, 32 and 128 blocks measured
 * alike (8.6-9.2 us in a faster hour), so the cap keeps a prime's cost small (~1 us).
 */
const PRIME_BLOCKS = 32;

/** What a lookup that matches nothing returns (a fresh object: callers may keep or change it). */
function noMatch(): OverlapScores {
  return { scores: new Map(), frequencies: [] };
}

export class ShardedIndexer extends EventEmitter<IndexerEvents> implements Indexer {
  readonly shardCount: number;
  readonly #blockSize: number;
  readonly #engine: Engine & StoredWordsSink;
  /** Lookups made, for keep-warm: a tick after a lookup does not prime. */
  #lookups = 0;
  /** Long tokens lookups' cuts (`#tokensLookup`), asked through the engine, waiting or not. */
  readonly #cut = new TokensCut();
  readonly #probesWait = this.#probes(true);
  readonly #probesNow = this.#probes(false);
  /**
   * The latest lookup's hashes (a reference, kept for keep-warm only: a prime reads what the
   * array holds then, whatever the caller did with it since, which at worst primes another path).
   */
  #last: BigUint64Array | readonly bigint[] = PRIME;
  readonly #keepWarm: KeepWarm | null;
  /** Rejecters of the pending `drained()` waits, called by `close()`. */
  readonly #drainWaiters = new Set<() => void>();
  #closing = false;
  readonly #primed = createMatchResult();
  /** Keep-warm's copy of the latest lookup's leading blocks. */
  readonly #primeWords = new BigUint64Array(PRIME_BLOCKS);

  private constructor(options: ShardedIndexerOptions, engine: Engine & StoredWordsSink) {
    super();
    this.shardCount = options.shards;
    this.#blockSize = options.blockSize;
    this.#engine = engine;
    const period = keepWarmPeriod(options);
    this.#keepWarm = period === 0 ? null : new KeepWarm(period, { lookups: () => this.#lookups, prime: () => this.#prime() });
  }

  /** Every lookup call: counts it, keeps its hashes for keep-warm, and re-arms a lingered timer. */
  #saw(hashes: BigUint64Array | readonly bigint[]): void {
    this.#lookups++;
    this.#last = hashes;
    const kw = this.#keepWarm;
    if (kw !== null && !kw.armed) kw.wake();
  }

  /**
   * Keep-warm's lookup (keep-warm.ts): the allocation-free call and the async one, as requests
   * make them, only when the engine is idle (no event would be posted, no shard waited for).
   */
  #prime(): boolean {
    const e = this.#engine;
    if (!e.idle) return false;
    try {
      const last = this.#last;
      const n = Math.min(PRIME_BLOCKS, last.length);
      const words = this.#primeWords;
      for (let i = 0; i < n; i++) words[i] = last[i]!; // a caller's bad value throws: caught below
      // A view per prime: one small object per period, beside the Map the async lookup makes.
      const hashes = n === 0 ? PRIME : words.subarray(0, n);
      e.findMatchesInto(hashes, this.#primed);
      e.findMatches(hashes).catch(() => undefined);
      return true;
    } catch {
      return false; // closed or failed meanwhile: the next call reports it
    }
  }

  /** Keep-warm lookups made so far (0 with keep-warm off). */
  get keepWarmPrimes(): number {
    return this.#keepWarm?.primes ?? 0;
  }

  /** Validates the options and starts the engine (and its shard threads, if any). */
  static async create(options: ShardedIndexerOptions): Promise<ShardedIndexer> {
    checkOptions(options);
    return ShardedIndexer.#start(options, options.shards === 0 ? null : { file: shardWorkerFile(), data: null });
  }

  static async #start(options: ShardedIndexerOptions, thread: ShardThreadSpec | null): Promise<ShardedIndexer> {
    let ix: ShardedIndexer | null = null;
    const logger = options.logger ?? null;
    const report = (...r: EngineReport): void => {
      // A malformed event is logged here only when nobody listens: a listener (the NATS
      // subscriber) logs it with its own context, and two WARN lines per bad message misled.
      if (r[0] === 'malformed' && ix !== null && ix.listenerCount('malformed') === 0) {
        logger?.warn({ code: r[1].code, tag: r[2] }, r[1].message);
        return;
      }
      (ix as EventEmitter | null)?.emit(r[0], ...r.slice(1));
    };
    const engine: Engine & StoredWordsSink = thread === null
      ? new LocalEngine(options.expirationMs, options.maxPairs, options.expectedPairs)
      : await ThreadedEngine.start(
        {
          shards: options.shards,
          expirationMs: options.expirationMs,
          maxPairs: options.maxPairs,
          expectedPairs: options.expectedPairs,
          logger: options.logger ?? null,
          highWaterEvents: options.highWaterEvents ?? 65_536,
          highWaterBytes: options.highWaterBytes ?? 16 * 1024 * 1024,
          batchWords: options.batchWords ?? 64 * 1024,
          readYourWrites: options.readYourWrites ?? true,
          nice: options.shardNice ?? 0,
          warmUp: options.warmUp ?? false,
          thread,
        },
        report,
      );
    ix = new ShardedIndexer(options, engine);
    options.logger?.debug({ shards: options.shards }, 'indexer started');
    return ix;
  }

  /**
   * @internal The one hatch into internals, for tests and benchmarks only; not part of the API
   * and stripped from the published types. `create` starts shard threads from another entry
   * file (a test fixture wrapping workers/shard.js, given `data` as piscina's `workerData`);
   * `engine` is the engine behind an indexer; `findMatchesViaPorts` the lookup's fallback path.
   */
  static readonly unsafeInternals = {
    create: (options: ShardedIndexerOptions, thread: ShardThreadSpec): Promise<ShardedIndexer> => {
      checkOptions(options);
      return ShardedIndexer.#start(options, options.shards === 0 ? null : thread);
    },
    engine: (ix: ShardedIndexer): Engine => ix.#engine,
    /** A lookup through the port path (one reply message per shard), for the channel bench. */
    findMatchesViaPorts: (ix: ShardedIndexer, seq: BigUint64Array): Promise<OverlapScores> => {
      const engine = ix.#engine;
      if (!(engine instanceof ThreadedEngine)) throw new KvIndexError(ErrorCode.InvalidOption, 'findMatchesViaPorts: no shard threads');
      return engine.findViaPorts(new Uint32Array(seq.buffer, seq.byteOffset, seq.length * 2), seq.length);
    },
  };

  /** True while the backlog is above the high-water mark; wait for `'drain'`. */
  get needsDrain(): boolean {
    return this.#engine.needsDrain;
  }

  /** Open, and every event applied so far has reached its shard's tree (nothing queued or in flight). */
  get idle(): boolean {
    return this.#engine.idle;
  }

  /** Shard threads still running (0 after `close()`, and for `shards: 0`). */
  get liveThreads(): number {
    return this.#engine.liveThreads;
  }

  /**
   * Lookups that found a shard's writer descheduled inside a write section: answered without
   * waiting for it, or waited after all (src/tree/unit-log.ts). Zeros for `shards: 0`.
   */
  get readsPastWriter(): ReadsPastWriter {
    return this.#engine.readsPastWriter;
  }

  /** Thread ids of the shard threads (empty for `shards: 0`). */
  get threadIds(): number[] {
    return this.#engine.threadIds;
  }

  /** Validates and applies (or queues) one event; synchronous. Throws on a malformed event. */
  applyEvent(event: RouterEvent): void {
    this.#engine.applyEvent(event);
  }

  applyEvents(events: Iterable<RouterEvent>): void {
    for (const e of events) this.#engine.applyEvent(e);
  }

  /**
   * Parses one event given as Dynamo serde JSON on the calling thread and applies it: the same
   * as `applyEvent(parseRouterEvent(text))`, but with shard threads, text in serde's canonical
   * layout goes straight into the shard's batch, with no event object (json-words.ts; other
   * layouts are parsed fully). Throws `EventParseError` on malformed text, which then changes
   * nothing.
   */
  applyEventJsonOnCaller(text: Uint8Array): void {
    this.#engine.applyEventJsonOnCaller(text);
  }

  /**
   * Applies one event given as Dynamo serde JSON (a NATS message, a file line). With shard
   * threads only the leading worker id is read here and the shard parses the rest, in
   * parallel: a malformed event then changes nothing, is counted in `stats()[i].malformed` and
   * is reported through the `'malformed'` event as `(error, tag)`, with the `tag` given here (a
   * NATS stream sequence, a line number). A worker's first event, text that does not start
   * with `{"worker_id":N`, and everything with `shards: 0` are parsed here: malformed input
   * then throws `EventParseError` synchronously (so a malformed event never claims a shard).
   */
  applyEventJson(text: Uint8Array, tag?: number): void {
    this.#engine.applyEventJson(text, tag);
  }

  /**
   * Resolves once the backlog is under the low-water mark (immediately if it is); rejects with
   * the shard's error if one fails, and with `KVX_CLOSED` after `close()`. (A wait pending when
   * `close()` ran never settled: the stopped threads send no more acks, and `restore()` hung
   * with it; found by fuzzing.)
   */
  drained(): Promise<void> {
    if (this.#closing) return Promise.reject(new KvIndexError(ErrorCode.Closed, 'indexer is closed'));
    if (!this.#engine.needsDrain) return Promise.resolve();
    return new Promise((res, rej) => {
      const done = (err: Error | null): void => {
        this.off('drain', onDrain);
        this.off('shardFailed', onFail);
        this.#drainWaiters.delete(onClose);
        if (err === null) res();
        else rej(err);
      };
      const onDrain = (): void => done(null);
      const onFail = (err: Error): void => done(err);
      const onClose = (): void => done(new KvIndexError(ErrorCode.Closed, 'indexer is closed'));
      this.once('drain', onDrain);
      this.once('shardFailed', onFail);
      this.#drainWaiters.add(onClose);
    });
  }

  /** Prefix-match scores of every worker for a sequence of tokens hashes (u64 each). */
  findMatches(hashes: BigUint64Array | readonly bigint[]): Promise<OverlapScores> {
    this.#saw(hashes);
    return this.#engine.findMatches(hashes);
  }

  /**
   * Hashes the tokens on this thread (full blocks only; `options`: the request's LoRA adapter
   * and multimodal hashes, as `computeBlockHashes`), then `findMatches`.
   */
  findMatchesForTokens(tokens: Uint32Array | readonly number[], options?: BlockHashOptions): Promise<OverlapScores> {
    const found = this.#tokensLookup(tokens, options, false);
    if (!(found instanceof BigUint64Array)) return Promise.resolve(found);
    this.#saw(found);
    return this.#engine.findMatches(found);
  }

  /** See `Engine.firstBlock` (long tokens lookups use it to skip hashing: `firstBlockMisses`). */
  firstBlock(first: BigUint64Array, wait: boolean): FirstBlock {
    return this.#engine.firstBlock(first, wait);
  }

  /** See `Engine.findMatchesNow` (long tokens lookups use it for their prefix: `prefixAnswers`). */
  findMatchesNow(hashes: BigUint64Array, wait: boolean): OverlapScores | null {
    return this.#engine.findMatchesNow(hashes, wait);
  }

  /**
   * Tokens lookups whose first block no worker holds at the start of a sequence, answered
   * (no scores) after hashing that block alone: see `#tokensLookup`.
   */
  get firstBlockMisses(): number {
    return this.#cut.firstBlockMisses;
  }

  /**
   * Tokens lookups answered from a prefix of `PREFIX_BLOCKS` blocks, the rest of the prompt
   * never hashed: see `#tokensLookup`.
   */
  get prefixAnswers(): number {
    return this.#cut.prefixAnswers;
  }

  /**
   * A tokens lookup's answer when a cut settles it, else every block's hash (for the caller to
   * look up): the two cuts of tokens-cut.ts, asked of the engine. With `wait` false (the async
   * call) and read-your-writes, a shard that has not caught up after a short spin leaves a cut
   * untried: the lookup then hashes everything and goes the usual way. A lookup cut at its
   * first block counts for keep-warm but does not become the request keep-warm primes (its
   * path is one root probe; the previous request's is worth keeping warm); one answered from
   * its prefix does, with the prefix.
   */
  #tokensLookup(tokens: Uint32Array | readonly number[], options: BlockHashOptions | undefined, wait: boolean): OverlapScores | BigUint64Array {
    const cut = this.#cut;
    const found = cut.lookup(tokens, this.#blockSize, options, wait ? this.#probesWait : this.#probesNow);
    if (found === FIRST_UNHELD) {
      this.#lookups++;
      const kw = this.#keepWarm;
      if (kw !== null && !kw.armed) kw.wake();
      return noMatch();
    }
    if (!(found instanceof BigUint64Array)) this.#saw(cut.lastPrefix);
    return found;
  }

  #probes(wait: boolean): CutProbes<OverlapScores> {
    return {
      firstUnheld: (first) => {
        const found = this.#engine.firstBlock(first, wait);
        return found === FirstBlock.Unknown ? null : found === FirstBlock.Unheld;
      },
      prefix: (hashes) => this.#engine.findMatchesNow(hashes, wait),
      deepest: (found) => {
        let best = 0;
        for (const score of found.scores.values()) if (score > best) best = score;
        return best;
      },
    };
  }

  /**
   * The allocation-free lookup, on the calling thread, with every shard count: fills
   * `result.workerIds` / `result.scores` at 0..n-1 (`createMatchResult()`, reused across calls)
   * and returns n, the number of matching workers. With shard threads it reads their trees in
   * shared memory; with `readYourWrites` (the default) it first waits, blocking, until they
   * applied every event applied before the call. Throws `InvalidOption` with shard threads and
   * `expirationMs` (the frequency trail lives in the shards: use `findMatches`). `earlyExit`
   * (Dynamo's: stop after a node only one worker holds) is honoured in-thread and with one
   * shard; with more, scores are the whole walk's (a shard cannot see the others' holders).
   */
  findMatchesInto(hashes: BigUint64Array | readonly bigint[], result: MatchResult, earlyExit = false): number {
    this.#saw(hashes);
    return this.#engine.findMatchesInto(hashes, result, earlyExit);
  }

  /** `findMatches`, synchronously, on the calling thread (see `findMatchesInto`). */
  findMatchesSync(hashes: BigUint64Array | readonly bigint[]): OverlapScores {
    this.#saw(hashes);
    return this.#engine.findMatchesSync(hashes);
  }

  /** `findMatchesForTokens`, synchronously, on the calling thread. */
  findMatchesForTokensSync(tokens: Uint32Array | readonly number[], options?: BlockHashOptions): OverlapScores {
    const found = this.#tokensLookup(tokens, options, true);
    if (!(found instanceof BigUint64Array)) return found;
    this.#saw(found);
    return this.#engine.findMatchesSync(found);
  }

  /** Drops the worker everywhere; a returning worker is assigned a shard afresh. */
  removeWorker(workerId: bigint): Promise<void> {
    return this.#engine.removeWorker(workerId);
  }

  /** The dump as events (with threads: the shards' streams concatenated, event ids from 0). */
  dumpEvents(): Promise<RouterEvent[]> {
    return this.#engine.dumpEvents();
  }

  /**
   * The dump as snapshot bytes: with threads every shard dumps at once and the parts merge as
   * bytes (a bincode result then lives in a SharedArrayBuffer, no copy).
   */
  dumpSnapshot(encoding: SnapshotEncoding = 'bincode'): Promise<Uint8Array> {
    return this.#engine.dumpSnapshot(encoding);
  }

  /** Applies a snapshot's events (or any event stream), honouring backpressure, then flushes. */
  async restore(events: Iterable<RouterEvent> | AsyncIterable<RouterEvent>): Promise<void> {
    for await (const e of events as AsyncIterable<RouterEvent>) {
      this.#engine.applyEvent(e);
      if (this.#engine.needsDrain) await this.drained();
    }
    await this.#engine.flush();
  }

  /**
   * Restores a bincode (or bincode-dp) snapshot without event objects (snapshot-restore.ts):
   * checked whole first, so malformed bytes throw `SnapshotDecodeError` before anything is
   * applied; then every event, honouring backpressure, then a flush. At 16.4M pairs this is the
   * fast way back after a restart (BENCHMARKS.md, "Restore to ready"). JSON lines: use `restore`.
   */
  async restoreSnapshot(bytes: Uint8Array, encoding: 'bincode' | 'bincode-dp' = 'bincode'): Promise<BincodeSummary> {
    const summary = await restoreBincode(this.#engine, () => this.drained(), bytes, encoding === 'bincode-dp');
    await this.#engine.flush();
    return summary;
  }

  /** Resolves when every event applied so far has reached its shard's tree. */
  flush(): Promise<void> {
    return this.#engine.flush();
  }

  /** Per-shard statistics, in shard order (one entry for `shards: 0`). */
  stats(): Promise<ShardStats[]> {
    return this.#engine.stats();
  }

  /** Stops every shard thread; pending calls fail with KVX_CLOSED. Safe to call twice. */
  async close(): Promise<void> {
    this.#closing = true;
    for (const w of [...this.#drainWaiters]) w();
    this.#keepWarm?.stop();
    await this.#engine.close();
  }
}
