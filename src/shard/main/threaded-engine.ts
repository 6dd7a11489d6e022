/**
 * The threaded engine: the main thread validates and routes KV events to shard threads (sticky
 * worker -> shard assignment, as Dynamo's `KvIndexerSharded`), lookups are broadcast and merged,
 * dumps are built by every shard at once and merged as bytes.
 *
 * Ordering: everything for a shard goes through its outbox (outbox.ts), appended at the moment
 * of the call, before any await: event batches of every ingestion path, worker removals, and
 * requests. So each call sees exactly the events applied before it. A dump carries an id, and a
 * shard keeps its prepared part per id, so several dumps may be in flight at once.
 *
 * Backpressure: `applyEvent` never blocks. When more than `highWaterEvents` events are queued or
 * in flight, more than `highWaterBytes` of batches are in flight, or a shard's batch ring is more
 * than half full, `needsDrain` becomes true; the indexer emits `'drain'` once all are at half
 * (the rings at a quarter).
 */
import type { Logger } from 'pino';
import { ErrorCode, KvIndexError } from '../../errors.js';
import { FirstBlock, type ReadsPastWriter } from '../../indexer/indexer.js';
import { parseRouterEvent } from '../../protocol/json-parse.js';
import { decodeSnapshot } from '../../protocol/snapshot-reader.js';
import { mergeSnapshots, writeBincodeCount } from '../../protocol/snapshot-merge.js';
import { U64_MAX, type OverlapScores, type RouterEvent, type SnapshotEncoding } from '../../protocol/types.js';
import { assertRouterEvent } from '../../protocol/validate.js';
import { createBatchRing, type BatchRingShape } from '../wire/batch-ring.js';
import { JsonEventEncoder } from '../wire/json-words.js';
import type { DumpPrepared, FindReply, ShardStats } from '../wire/messages.js';
import { peekWorkerId } from './json-peek.js';
import { H } from '../../tree/shared-layout.js';
import { createMatchResult, MatchResult } from '../../tree/match-result.js';
import { U64Scratch } from '../../tree/u64-scratch.js';
import { mergeScores } from './merge-scores.js';
import { WalkScratch } from '../../tree/walk.js';
import { workerTriples } from '../../tree/bulk-load.js';
import { ScoreList } from './score-list.js';
import { TreeReader } from './tree-reader.js';
import { ShardOutbox } from './outbox.js';
import { ReplyBoard } from './reply-board.js';
import { ThreadShard, type Ack, type ShardThreadSpec } from './thread-shard.js';

/**
 * Where the engine reports what happens off the calling thread; ShardedIndexer turns these
 * into its `'drain'`, `'shardFailed'` and `'malformed'` events. (The engine implements the
 * indexer's `Engine` contract structurally, so this folder does not import the indexer's.)
 */
export type EngineReport =
  | ['drain']
  | ['shardFailed', KvIndexError]
  | ['malformed', KvIndexError, number | undefined];

export interface ThreadedEngineOptions {
  shards: number;
  expirationMs: number | undefined;
  /** The indexer's pair budget, split evenly over the shards (undefined: none). */
  maxPairs: number | undefined;
  /** The indexer's capacity hint in pairs, split evenly over the shards (undefined: none). */
  expectedPairs: number | undefined;
  logger: Logger | null;
  highWaterEvents: number;
  /** Bytes of batches in flight above which `needsDrain` is set (options.ts). */
  highWaterBytes: number;
  batchWords: number;
  /** Lookups wait until the shards applied every event queued before them (default true). */
  readYourWrites: boolean;
  /** Niceness of the shard threads (0: unchanged). */
  nice: number;
  /** Whether each shard thread warms its code up before it reports started (warm-up.ts). */
  warmUp: boolean;
  thread: ShardThreadSpec;
}

/**
 * How long an async lookup spins for lagging shards before it takes the ordered port path: only
 * long enough to catch a shard finishing. Spinning longer mostly waits for a shard that has a
 * batch to apply (or must first wake), time the calling thread could spend on other requests:
 * offered-load sweep, 2 shards, read-your-writes, same run: 50 us gave 9.3k requests/s unpaced
 * and fell behind at 3,000x; 5 us gave 14.1k and kept up (p50 1.2 ms instead of 13 ms there).
 */
