/**
 * Main-thread handle of one shard thread, posted to only by the shard's outbox (outbox.ts). Piscina starts, owns and stops the thread (a pool of
 * exactly one thread per shard, so a shard is pinned to its thread); after the start task the
 * shard is driven over a dedicated MessagePort: event batches one way, requests and replies
 * matched by id. A thread that dies or reports a fatal error fails every pending and later call
 * with a `KvIndexError` naming the shard.
 *
 * Lifetime: neither the thread nor its port keeps the process alive by itself (piscina unrefs
 * an idle thread; the port is unref'd here), so a script that forgets `close()` still ends.
 * The port is ref'd only while the shard owes an answer someone may wait for: a request's
 * reply, a batch's ack, or a lookup on the reply board (`hold`). A pending `await` on the
 * indexer therefore keeps the process up until it settles, and events sent just before the
 * end are applied (acked) before it exits.
 */
import { MessageChannel } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { ErrorCode, KvIndexError } from '../../errors.js';
import type { SharedTreeLayout } from '../../tree/shared-layout.js';
import type { FromShard, ShardInit, ShardRequest, ShardStarted, ToShard } from '../wire/messages.js';

/** A shard's acknowledgement of one batch. */
export type Ack = Extract<FromShard, { t: 'ack' }>;

/**
 * The code a shard thread runs: the product's `workers/shard.js`, or a test fixture wrapping
 * it (fault injection), which reads `data` as piscina's `workerData`.
 */
export interface ShardThreadSpec {
  file: string;
  data: unknown;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: KvIndexError) => void;
}

export class ThreadShard {
  private readonly pool: Piscina;
  private readonly channel = new MessageChannel();
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: KvIndexError | null = null;
  private closed = false;
  /** Answers owed (replies, acks, board lookups): the port is ref'd while there are any. */
  private holds = 0;
  threadId = -1;
  /** The niceness the thread reported it runs at (null: not settable here). */
  nice: number | null = null;
  /** The shard tree's shared memory (set once the thread has started). */
  layout: SharedTreeLayout | null = null;

  private constructor(
    readonly index: number,
    thread: ShardThreadSpec,
    private readonly onAck: (ack: Ack) => void,
    private readonly onFail: (err: KvIndexError) => void,
  ) {
    // One thread, never recycled: the tree lives in it. atomics 'disabled' keeps the thread's
    // event loop free between tasks so the port's messages are served.
    this.pool = new Piscina({ filename: thread.file, workerData: thread.data, minThreads: 1, maxThreads: 1, idleTimeout: Infinity, atomics: 'disabled' });
    this.pool.on('error', (err: unknown) => this.fail(`thread error: ${String(err)}`));
    this.channel.port1.on('message', (msg: FromShard) => this.receive(msg));
    this.channel.port1.on('close', () => this.fail('thread exited'));
    this.channel.port1.unref(); // a listener refs the port: see the file comment
  }

  /**
   * Keeps the process alive until the matching `release` (an answer is owed): the port is
   * ref'd on the first hold and unref'd when the last is released. Cheap: only those two
   * transitions touch the port.
   */
  hold(): void {
    if (this.holds++ === 0 && !this.closed) this.channel.port1.ref();
  }

  /** Ends one `hold`. */
  release(): void {
    if (this.holds === 0) return;
    if (--this.holds === 0 && !this.closed) this.channel.port1.unref();
  }

  /** Drops every hold: nothing more will be answered (failed or closed). */
  private releaseAll(): void {
    if (this.holds === 0) return;
    this.holds = 0;
    if (!this.closed) this.channel.port1.unref();
  }

  static async start(
    index: number, thread: ShardThreadSpec, init: ShardInit,
    onAck: (ack: Ack) => void, onFail: (err: KvIndexError) => void,
  ): Promise<ThreadShard> {
    const shard = new ThreadShard(index, thread, onAck, onFail);
    const port = shard.channel.port2;
    const started = (await shard.pool.run({ port, init }, { transferList: [port] })) as ShardStarted;
    shard.threadId = started.threadId;
    shard.layout = started.layout;
    shard.nice = started.nice;
    return shard;
  }

  /** Threads of this shard's pool that are still running (1, or 0 once closed or dead). */
  get liveThreads(): number {
    return this.pool.threads.length;
  }

  get failed(): KvIndexError | null {
    return this.failure;
  }

  /** Sends a batch of `events` encoded events; its buffer is transferred (and handed back if `back`). */
  sendEvents(words: Uint32Array, events: number, back: boolean): void {
    if (this.failure !== null) throw this.failure;
    const msg: ToShard = { t: 'events', words, events, back };
    this.channel.port1.postMessage(msg, [words.buffer as ArrayBuffer]);
    this.hold(); // until its ack
  }

  /** Sends a batch of `events` events placed in the shard's batch ring (`n` words at `at`). */
  sendRing(at: number, n: number, end: number, events: number): void {
    if (this.failure !== null) throw this.failure;
    const msg: ToShard = { t: 'ring', at, n, end, events };
    this.channel.port1.postMessage(msg);
    this.hold(); // until its ack
  }

  /** Sends a lookup written into a slot of the reply board (answered there, not here). */
  lookupInSlot(slot: number): void {
    if (this.failure !== null) throw this.failure;
    const msg: ToShard = slot;
    this.channel.port1.postMessage(msg);
  }

  request<T>(req: ShardRequest, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.failure !== null) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      const msg: ToShard = { t: 'req', id, ...req };
      this.channel.port1.postMessage(msg, transfer);
      this.hold(); // until its reply
    });
  }

  private receive(msg: FromShard): void {
    switch (msg.t) {
      case 'ack':
        this.release();
        this.onAck(msg);
        return;
      case 'res': {
        const p = this.pending.get(msg.id);
        if (p === undefined) return;
        this.pending.delete(msg.id);
        this.release();
        p.resolve(msg.value);
        return;
      }
      case 'err': {
        const p = this.pending.get(msg.id);
        if (p === undefined) return;
        this.pending.delete(msg.id);
        this.release();
        p.reject(KvIndexError.fromData(msg));
        return;
      }
      case 'fatal':
        this.fail(msg.message, msg.code);
        return;
    }
  }

  private fail(why: string, code: string = ErrorCode.ShardFailed): void {
    if (this.failure !== null || this.closed) return;
    const message = why.startsWith(`shard ${this.index}`) ? why : `shard ${this.index}: ${why}`;
    this.failure = new KvIndexError(ErrorCode.ShardFailed, code === ErrorCode.ShardFailed ? message : `${message} (${code})`);
    for (const p of this.pending.values()) p.reject(this.failure);
    this.pending.clear();
    this.releaseAll();
    this.onFail(this.failure);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const err = new KvIndexError(ErrorCode.Closed, `shard ${this.index}: indexer closed`);
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.releaseAll();
    this.channel.port1.close();
    await this.pool.destroy();
  }
}
