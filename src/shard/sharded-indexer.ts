/**
 * The sharded indexer: the main thread validates and routes KV events to shard threads (sticky
 * worker -> shard assignment, as Dynamo's `KvIndexerSharded`), lookups are broadcast and merged,
 * dumps are built by every shard at once and merged as bytes. `shards: 0` runs the same API on
 * one in-thread RadixTree (the embedded default for small deployments and tests).
 *
 * Ordering: all traffic of a shard goes through one FIFO port, and every request first flushes
 * the pending event batches, so a call made after `applyEvent` sees that event.
 *
 * Backpressure: `applyEvent` never blocks. When more than `highWaterEvents` events are queued or
 * in flight, `needsDrain` becomes true; the indexer emits `'drain'` once the backlog falls under
 * half of that. Callers that produce faster than the shards apply should wait for `'drain'`
 * (or `await indexer.drained()`); `restore` does so itself.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { ErrorCode, KvIndexError } from '../errors.js';
import { computeBlockHashes } from '../hash/block-hash.js';
import { parseRouterEvent } from '../protocol/json-parse.js';
import { decodeSnapshot } from '../protocol/snapshot-reader.js';
import { mergeSnapshots, writeBincodeCount } from '../protocol/snapshot-merge.js';
import { U64_MAX, type OverlapScores, type RouterEvent, type SnapshotEncoding } from '../protocol/types.js';
import { assertRouterEvent } from '../protocol/validate.js';
import { RadixTree } from '../tree/radix-tree.js';
import { EventBatchWriter, emptyCounts, type StatusCounts } from './event-batch.js';
import { checkOptions, shardWorkerFile, type ShardedIndexerOptions } from './indexer-options.js';
import type { DumpPrepared, FindReply, ShardStats } from './messages.js';
import { JsonBatchWriter, peekWorkerId } from './json-batch.js';
import { JsonEventEncoder } from './json-words.js';
import { mergeScores, toU64Array } from './merge-scores.js';
import { ReplyBoard } from './reply-board.js';
import { ThreadShard, type Ack } from './thread-shard.js';

export type { ShardedIndexerOptions } from './indexer-options.js';

export class ShardedIndexer extends EventEmitter {
  readonly shardCount: number;
  private readonly blockSize: number;
  private readonly logger: Logger | null;
  private readonly highWater: number;
  private readonly batchWords: number;
  // shards: 0
  private readonly tree: RadixTree | null;
  private readonly counts: StatusCounts = emptyCounts();
  // shards >= 1
  private readonly threads: ThreadShard[] = [];
  private readonly writers: EventBatchWriter[] = [];
  private readonly jsonWriters: JsonBatchWriter[] = [];
  private readonly encoder = new JsonEventEncoder();
  private readonly shardOf = new Map<bigint, number>();
  private readonly workersPerShard: number[] = [];
  private readonly board: ReplyBoard | null;
  private readonly frequencyTrail: boolean;
  private flushScheduled = false;
  private dumpChain: Promise<void> = Promise.resolve();
  private queued = 0;
  private inFlight = 0;
  private draining = false;
  private failure: KvIndexError | null = null;
  private closed = false;

  private constructor(options: ShardedIndexerOptions) {
    super();
    this.shardCount = options.shards;
    this.blockSize = options.blockSize;
    this.logger = options.logger ?? null;
    this.highWater = options.highWaterEvents ?? 65_536;
    this.batchWords = options.batchWords ?? 64 * 1024;
    const treeOptions = options.expirationMs === undefined ? {} : { expirationMs: options.expirationMs };
    this.tree = options.shards === 0 ? new RadixTree(treeOptions) : null;
    this.board = options.shards === 0 ? null : new ReplyBoard(options.shards);
    this.frequencyTrail = options.expirationMs !== undefined;
  }

  /** Validates the options and starts the shard threads. */
  static async create(options: ShardedIndexerOptions): Promise<ShardedIndexer> {
    checkOptions(options);
    const ix = new ShardedIndexer(options);
    if (options.shards > 0) {
      const file = shardWorkerFile();
      const started = await Promise.allSettled(
        Array.from({ length: options.shards }, (_, i) =>
          ThreadShard.start(
            i, file,
            {
              shard: i,
              expirationMs: options.expirationMs ?? null,
              failOnWorker: options.testFailOnWorker === undefined ? null : options.testFailOnWorker.toString(),
              board: ix.board!.shape,
            },
            (ack) => ix.onAck(i, ack),
            (err) => ix.onShardFailed(err),
          ),
        ),
      );
      for (const s of started) if (s.status === 'fulfilled') ix.threads.push(s.value);
      if (ix.threads.length !== options.shards) {
        await Promise.all(ix.threads.map((t) => t.close()));
        const reason = started.find((s) => s.status === 'rejected') as PromiseRejectedResult;
        throw new KvIndexError(ErrorCode.ShardFailed, `could not start shard threads: ${String(reason.reason)}`, { cause: reason.reason });
      }
      for (let i = 0; i < options.shards; i++) {
        ix.writers.push(new EventBatchWriter());
        ix.jsonWriters.push(new JsonBatchWriter());
        ix.workersPerShard.push(0);
      }
    }
    ix.logger?.debug({ shards: options.shards }, 'indexer started');
    return ix;
  }

  /** True while the backlog is above the high-water mark; wait for `'drain'`. */
  get needsDrain(): boolean {
    return this.draining;
  }

  /** Shard threads still running (0 after `close()`). */
  get liveThreads(): number {
    return this.threads.reduce((n, t) => n + t.liveThreads, 0);
  }

  /** Thread ids of the shard threads (empty for `shards: 0`). */
  get threadIds(): number[] {
    return this.threads.map((t) => t.threadId);
  }

  /** Validates and enqueues one event; synchronous, never awaits. Throws on a malformed event. */
  applyEvent(event: RouterEvent): void {
    this.check();
    if (this.tree !== null) {
      this.counts[this.tree.applyEvent(event)]++; // validates the event itself
      return;
    }
    // Validated by `push` below, which writes nothing for a malformed event; check the worker
    // id first so a bad one is not assigned a shard.
    const id = (event as { workerId?: unknown } | null)?.workerId;
    if (typeof id !== 'bigint' || id < 0n || id > U64_MAX) assertRouterEvent(event);
    const shard = this.assign(event.workerId);
    if (this.jsonWriters[shard]!.events > 0) this.sendJson(shard); // keep the shard's order
    this.writers[shard]!.push(event);
    this.enqueued(shard);
  }

  /**
   * Parses one event given as Dynamo serde JSON on the calling thread and enqueues it: the same
   * as `applyEvent(parseRouterEvent(text))`, but text in serde's canonical layout goes straight
   * into the shard's batch, with no event object (json-words.ts; other layouts are parsed
   * fully). Throws `EventParseError` on malformed text, which then changes nothing.
   */
  applyEventJsonOnCaller(text: Uint8Array): void {
    this.check();
    // A worker's first event is parsed fully, so a malformed one assigns it no shard.
    const worker = this.tree === null ? peekWorkerId(text) : null;
    const shard = worker === null ? undefined : this.shardOf.get(worker);
    if (shard === undefined) {
      this.applyEvent(parseRouterEvent(text));
      return;
    }
    if (this.jsonWriters[shard]!.events > 0) this.sendJson(shard); // keep the shard's order
    const w = this.writers[shard]!;
    if (!this.encoder.encode(text, 0, text.length, w)) w.push(parseRouterEvent(text));
    this.enqueued(shard);
  }

  /**
   * Enqueues one event given as Dynamo serde JSON (a NATS message, a file line). With shard
   * threads only the leading worker id is read here and the shard parses the rest, in
   * parallel: a malformed event then changes nothing, is counted in `stats()[i].malformed` and
   * is reported through the `'malformed'` event as `(error: KvIndexError, tag?: number)`, with
   * the `tag` given here (a NATS stream sequence, a line number). Text that does not
   * start with `{"worker_id":N` is parsed here, and with `shards: 0` everything is: malformed
   * input then throws `EventParseError` synchronously.
   */
  applyEventJson(text: Uint8Array, tag?: number): void {
    this.check();
    const worker = this.tree === null ? peekWorkerId(text) : null;
    if (worker === null) {
      this.applyEvent(parseRouterEvent(text));
      return;
    }
    const shard = this.assign(worker);
    if (this.writers[shard]!.events > 0) this.send(shard); // keep the shard's order
    const jw = this.jsonWriters[shard]!;
    jw.push(text, tag ?? -1);
    this.queued++;
    if (jw.bytes >= this.batchWords * 4) this.sendJson(shard);
    else this.scheduleFlush();
    if (!this.draining && this.queued + this.inFlight > this.highWater) this.draining = true;
  }

  /** Accounts for an event just written into shard `shard`'s batch. */
  private enqueued(shard: number): void {
    this.queued++;
    if (this.writers[shard]!.words >= this.batchWords) this.send(shard);
    else this.scheduleFlush();
    if (!this.draining && this.queued + this.inFlight > this.highWater) this.draining = true;
  }

  applyEvents(events: Iterable<RouterEvent>): void {
    for (const e of events) this.applyEvent(e);
  }

  /** Resolves once the backlog is under the low-water mark (immediately if it is). */
  drained(): Promise<void> {
    if (!this.draining) return Promise.resolve();
    return new Promise((res, rej) => {
      const onDrain = (): void => {
        this.off('shardFailed', onFail);
        res();
      };
      const onFail = (err: KvIndexError): void => {
        this.off('drain', onDrain);
        rej(err);
      };
      this.once('drain', onDrain);
      this.once('shardFailed', onFail);
    });
  }

  async findMatches(hashes: BigUint64Array | readonly bigint[]): Promise<OverlapScores> {
    this.check();
    if (this.tree !== null) return this.tree.findMatches(hashes);
    const seq = hashes instanceof BigUint64Array ? hashes : toU64Array(hashes);
    const words = new Uint32Array(seq.buffer, seq.byteOffset, seq.length * 2);
    this.flushAll();
    const board = this.board!;
    const most = Math.max(...this.workersPerShard);
    const slot = board.fits(seq.length, most, this.frequencyTrail ? seq.length : 0) ? board.take() : -1;
    if (slot >= 0) {
      try {
        board.writeRequest(slot, words, seq.length, false);
        for (const t of this.threads) t.lookupInSlot(slot);
        await board.wait(slot, () => this.failure !== null || this.closed);
        this.check();
        const replies = board.read(slot);
        if (typeof replies === 'number') {
          throw new KvIndexError(ErrorCode.ShardFailed, `shard ${replies}: lookup failed`);
        }
        return mergeScores(replies);
      } finally {
        board.release(slot);
      }
    }
    return this.findViaPorts(words, seq.length);
  }

  /** Lookup with one port reply per shard: when the reply board cannot take it. */
  private async findViaPorts(words: Uint32Array, n: number): Promise<OverlapScores> {
    const replies = await Promise.all(this.threads.map((t) => t.request<FindReply>({ op: 'find', words, n, earlyExit: false })));
    return mergeScores(replies);
  }

  /** Hashes the tokens on this thread (full blocks only), then `findMatches`. */
  findMatchesForTokens(tokens: Uint32Array | readonly number[]): Promise<OverlapScores> {
    return this.findMatches(computeBlockHashes(tokens, this.blockSize));
  }

  /** Drops the worker everywhere; a returning worker is assigned a shard afresh. */
  async removeWorker(workerId: bigint): Promise<void> {
    this.check();
    if (this.tree !== null) {
      this.tree.removeWorker(workerId);
      return;
    }
    const shard = this.shardOf.get(workerId);
    if (shard === undefined) return;
    this.shardOf.delete(workerId);
    this.workersPerShard[shard]!--;
    this.writers[shard]!.pushRemoveWorker(workerId);
    this.queued++;
    this.send(shard);
    await this.threads[shard]!.request({ op: 'flush' });
  }

  /** The merged dump as events (shards' streams concatenated, event ids from 0). */
  async dumpEvents(): Promise<RouterEvent[]> {
    if (this.tree !== null) {
      this.check();
      return this.tree.dumpEvents();
    }
    return decodeSnapshot(await this.dumpSnapshot('bincode'), 'bincode');
  }

  /**
   * The merged dump as snapshot bytes: every shard dumps at once, the parts merge as bytes.
   * With threads and a bincode encoding the bytes live in a SharedArrayBuffer (no copy).
   */
  async dumpSnapshot(encoding: SnapshotEncoding = 'bincode'): Promise<Uint8Array> {
    this.check();
    if (this.tree !== null) return this.tree.dumpSnapshot(encoding);
    this.flushAll();
    if (encoding === 'jsonl') {
      const parts = await Promise.all(this.threads.map((t) => t.request<Uint8Array>({ op: 'dump', encoding })));
      return mergeSnapshots(parts, encoding);
    }
    // One dump at a time: a shard keeps one prepared part between the two steps below.
    const previous = this.dumpChain;
    let release = (): void => {};
    this.dumpChain = new Promise<void>((r) => (release = r));
    await previous;
    try {
      return await this.dumpShared(encoding);
    } finally {
      release();
    }
  }

  private async dumpShared(encoding: 'bincode' | 'bincode-dp'): Promise<Uint8Array> {
    // Bincode: shards dump into their own warm buffers, then each copies its part into one
    // shared buffer at its offset, renumbering its event ids. Both steps run on all shards at
    // once; the main thread only adds the sizes (a merge on the main thread would fault in and
    // copy the whole snapshot serially: bench/shard.bench.ts).
    const sizes = await Promise.all(this.threads.map((t) => t.request<DumpPrepared>({ op: 'dumpPrepare', encoding })));
    const total = sizes.reduce((n, s) => n + s.bytes - 8, 8);
    const target = new SharedArrayBuffer(total);
    let at = 8;
    let firstId = 0;
    const copies: Promise<unknown>[] = [];
    for (let i = 0; i < this.threads.length; i++) {
      copies.push(this.threads[i]!.request({ op: 'dumpCopy', target, at, firstId }));
      at += sizes[i]!.bytes - 8;
      firstId += sizes[i]!.events;
    }
    await Promise.all(copies);
    const out = new Uint8Array(target);
    writeBincodeCount(out, firstId);
    return out;
  }

  /** Applies a snapshot's events (or any event stream), honouring backpressure, then flushes. */
  async restore(events: Iterable<RouterEvent> | AsyncIterable<RouterEvent>): Promise<void> {
    for await (const e of events as AsyncIterable<RouterEvent>) {
      this.applyEvent(e);
      if (this.draining) await this.drained();
    }
    await this.flush();
  }

  /** Resolves when every event enqueued so far is applied. */
  async flush(): Promise<void> {
    this.check();
    if (this.tree !== null) return;
    this.flushAll();
    await Promise.all(this.threads.map((t) => t.request({ op: 'flush' })));
  }

  /** Per-shard statistics, in shard order. */
  async stats(): Promise<ShardStats[]> {
    this.check();
    if (this.tree !== null) {
      const t = this.tree;
      return [{ workers: t.workers().length, pairs: t.size, nodes: t.nodeCount, events: { ...this.counts }, malformed: 0, bytes: t.bytes }];
    }
    this.flushAll();
    return Promise.all(this.threads.map((t) => t.request<ShardStats>({ op: 'stats' })));
  }

  /** Stops every shard thread; pending calls fail with KVX_CLOSED. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.board?.wakeAll();
    await Promise.all(this.threads.map((t) => t.close()));
    this.logger?.debug('indexer closed');
  }

  /** @internal Benchmark only: findMatches with port replies instead of the reply board. */
  findMatchesViaPorts(seq: BigUint64Array): Promise<OverlapScores> {
    this.check();
    this.flushAll();
    return this.findViaPorts(new Uint32Array(seq.buffer, seq.byteOffset, seq.length * 2), seq.length);
  }

  /**
   * @internal Benchmark only: findMatches with one piscina task per shard instead of the port.
   * Tasks do not queue behind event batches: call `flush()` first.
   */
  async findMatchesViaTasks(seq: BigUint64Array): Promise<OverlapScores> {
    this.check();
    const words = new Uint32Array(seq.buffer, seq.byteOffset, seq.length * 2);
    const replies = await Promise.all(
      this.threads.map((t) => t.requestViaTask<FindReply>({ op: 'find', words, n: seq.length, earlyExit: false })),
    );
    return mergeScores(replies);
  }

  /** Test-only: makes shard `index` exit abruptly, as a crashed thread would. */
  async testKillShard(index: number): Promise<void> {
    await this.threads[index]?.request({ op: 'exit' }).catch(() => undefined);
  }

  // ---- internals ----

  private check(): void {
    if (this.closed) throw new KvIndexError(ErrorCode.Closed, 'indexer is closed');
    if (this.failure !== null) throw this.failure;
  }

  private assign(workerId: bigint): number {
    let shard = this.shardOf.get(workerId);
    if (shard === undefined) {
      // Dynamo's rule: the shard with the fewest workers, lowest index on ties; sticky.
      shard = 0;
      for (let i = 1; i < this.workersPerShard.length; i++) {
        if (this.workersPerShard[i]! < this.workersPerShard[shard]!) shard = i;
      }
      this.shardOf.set(workerId, shard);
      this.workersPerShard[shard]!++;
    }
    return shard;
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      if (!this.closed && this.failure === null) this.flushAll();
    });
  }

  private flushAll(): void {
    for (let i = 0; i < this.writers.length; i++) {
      // At most one of the two holds events: switching kinds sends the other first.
      if (this.writers[i]!.events > 0) this.send(i);
      if (this.jsonWriters[i]!.events > 0) this.sendJson(i);
    }
  }

  private sendJson(shard: number): void {
    const jw = this.jsonWriters[shard]!;
    const events = jw.events;
    if (events === 0) return;
    const { bytes, ends, tags } = jw.take();
    this.queued -= events;
    this.inFlight += events;
    this.threads[shard]!.sendJson(bytes, ends, tags, jw.askBack());
  }

  private send(shard: number): void {
    const w = this.writers[shard]!;
    const events = w.events;
    if (events === 0) return;
    const words = w.take();
    this.queued -= events;
    this.inFlight += events;
    this.threads[shard]!.sendEvents(words, w.askBack());
  }

  private onAck(shard: number, ack: Ack): void {
    this.inFlight -= ack.events;
    if (ack.words !== undefined) this.writers[shard]?.recycle(ack.words);
    if (ack.json !== undefined) this.jsonWriters[shard]?.recycle(ack.json);
    for (const r of ack.rejected) {
      const err = KvIndexError.fromData(r);
      const tag = r.tag >= 0 ? r.tag : undefined;
      this.logger?.warn({ code: err.code, tag }, err.message);
      if (this.listenerCount('malformed') > 0) this.emit('malformed', err, tag);
    }
    if (this.draining && this.queued + this.inFlight <= this.highWater / 2) {
      this.draining = false;
      this.emit('drain');
    }
  }

  private onShardFailed(err: KvIndexError): void {
    if (this.failure === null) this.failure = err;
    this.board?.wakeAll();
    this.logger?.error({ code: err.code }, err.message);
    this.emit('shardFailed', err);
  }
}