const CATCH_UP_SPIN_MS = 0.005;
/**
 * How long a synchronous lookup spins for a lagging shard before it sleeps in `Atomics.wait`:
 * it blocks the calling thread either way, and a spin sees the shard finish within 0.2-3 us
 * where waking from `Atomics.wait` takes 3-44 us.
 */
const SYNC_SPIN_MS = 0.05;
/** How long a synchronous lookup waits for a shard that does not catch up: then it fails. */
const CATCH_UP_LIMIT_MS = 30_000;

/** Spare batch buffers a shard's outbox may hold: its share of the in-flight bound, at least 1 MiB. */
const poolBytes = (o: ThreadedEngineOptions): number => Math.max(1 << 20, Math.ceil(o.highWaterBytes / o.shards));

/**
 * Bytes of a shard's batch ring: 8 batches of `batchWords` (2 MiB by default), at least 1 MiB,
 * at most the shard's share of the in-flight bound. Backpressure is set at half of it
 * (`ShardOutbox.ringBusy`), so a shard has 4 or more batches queued while the caller waits and
 * a caller that honours `needsDrain` never overruns it; the 16.4M-pair fleet's ingest held
 * 8-16 MiB in flight over 2 shards before, in buffers of the calling thread's heap. Measured
 * there (6 alternating fresh processes a side): RSS after ingest unchanged within the spread
 * (the brk heap 5-10 MiB smaller, the rings 4 MiB resident), apply 3-15 % faster in each pair;
 * after a restore of the same 16.4M pairs 22-28 MiB less RSS, in the same time (docs/layout.md).
 */
const ringBytes = (o: ThreadedEngineOptions): number => Math.min(poolBytes(o), Math.max(1 << 20, 32 * o.batchWords));

export class ThreadedEngine {
  private readonly logger: Logger | null;
  private readonly highWater: number;
  private readonly threads: ThreadShard[];
  private readonly outboxes: ShardOutbox[];
  private readonly encoder = new JsonEventEncoder();
  private readonly shardOf = new Map<bigint, number>();
  private readonly workersPerShard: number[];
  private readonly board: ReplyBoard;
  private readonly readers: TreeReader[];
  private readonly readYourWrites: boolean;
  /** The result the Map-returning lookups fill before making the Map (reused). */
  private readonly list = new ScoreList();
  /** Per shard, the applied count a lookup last saw equal to the posted count. */
  private readonly seenApplied: Int32Array;
  /** The lookup's hashes as (lo, hi) words, copied in (no view object per call). */
  private readonly words = new U64Scratch();
  /** The result of `firstBlock`'s one-block walks, reused. */
  private readonly probe = createMatchResult();
  private readonly frequencyTrail: boolean;
  private flushScheduled = false;
  private nextDump = 1;
  private queued = 0;
  private inFlight = 0;
  /** Bytes of the batches in flight (posted, not acknowledged). */
  private inFlightBytes = 0;
  private readonly highWaterBytes: number;
  private draining = false;
  private failure: KvIndexError | null = null;
  /** `failure` was made from a shard's shared failed flag; its own message is still on the way. */
  private failureFromFlag = false;
  private closed = false;

  private constructor(options: ThreadedEngineOptions, board: ReplyBoard, threads: ThreadShard[], rings: BatchRingShape[], private readonly report: (...r: EngineReport) => void) {
    this.logger = options.logger;
    this.highWater = options.highWaterEvents;
    this.highWaterBytes = options.highWaterBytes;
    this.board = board;
    this.frequencyTrail = options.expirationMs !== undefined;
    this.threads = threads;
    this.outboxes = threads.map((t, i) => new ShardOutbox(t, options.batchWords, (events, bytes, ringBusy) => this.sent(events, bytes, ringBusy), poolBytes(options), rings[i]!));
    this.workersPerShard = threads.map(() => 0);
    // One walk scratch for all shards: one set of per-slot arrays instead of one per shard (the
    // readers run one after the other). Latency after 10 ms idle measured the same either way
    // (p50 5.6-9.3 us over 5 runs each, 2 shards, conversation tree).
    const walker = new WalkScratch();
    this.readers = threads.map((t) => new TreeReader(t.layout!, walker));
    this.seenApplied = new Int32Array(threads.length);
    this.readYourWrites = options.readYourWrites;
  }

