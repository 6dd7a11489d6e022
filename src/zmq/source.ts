/**
 * A ZMQ source: one SUB socket on one engine publisher (one data-parallel rank), feeding an
 * `EngineIndex`. Messages are `[topic, seq (u64 big-endian), payload]`; each batch goes through
 * its (worker, rank)'s `SeqCursor`:
 * - next seq: apply;
 * - gap: ask the replay socket for the missing batches and apply them in order before this
 *   one. The receive loop awaits the replay, so live messages wait in the SUB socket's queue
 *   (high-water mark 100,000 messages, as vLLM's PUB) and are applied after it: order holds by
 *   construction, and a late replayed Stored can never resurrect a block a live Removed
 *   removed. A gap that cannot be replayed (no replay socket, no answer, the ring no longer
 *   holds it) clears the (worker, rank) and keeps it out of scores until it is whole again
 *   (an AllBlocksCleared or an engine restart);
 * - seq backwards: the engine restarted; clear the (worker, rank) and apply.
 * Malformed input is counted (`stats()`) and logged with the endpoint and seq, never thrown.
 */

import type { Logger } from 'pino';
import type { ApplyStatus } from '../protocol/types.js';
import { ingestTurn } from './ingest-turns.js';
import { EventConverter, StorageTier } from './convert.js';
import type { EngineIndex } from './engine-index.js';
import { checkEndpoint } from './endpoint.js';
import { ZmqError, ZmqErrorCode } from './errors.js';
import { loadMsgpack, loadZeromq, type ZeromqModule } from './load.js';
import { requestReplay } from './replay.js';
import { SeqCursor, SeqVerdict } from './seq-cursor.js';
import { emptyStats, type ZmqSourceStats } from './source-stats.js';
import { decodeBatch, type EngineBatch, type MsgpackDecoder } from './wire.js';

/**
 * Distinct DP ranks one endpoint may send. An engine publishes its own rank (vLLM: one
 * publisher per DP rank) and DP degrees run 1 to 16, so this is far beyond a real engine; each
 * new rank makes a tree (~78 KB even empty), and a publisher sending a new rank in every 30-byte
 * batch grew the process by 233 MB over 3,000 batches, every lookup walking every rank's tree
 * (found by fuzzing). A batch naming one more rank is counted as a bad payload.
 */
export const MAX_RANKS_PER_SOURCE = 64;

export interface ZmqKvSourceOptions {
  /** The index the events go to (its block size is the one events are checked against). */
  index: EngineIndex;
  /** The engine's worker id (u64). */
  workerId: bigint;
  /** The publisher of this rank: `tcp://host:port` (already offset for the rank), ipc or inproc. */
  endpoint: string;
  /** The rank of this publisher (u32, default 0); a batch's `data_parallel_rank` overrides it. */
  dpRank?: number;
  /** `connect` (default) to an engine that binds, `bind` for an engine that connects. */
  mode?: 'connect' | 'bind';
  /** Topic prefix filter (default '': every topic). */
  topic?: string;
  /** The engine's replay ROUTER for this rank, or null (default): gaps are then unreplayable. */
  replayEndpoint?: string | null;
  /** Wait per replay message before the gap counts as unreplayable (default 2,000 ms). */
  replayTimeoutMs?: number;
  logger?: Logger;
  /** Called after each live batch is applied, with its rank, seq and publish time (s). */
  onBatch?: (rank: number, seq: bigint, ts: number) => void;
}

/** Lifecycle states, as in Dynamo's `/workers` listener status. */
export const SourceState = {
  Active: 'active',
  Failed: 'failed',
  Closed: 'closed',
} as const;

export type SourceState = (typeof SourceState)[keyof typeof SourceState];

const NOOP = (): void => {};
type Sub = InstanceType<ZeromqModule['Subscriber']>;

export class ZmqKvSource {
  readonly workerId: bigint;
  readonly dpRank: number;
  readonly endpoint: string;
  readonly replayEndpoint: string | null;
  readonly #index: EngineIndex;
  readonly #zmq: ZeromqModule;
  readonly #decoder: MsgpackDecoder;
  readonly #sub: Sub;
  readonly #converter: EventConverter;
  readonly #cursors = new Map<number, SeqCursor>();
  readonly #stats = emptyStats();
  readonly #replayTimeoutMs: number;
  readonly #logger: Logger | null;
  readonly #onBatch: (rank: number, seq: bigint, ts: number) => void;
  #state: SourceState = SourceState.Active;
  #lastError: string | null = null;
  #loop: Promise<void> = Promise.resolve();