  /** Starts the shard threads; throws `ShardFailed` (after stopping the started ones) if any fails. */
  static async start(options: ThreadedEngineOptions, report: (...r: EngineReport) => void): Promise<ThreadedEngine> {
    const board = new ReplyBoard(options.shards);
    const rings = Array.from({ length: options.shards }, () => createBatchRing(ringBytes(options)));
    let engine: ThreadedEngine | null = null;
    const started = await Promise.allSettled(
      Array.from({ length: options.shards }, (_, i) =>
        ThreadShard.start(
          i, options.thread,
          {
            shard: i, expirationMs: options.expirationMs ?? null, board: board.shape, ring: rings[i]!, initialCapacity: null, nice: options.nice, warmUp: options.warmUp,
            // An even split keeps the sum within the budget; a skewed shard evicts before the others.
            maxPairs: options.maxPairs === undefined ? null : Math.floor(options.maxPairs / options.shards),
            expectedPairs: options.expectedPairs === undefined ? null : Math.ceil(options.expectedPairs / options.shards),
          },
          (ack) => engine?.onAck(i, ack),
          (err) => engine?.onShardFailed(err),
        ),
      ),
    );
    const threads = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    if (threads.length !== options.shards) {
      await Promise.all(threads.map((t) => t.close()));
      const reason = started.find((s) => s.status === 'rejected') as PromiseRejectedResult;
      throw new KvIndexError(ErrorCode.ShardFailed, `could not start shard threads: ${String(reason.reason)}`, { cause: reason.reason });
    }
    engine = new ThreadedEngine(options, board, threads, rings, report);
    for (const t of threads) if (t.failed !== null) engine.onShardFailed(t.failed);
    return engine;
  }

  get needsDrain(): boolean {
    return this.draining;
  }

  get liveThreads(): number {
    return this.threads.reduce((n, t) => n + t.liveThreads, 0);
  }

  get threadIds(): number[] {
    return this.threads.map((t) => t.threadId);
  }

  /** No event queued in an outbox, every shard applied all it was sent, no failure, open. */
  get idle(): boolean {
    if (this.failure !== null || this.closed) return false;
    for (let i = 0; i < this.readers.length; i++) {
      const out = this.outboxes[i]!;
      if (out.queued !== 0 || this.readers[i]!.applied !== out.sentEvents) return false;
    }
    return true;
  }

  get readsPastWriter(): ReadsPastWriter {
    let answered = 0;
    let waited = 0;
    for (const r of this.readers) {
      answered += r.readsPast;
      waited += r.readsPastFailed;
    }
    return { answered, waited };
  }

  applyEvent(event: RouterEvent): void {
    this.check();
    const id = (event as { workerId?: unknown } | null)?.workerId;
    if (typeof id !== 'bigint' || id < 0n || id > U64_MAX) assertRouterEvent(event); // throws
    const known = this.shardOf.get(event.workerId);
    const shard = known ?? this.leastLoaded();
    // `pushEvent` validates as it writes and queues nothing for a malformed event, which
    // therefore claims no shard for a new worker.
    this.outboxes[shard]!.pushEvent(event);
    if (known === undefined) this.claim(event.workerId, shard);
    this.enqueued(shard);
  }

  /** @internal See `Engine.applyStoredWords`: queued as the batch's own record, no event object. */
  applyStoredWords(workerId: bigint, wLo: number, wHi: number, hasParent: boolean, pLo: number, pHi: number, words: Uint32Array, n: number): void {
    this.check();
    const known = this.shardOf.get(workerId);
    const shard = known ?? this.leastLoaded();
    this.outboxes[shard]!.pushStoredWords(wLo, wHi, hasParent, pLo, pHi, words, n);
    if (known === undefined) this.claim(workerId, shard);
    this.enqueued(shard);
  }