  private constructor(o: ZmqKvSourceOptions, zmq: ZeromqModule, decoder: MsgpackDecoder, sub: Sub) {
    this.workerId = o.workerId;
    this.dpRank = o.dpRank ?? 0;
    this.endpoint = o.endpoint;
    this.replayEndpoint = o.replayEndpoint ?? null;
    this.#index = o.index;
    this.#zmq = zmq;
    this.#decoder = decoder;
    this.#sub = sub;
    this.#converter = new EventConverter(o.index.blockSize);
    this.#replayTimeoutMs = o.replayTimeoutMs ?? 2_000;
    this.#logger = o.logger ?? null;
    this.#onBatch = o.onBatch ?? NOOP;
  }

  /**
   * Opens the SUB socket and starts consuming. Throws `ZmqError` (`DependencyMissing`,
   * `BadEndpoint`, or `BadEndpoint` wrapping a failed bind).
   */
  static async start(o: ZmqKvSourceOptions): Promise<ZmqKvSource> {
    checkEndpoint(o.endpoint);
    if (o.replayEndpoint != null) checkEndpoint(o.replayEndpoint, 'replayEndpoint');
    const [zmq, msgpack] = await Promise.all([loadZeromq(), loadMsgpack()]);
    const decoder = new msgpack.Decoder({ useBigInt64: true });
    const sub = new zmq.Subscriber({ receiveHighWaterMark: 100_000, linger: 0 });
    try {
      if (o.mode === 'bind') await sub.bind(o.endpoint);
      else sub.connect(o.endpoint);
    } catch (err) {
      sub.close();
      throw new ZmqError(ZmqErrorCode.BadEndpoint, `cannot ${o.mode ?? 'connect'} ${o.endpoint}: ${(err as Error).message}`, { cause: err });
    }
    sub.subscribe(o.topic ?? '');
    const source = new ZmqKvSource(o, zmq, decoder, sub);
    source.#loop = source.#run();
    return source;
  }

  get state(): SourceState {
    return this.#state;
  }

  /** The last failure (receive loop or replay), or null. */
  get lastError(): string | null {
    return this.#lastError;
  }

  /** The endpoint the socket is bound to (a `:0` port resolved), or connected to. */
  get boundEndpoint(): string {
    return this.#sub.lastEndpoint ?? this.endpoint;
  }