  /**
   * Before a bulk restore: places the snapshot's new workers on shards now, as their first
   * events would (`perWorker` is in order of first appearance; `leastLoaded`), then asks each
   * shard to size its tree once (`reserve` request, ordered before the events that follow).
   * Growing per event instead was ~1.3 of 2.9 s of each shard thread's CPU samples restoring
   * 4.1M fleet pairs (node arrays in 1.25x steps, the private ones copied into fresh pages).
   */
  reserve(_blocks: number, perWorker: Map<bigint, number>): void {
    this.check();
    for (const w of perWorker.keys()) if (!this.shardOf.has(w)) this.claim(w, this.leastLoaded());
    for (let s = 0; s < this.outboxes.length; s++) {
      const workers = workerTriples(perWorker, (w) => this.shardOf.get(w) === s);
      let nodes = 0;
      for (let i = 2; i < workers.length; i += 3) nodes += workers[i]!;
      if (nodes === 0) continue;
      // Fire and forget: a shard that fails fails every later request too (the restore's flush).
      this.outboxes[s]!.request({ op: 'reserve', nodes, workers }, [workers.buffer as ArrayBuffer]).catch(() => undefined);
    }
  }

  applyEventJsonOnCaller(text: Uint8Array): void {
    this.check();
    const shard = this.shardOfJsonOrApply(text);
    if (shard < 0) return;
    const out = this.outboxes[shard]!;
    if (!out.pushCanonicalJson(this.encoder, text)) out.pushEvent(parseRouterEvent(text));
    this.enqueued(shard);
  }

  applyEventJson(text: Uint8Array, tag?: number): void {
    this.check();
    const shard = this.shardOfJsonOrApply(text);
    if (shard < 0) return;
    this.outboxes[shard]!.pushJson(text, tag ?? -1); // parsed in the shard
    this.enqueued(shard);
  }

  /**
   * The shard of the worker a JSON event names when that worker has one; otherwise (a worker's
   * first event, or text that does not start with the worker id) parses the whole event here
   * and applies it, returning -1: a malformed first event then throws and claims no shard.
   */
  private shardOfJsonOrApply(text: Uint8Array): number {
    const worker = peekWorkerId(text);
    const shard = worker === null ? undefined : this.shardOf.get(worker);
    if (shard !== undefined) return shard;
    this.applyEvent(parseRouterEvent(text));
    return -1;
  }

  /**
   * The allocation-free lookup, on the calling thread: walks every shard's tree in shared
   * memory (tree-reader.ts) and fills `result`. With read-your-writes it first posts the queued
   * events and waits until each shard applied everything posted (blocking: spin, then
   * `Atomics.wait`); no event queued after the call can reach a shard meanwhile, since the
   * calling thread is the one that queues them.
   */
  findMatchesInto(hashes: BigUint64Array | readonly bigint[], result: MatchResult, earlyExit = false): number {
    return this.readAll(this.syncWords(hashes), hashes.length, earlyExit, result);
  }

  findMatchesSync(hashes: BigUint64Array | readonly bigint[]): OverlapScores {
    return this.readAllScores(this.syncWords(hashes), hashes.length);
  }

  firstBlock(first: BigUint64Array, wait: boolean): FirstBlock {
    this.check();
    if (this.frequencyTrail) return FirstBlock.Unknown;
    const words = this.words.copyWords(first);
    if (this.readYourWrites) {
      if (wait) this.catchUp(CATCH_UP_LIMIT_MS, true);
      else if (!this.catchUp(CATCH_UP_SPIN_MS, false)) return FirstBlock.Unknown;
    }
    return this.readAll(words, 1, false, this.probe) === 0 ? FirstBlock.Unheld : FirstBlock.Held;
  }

  findMatchesNow(hashes: BigUint64Array, wait: boolean): OverlapScores | null {
    this.check();
    if (this.frequencyTrail) return null;
    const words = this.words.copyWords(hashes);
    if (this.readYourWrites) {
      if (wait) this.catchUp(CATCH_UP_LIMIT_MS, true);
      else if (!this.catchUp(CATCH_UP_SPIN_MS, false)) return null;
    }
    return this.readAllScores(words, hashes.length);
  }

  /** A synchronous lookup's hashes as words, once (read-your-writes) the shards caught up. */
  private syncWords(hashes: BigUint64Array | readonly bigint[]): Uint32Array {
    this.check();
    if (this.frequencyTrail) {
      throw new KvIndexError(ErrorCode.InvalidOption, 'synchronous lookups need expirationMs unset with shard threads (the frequency trail is recorded in the shards): use findMatches');
    }
    const words = hashes instanceof BigUint64Array ? this.words.copyWords(hashes) : this.words.hashWords(hashes, true);
    if (this.readYourWrites) this.catchUp(CATCH_UP_LIMIT_MS, true);
    return words;
  }

  async findMatches(hashes: BigUint64Array | readonly bigint[]): Promise<OverlapScores> {
    this.check();
    // Copied into scratch words, as the synchronous lookup does: the shard paths below copy
    // them again (board slot, port message) before this call returns.
    const words = hashes instanceof BigUint64Array ? this.words.copyWords(hashes) : this.words.hashWords(hashes, true);
    // On the calling thread, unless the shards record a frequency trail, or (read-your-writes)
    // a shard still lags after a short spin: then through the ordered outboxes, which neither
    // block this thread nor let a later event overtake the lookup.
    if (!this.frequencyTrail && (!this.readYourWrites || this.catchUp(CATCH_UP_SPIN_MS, false))) {
      return this.readAllScores(words, hashes.length);
    }
    return this.findThroughShards(words, hashes.length);
  }

  /**
   * Reads every shard's tree into `result`; returns the number of matching workers. Early exit
   * (stop after a node only one worker holds) only with one shard: a shard sees only its own
   * workers, so a node two shards' workers share looked single-held to each and both walks
   * stopped there, with scores below the in-thread tree's (found by fuzzing). With several
   * shards every walk is whole: scores are never lower than early exit's.
   */
  private readAll(words: Uint32Array, n: number, earlyExit: boolean, result: MatchResult): number {
    const exit = earlyExit && this.readers.length === 1;
    let k = 0;
    for (let i = 0; i < this.readers.length; i++) k = this.readers[i]!.lookupInto(words, 0, n, exit, result, k);
    return k;
  }

  /**
   * Reads every shard's tree into the score list, then makes the Map after the locks: an
   * allocation (and the collection it may start) never happens while a shard's lock is held,
   * where it would stall that shard's writer (score-list.ts).
   */
  private readAllScores(words: Uint32Array, n: number): OverlapScores {
    const list = this.list;
    list.clear();
    for (let i = 0; i < this.readers.length; i++) this.readers[i]!.lookupScores(words, 0, n, list);
    return list.toScores();
  }

  /**
   * Posts every queued event, then waits until each shard has applied all posted events:
   * spinning up to `limitMs`, and when `sleep`, sleeping in `Atomics.wait` after a short spin.
   * Returns whether all caught up; throws `ShardFailed` if a shard failed (or, sleeping, did
   * not catch up within the limit).
   */
  private catchUp(limitMs: number, sleep: boolean): boolean {
    for (let i = 0; i < this.outboxes.length; i++) this.outboxes[i]!.send();
    let started = -1;
    for (let i = 0; i < this.readers.length; i++) {
      const r = this.readers[i]!;
      const want = this.outboxes[i]!.sentEvents;
      // Seen caught up, and nothing posted since: no need to load the count again (quiescent
      // lookups skip one `Atomics.load`, ~16 ns in Node 20, per shard).
      if (this.seenApplied[i] === want) continue;
      let spins = 0;
      for (;;) {
        const applied = r.applied;
        if (applied === want) {
          this.seenApplied[i] = applied;
          break;
        }
        if (r.failed) throw this.shardFailure(i);
        if ((++spins & 255) !== 0) continue;
        const now = performance.now();
        if (started < 0) started = now;
        if (now - started > limitMs) {
          if (!sleep) return false;
          throw new KvIndexError(ErrorCode.ShardFailed, `shard ${i}: did not apply its events within ${limitMs} ms`);
        }
        if (sleep && now - started > SYNC_SPIN_MS) {
          Atomics.add(r.header, H.APPLIED_WAITERS, 1);
          Atomics.wait(r.header, H.APPLIED, applied, 10);
          Atomics.sub(r.header, H.APPLIED_WAITERS, 1);
        }
      }
    }
    return true;
  }