  /** The DP ranks this source has filed batches under (a batch's own rank, else its registered one). */
  ranks(): number[] {
    return [...this.#cursors.keys()];
  }

  /** A copy of the counters. */
  stats(): ZmqSourceStats {
    return { ...this.#stats, statuses: { ...this.#stats.statuses } };
  }

  /** Stops receiving; the index keeps what was applied. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#state !== SourceState.Closed) {
      this.#state = SourceState.Closed;
      this.#sub.close();
    }
    await this.#loop;
  }

  async #run(): Promise<void> {
    for (;;) {
      // The event loop gets a turn after every ~0.5 ms of ingestion on this thread
      // (ingest-turns.ts): a backlog must not starve HTTP lookups.
      const wait = ingestTurn();
      if (wait !== null) await wait;
      let frames: Buffer[];
      try {
        frames = await this.#sub.receive();
      } catch (err) {
        if (this.#state === SourceState.Closed) return;
        this.#state = SourceState.Failed;
        this.#lastError = (err as Error).message;
        this.#logger?.error({ endpoint: this.endpoint, err: this.#lastError }, 'zmq source stopped');
        return;
      }
      try {
        await this.#onMessage(frames);
      } catch (err) {
        // Nothing above is expected to throw (malformed input is counted where it is found);
        // should something still do, one message is lost, not the source.
        this.#stats.badPayloads++;
        this.#lastError = (err as Error).message;
        this.#logger?.error({ endpoint: this.endpoint, err: this.#lastError }, 'zmq message failed');
      }
    }
  }

  async #onMessage(frames: Buffer[]): Promise<void> {
    this.#stats.messages++;
    if (frames.length !== 3 || frames[1]!.length !== 8) {
      this.#stats.badFrames++;
      this.#warn(new ZmqError(ZmqErrorCode.BadFrame, `expected [topic, seq (8 bytes), payload], got ${frames.length} frames${frames.length === 3 ? ` with a seq of ${frames[1]!.length} bytes` : ''}`), null);
      return;
    }
    const seq = frames[1]!.readBigUInt64BE(0);
    let batch: EngineBatch;
    try {
      batch = decodeBatch(this.#decoder, frames[2]!);
    } catch (err) {
      this.#stats.badPayloads++;
      this.#warn(err as ZmqError, seq);
      // The seq is known, so the batch is not a gap: move on (its events are lost and counted).
      this.#advanceUnknownRank(seq);
      return;
    }
    const rank = batch.dpRank ?? this.dpRank;
    if (!this.#cursors.has(rank) && this.#cursors.size >= MAX_RANKS_PER_SOURCE) {
      this.#stats.badPayloads++;
      this.#warn(new ZmqError(ZmqErrorCode.BadPayload, `data_parallel_rank ${rank}: this endpoint already sent ${MAX_RANKS_PER_SOURCE} other ranks`), seq);
      return; // a rank refused: no cursor of the ranks kept is its own
    }
    const cursor = this.#cursor(rank);
    switch (cursor.verdict(seq)) {
      case SeqVerdict.Gap:
        this.#stats.gaps++;
        await this.#heal(rank, cursor.last + 1n, seq);
        // Closed while replaying (an unregister): the index is no longer this source's to write
        // (a new registration of the same (worker, rank) may be feeding it: found by fuzzing).
        if (this.#state === SourceState.Closed) return;
        break;
      case SeqVerdict.Restart:
        this.#stats.restarts++;
        this.#logger?.warn({ endpoint: this.endpoint, rank, seq, last: cursor.last }, 'engine restarted (seq went backwards): clearing its blocks');
        this.#index.clear(this.workerId, rank);
        this.#index.exclude(this.workerId, rank, false);
        break;
      case SeqVerdict.Next:
        break;
    }
    this.#apply(rank, seq, batch);
    this.#onBatch(rank, seq, batch.ts);
  }

  /** Replays [from, to) of `rank`; on any failure clears and excludes the (worker, rank). */
  async #heal(rank: number, from: bigint, to: bigint): Promise<void> {
    let why: string;
    if (this.replayEndpoint === null) why = 'no replay endpoint';
    else {
      try {
        const replayed = (await requestReplay(this.#zmq, this.replayEndpoint, from, this.#replayTimeoutMs)).filter((b) => b.seq < to);
        if (this.#state === SourceState.Closed) return; // see #onMessage
        const whole = replayed.length === Number(to - from) && replayed.every((b, i) => b.seq === from + BigInt(i));
        if (whole) {
          for (const b of replayed) {
            let batch: EngineBatch;
            try {
              batch = decodeBatch(this.#decoder, b.payload);
            } catch (err) {
              this.#stats.badPayloads++;
              this.#warn(err as ZmqError, b.seq);
              this.#cursor(rank).advance(b.seq);
              continue;
            }
            this.#apply(rank, b.seq, batch);
            this.#stats.replayedBatches++;
          }
          this.#stats.gapsReplayed++;
          return;
        }
        why = `the replay ring holds ${replayed.length} of the ${to - from} missing batches`;
      } catch (err) {
        why = (err as Error).message;
        this.#lastError = why;
      }
    }
    if (this.#state === SourceState.Closed) return; // see #onMessage
    this.#stats.gapsUnreplayable++;
    this.#logger?.warn({ endpoint: this.endpoint, rank, from, to, why }, 'unreplayable seq gap: clearing the worker rank and keeping it out of scores');
    this.#index.clear(this.workerId, rank);
    this.#index.exclude(this.workerId, rank, true);
  }

  #apply(rank: number, seq: bigint, batch: EngineBatch): void {
    const st = this.#stats;
    st.batches++;
    for (const ev of batch.events) {
      if (ev instanceof ZmqError) {
        st.badEvents++;
        this.#warn(ev, seq);
        continue;
      }
      const c = this.#converter.convert(ev);
      if (typeof c === 'string') {
        if (c === 'block_size_mismatch') st.blockSizeMismatch++;
        else if (c === 'duplicate_hash') st.duplicateHash++;
        else st.nonFullAttention++;
        continue;
      }
      const status: ApplyStatus = this.#index.apply(this.workerId, rank, c.tier, c.data, seq);
      st.events++;
      st.statuses[status]++;
      if (c.tier !== StorageTier.Device) st.lowerTier++;
      if (c.data.type === 'stored' && status === 'ok') st.storedBlocks += c.data.blocks.length;
      // After AllBlocksCleared the engine's state is empty and every later event is seen:
      // the (worker, rank) is whole again.
      if (c.data.type === 'cleared') this.#index.exclude(this.workerId, rank, false);
    }
    this.#cursor(rank).advance(seq);
  }

  /**
   * Advances the cursor of a batch whose rank is unknown (it did not decode): the only rank
   * this source has seen, else its registered rank. (Always the registered rank before: an
   * engine registered as rank 0 whose batches say rank 3 then took its next good batch for a
   * gap, and lost its blocks; found by fuzzing.)
   */
  #advanceUnknownRank(seq: bigint): void {
    const only = this.#cursors.size === 1 ? this.#cursors.keys().next().value : undefined;
    this.#cursor(only ?? this.dpRank).advance(seq);
  }

  #cursor(rank: number): SeqCursor {
    let c = this.#cursors.get(rank);
    if (c === undefined) this.#cursors.set(rank, (c = new SeqCursor()));
    return c;
  }

  #warn(err: ZmqError, seq: bigint | null): void {
    this.#logger?.warn({ endpoint: this.endpoint, seq, code: err.code }, err.message);
  }
}