  /**
   * A shard's shared failed flag is seen before its `fatal` message arrives: the indexer fails
   * from here on, not only this call (a later `applyEvent` must throw too, whichever comes first).
   */
  private shardFailure(i: number): KvIndexError {
    if (this.failure === null) {
      this.failure = new KvIndexError(ErrorCode.ShardFailed, `shard ${i}: failed while applying events`);
      this.failureFromFlag = true;
    }
    return this.failure;
  }

  /** The lookup as a request to every shard, ordered in their outboxes (board or ports). */
  private async findThroughShards(words: Uint32Array, n: number): Promise<OverlapScores> {
    const board = this.board;
    const most = Math.max(...this.workersPerShard);
    const slot = board.fits(n, most, this.frequencyTrail ? n : 0) ? board.open(words, n, false) : -1;
    if (slot < 0) return this.findViaPorts(words, n);
    // A pending Atomics.waitAsync does not keep the process alive: the shards' ports do.
    for (const t of this.threads) t.hold();
    try {
      for (const o of this.outboxes) o.lookupInSlot(slot);
      await board.wait(slot, () => this.failure !== null || this.closed);
      this.check();
      const replies = board.read(slot);
      if (typeof replies === 'number') {
        throw new KvIndexError(ErrorCode.ShardFailed, `shard ${replies}: lookup failed`);
      }
      return mergeScores(replies);
    } finally {
      board.release(slot); // safe even if a shard has not replied (the slot's generation moves on)
      for (const t of this.threads) t.release();
    }
  }

  /** Lookup with one port reply per shard: when the reply board cannot take it. */
  async findViaPorts(words: Uint32Array, n: number): Promise<OverlapScores> {
    const replies = await Promise.all(this.outboxes.map((o) => o.request<FindReply>({ op: 'find', words, n, earlyExit: false })));
    return mergeScores(replies);
  }

  async removeWorker(workerId: bigint): Promise<void> {
    this.check();
    const shard = this.shardOf.get(workerId);
    if (shard === undefined) return;
    this.shardOf.delete(workerId);
    this.workersPerShard[shard]!--;
    const out = this.outboxes[shard]!;
    out.pushRemoveWorker(workerId);
    this.queued++;
    await out.request({ op: 'flush' });
  }

  async dumpEvents(): Promise<RouterEvent[]> {
    return decodeSnapshot(await this.dumpSnapshot('bincode'), 'bincode');
  }

  /**
   * The merged dump as snapshot bytes: every shard dumps at once, the parts merge as bytes.
   * With a bincode encoding the bytes live in a SharedArrayBuffer (no copy).
   */
  async dumpSnapshot(encoding: SnapshotEncoding): Promise<Uint8Array> {
    this.check();
    if (encoding === 'jsonl') {
      const parts = await Promise.all(this.outboxes.map((o) => o.request<Uint8Array>({ op: 'dump', encoding })));
      return mergeSnapshots(parts, encoding);
    }
    if (encoding !== 'bincode' && encoding !== 'bincode-dp') {
      throw new KvIndexError(ErrorCode.InvalidOption, `encoding: expected 'bincode', 'bincode-dp' or 'jsonl', found ${String(encoding)}`);
    }
    // Bincode: shards dump into warm buffers, then each copies its part into one shared buffer
    // at its offset, renumbering its event ids. Both steps run on all shards at once; the main
    // thread only adds the sizes (a merge on the main thread would fault in and copy the whole
    // snapshot serially: bench/shard.bench.ts). The first step is queued now, at its place
    // among the events; the second only copies what the first fixed.
    const dump = this.nextDump++;
    const prepared = await Promise.allSettled(this.outboxes.map((o) => o.request<DumpPrepared>({ op: 'dumpPrepare', dump, encoding })));
    const failed = prepared.find((p) => p.status === 'rejected');
    if (failed !== undefined) {
      prepared.forEach((p, i) => {
        if (p.status === 'fulfilled') this.outboxes[i]!.request({ op: 'dumpDrop', dump }).catch(() => undefined);
      });
      throw failed.reason;
    }
    const sizes = prepared.map((p) => (p as PromiseFulfilledResult<DumpPrepared>).value);
    const total = sizes.reduce((n, s) => n + s.bytes - 8, 8);
    const target = new SharedArrayBuffer(total);
    let at = 8;
    let firstId = 0;
    const copies: Promise<unknown>[] = [];
    for (let i = 0; i < this.outboxes.length; i++) {
      copies.push(this.outboxes[i]!.request({ op: 'dumpCopy', dump, target, at, firstId }));
      at += sizes[i]!.bytes - 8;
      firstId += sizes[i]!.events;
    }
    await Promise.all(copies);
    const out = new Uint8Array(target);
    writeBincodeCount(out, firstId);
    return out;
  }

  async flush(): Promise<void> {
    this.check();
    await Promise.all(this.outboxes.map((o) => o.request({ op: 'flush' })));
  }

  async stats(): Promise<ShardStats[]> {
    this.check();
    return Promise.all(this.outboxes.map((o) => o.request<ShardStats>({ op: 'stats' })));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.board.wakeAll();
    await Promise.all(this.threads.map((t) => t.close()));
  }

  // ---- internals ----

  private check(): void {
    if (this.closed) throw new KvIndexError(ErrorCode.Closed, 'indexer is closed');
    if (this.failure !== null) throw this.failure;
  }

  /** Dynamo's rule for a new worker: the shard with the fewest workers, lowest index on ties. */
  private leastLoaded(): number {
    let shard = 0;
    for (let i = 1; i < this.workersPerShard.length; i++) {
      if (this.workersPerShard[i]! < this.workersPerShard[shard]!) shard = i;
    }
    return shard;
  }

  /** Makes `shard` the worker's shard (sticky until `removeWorker`). */
  private claim(workerId: bigint, shard: number): void {
    this.shardOf.set(workerId, shard);
    this.workersPerShard[shard]!++;
  }

  /** Accounts for an event just queued in shard `shard`'s outbox. */
  private enqueued(shard: number): void {
    this.queued++;
    const out = this.outboxes[shard]!;
    if (out.full) out.send();
    else this.scheduleSend();
    if (!this.draining && this.queued + this.inFlight > this.highWater) this.draining = true;
  }

  private sent(events: number, bytes: number, ringBusy: boolean): void {
    this.queued -= events;
    this.inFlight += events;
    this.inFlightBytes += bytes;
    if (!this.draining && (ringBusy || this.inFlightBytes > this.highWaterBytes)) this.draining = true;
  }

  /** Every shard's batch ring is at most a quarter full. */
  private get ringsCalm(): boolean {
    for (const o of this.outboxes) if (!o.ringCalm) return false;
    return true;
  }

  /**
   * Posts every outbox's batch at the end of the current task's microtasks. Holding batches
   * back 1-3 ms instead (fewer, larger batches, fewer shard wake-ups) was tried in the
   * offered-load sweep at 2,000-7,000x (2 shards, `readYourWrites: false`, 2-core dev VM, paired
   * windows): lookup p99 31-52 us against 25-48 us posting at once, no gain, and events older.
   */
  private scheduleSend(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      if (this.closed || this.failure !== null) return;
      for (const o of this.outboxes) o.send();
    });
  }

  private onAck(shard: number, ack: Ack): void {
    this.inFlight -= ack.events;
    this.inFlightBytes -= ack.bytes;
    if (ack.words !== undefined) this.outboxes[shard]?.recycle(ack.words);
    for (const r of ack.rejected) {
      const err = KvIndexError.fromData(r);
      this.report('malformed', err, r.tag >= 0 ? r.tag : undefined);
    }
    if (this.draining && this.queued + this.inFlight <= this.highWater / 2 && this.inFlightBytes <= this.highWaterBytes / 2 && this.ringsCalm) {
      this.draining = false;
      this.report('drain');
    }
  }

  private onShardFailed(err: KvIndexError): void {
    // The shard's own message names the cause: it replaces the one made from the flag.
    if (this.failure === null || this.failureFromFlag) this.failure = err;
    this.failureFromFlag = false;
    this.board.wakeAll();
    this.logger?.error({ code: err.code }, err.message);
    this.report('shardFailed', err);
  }
}
