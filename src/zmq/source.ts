/**
 * A ZMQ source: one SUB socket on one engine publisher (one data-parallel rank), feeding an
 * `EngineIndex`. Messages are `[topic, seq (u64 big-endian), payload]`; each message goes through
 * the source's one `SeqCursor`, whatever rank its batch names:
 * - next seq: apply;
 * - gap: ask the replay socket for the missing batches and apply them in order before this
 *   one. The receive loop awaits the replay, so live messages wait in the SUB socket's queue
 *   (high-water mark 100,000 messages, as vLLM's PUB) and are applied after it: order holds by
 *   construction, and a late replayed Stored can never resurrect a block a live Removed
 *   removed. A gap that cannot be replayed (no replay socket, no answer, the ring no longer
 *   holds it) clears every (worker, rank) the source has filed and keeps each out of scores
 *   until it is whole again (its own AllBlocksCleared or an engine restart) or the readmission
 *   delay has passed (source-health.ts);
 * - seq backwards: the engine restarted; clear every (worker, rank) the source has filed, and apply.
 *
 * One cursor per source, not per rank: an engine numbers the messages of a publisher socket,
 * not of a rank. vLLM gives each data-parallel rank a socket of its own (port offsets), where
 * the two are the same; a socket that carried several ranks, interleaved, showed a gap on
 * every alternation with a cursor per rank (each rank saw every other seq), and a message that
 * did not decode (its rank unknown) had its seq guessed onto one rank. Which ranks a lost
 * message held cannot be known, so a gap or a restart concerns every rank of the socket.
 * Malformed input is counted (`stats()`) and logged with the endpoint and seq, never thrown.
 * Events dropped on purpose (block size, repeated hash, group kind) are counted and reported in
 * rate-limited lines (drop-log.ts). What each rank really is (connecting, excluded and why,
 * active) is `health()` (source-health.ts), which also owns exclusion and readmission.
 */

import type { Logger } from 'pino';
import type { ApplyStatus } from '../protocol/types.js';
import { ingestTurn } from './ingest-turns.js';
import { EventConverter, SkipReason, StorageTier } from './convert.js';
import { DropLog, DROP_LOG_INTERVAL_MS } from './drop-log.js';
import type { EngineIndex } from './engine-index.js';
import { checkEndpoint } from './endpoint.js';
import { ZmqError, ZmqErrorCode } from './errors.js';
import { loadMsgpack, loadZeromq, type ZeromqModule } from './load.js';
import { requestReplay } from './replay.js';
import { SeqCursor, SeqVerdict } from './seq-cursor.js';
import { RankState, READMIT_AFTER_MS, SourceHealth, type RankHealth } from './source-health.js';
import { emptyStats, type ZmqSourceStats } from './source-stats.js';
import { decodeBatch, type EngineBatch, type EngineEvent, type MsgpackDecoder } from './wire.js';

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
  /**
   * After an unreplayable gap, ms until the (worker, rank) counts in scores again from what it
   * published since (default 30,000; null: only the engine's AllBlocksCleared or a restart
   * brings it back). See source-health.ts for what readmission costs.
   */
  readmitAfterMs?: number | null;
  /** Minimum ms between two log lines of dropped events of one (rank, reason) (default 60,000). */
  dropLogIntervalMs?: number;
  /** ms without an engine connected before a WARN says so (default 10,000). */
  connectWarnMs?: number;
  logger?: Logger;
  /**
   * Where an index recovered from a peer's dump left this publisher: its last seq applied there
   * and the ranks it had filed. The cursor starts at `seq`, so the first live message after a
   * gap triggers a replay of exactly what came after it (and a seq at or below it, an engine
   * restart, clears the ranks). Default null: a fresh cursor.
   */
  resumeAfter?: SourcePosition | null;
  /** Called after each live batch is applied, with its rank, seq and publish time (s). */
  onBatch?: (rank: number, seq: bigint, ts: number) => void;
}

/** The last seq of a publisher an index reflects, and the ranks its batches were filed under. */
export interface SourcePosition {
  readonly seq: bigint;
  readonly ranks: readonly number[];
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
  /** The socket's seq cursor (see the top of the file). */
  readonly #seq = new SeqCursor();
  /** The DP ranks whose batches were applied, in first-seen order. */
  readonly #ranks = new Set<number>();
  readonly #stats = emptyStats();
  readonly #replayTimeoutMs: number;
  readonly #logger: Logger | null;
  readonly #onBatch: (rank: number, seq: bigint, ts: number) => void;
  readonly #drops: DropLog;
  readonly #health: SourceHealth;
  #state: SourceState = SourceState.Active;
  #lastError: string | null = null;
  #loop: Promise<void> = Promise.resolve();
  /** Aborted by close(): a replay in flight ends at once instead of after its timeout. */
  readonly #closing = new AbortController();

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
    if (o.resumeAfter != null) {
      this.#seq.advance(o.resumeAfter.seq);
      for (const r of o.resumeAfter.ranks) this.#ranks.add(r);
    }
    const engine = { instanceId: o.workerId, endpoint: o.endpoint };
    this.#drops = new DropLog({ logger: this.#logger, engine, intervalMs: o.dropLogIntervalMs ?? DROP_LOG_INTERVAL_MS });
    this.#health = new SourceHealth({
      index: o.index,
      workerId: o.workerId,
      registeredRank: this.dpRank,
      readmitAfterMs: o.readmitAfterMs === undefined ? READMIT_AFTER_MS : o.readmitAfterMs,
      logger: this.#logger,
      engine,
      ...(o.connectWarnMs === undefined ? {} : { connectWarnMs: o.connectWarnMs }),
    });
    // The socket's monitor tells whether a publisher is there (source-health.ts); its events
    // end when the socket closes.
    sub.events.on('handshake', () => this.#health.peerUp());
    sub.events.on('disconnect', () => {
      if (this.#state !== SourceState.Closed) this.#health.peerDown(); // our own close is no engine leaving
    });
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
    return [...this.#ranks];
  }

  /**
   * The last seq applied and the ranks filed, or null when no batch was applied yet or a rank is
   * excluded (its blocks are known incomplete, so no seq describes what the index holds of it).
   * Read it in the same synchronous turn as the index (a dump): batches are applied whole
   * between turns, so the two agree.
   */
  position(): SourcePosition | null {
    if (this.#seq.last < 0n) return null;
    if (this.#health.report(this.#state, this.ranks()).some((h) => h.state === RankState.Excluded)) return null;
    return { seq: this.#seq.last, ranks: this.ranks() };
  }

  /** A copy of the counters. */
  stats(): ZmqSourceStats {
    return { ...this.#stats, readmissions: this.#health.readmissions, statuses: { ...this.#stats.statuses } };
  }

  /** Each rank's real state: connecting, excluded (why, since when), active (source-health.ts). */
  health(): RankHealth[] {
    return this.#health.report(this.#state, this.ranks());
  }

  /** Stops receiving; the index keeps what was applied. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#state !== SourceState.Closed) {
      this.#state = SourceState.Closed;
      this.#sub.close();
      this.#closing.abort();
      this.#health.close();
      this.#drops.close();
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
    this.#health.heard();
    if (frames.length !== 3 || frames[1]!.length !== 8) {
      this.#stats.badFrames++;
      this.#warn(new ZmqError(ZmqErrorCode.BadFrame, `expected [topic, seq (8 bytes), payload], got ${frames.length} frames${frames.length === 3 ? ` with a seq of ${frames[1]!.length} bytes` : ''}`), null);
      return;
    }
    const seq = frames[1]!.readBigUInt64BE(0);
    // The seq first, whatever the payload: a message that does not decode still tells a gap
    // before it, or a restart.
    const cursor = this.#seq;
    switch (cursor.verdict(seq)) {
      case SeqVerdict.Gap:
        this.#stats.gaps++;
        await this.#heal(cursor.last + 1n, seq);
        // Closed while replaying (an unregister): the index is no longer this source's to write
        // (a new registration of the same (worker, rank) may be feeding it: found by fuzzing).
        if (this.#state === SourceState.Closed) return;
        break;
      case SeqVerdict.Restart:
        this.#stats.restarts++;
        this.#logger?.warn({ endpoint: this.endpoint, ranks: this.ranks(), seq, last: cursor.last }, 'engine restarted (seq went backwards): clearing its blocks');
        this.#clear(this.#ranks, false);
        break;
      case SeqVerdict.Next:
        break;
    }
    const batch = this.#take(seq, frames[2]!);
    if (batch !== null) this.#onBatch(batch.dpRank ?? this.dpRank, seq, batch.ts);
  }

  /**
   * Decodes and applies one message's batch (live or replayed), counting what it refuses, and
   * moves the cursor past `seq` in every case: the seq was received, so it is no gap. Returns
   * the batch if it was applied.
   */
  #take(seq: bigint, payload: Uint8Array): EngineBatch | null {
    const batch = this.#accepted(seq, payload);
    if (batch !== null) this.#apply(batch.dpRank ?? this.dpRank, seq, batch);
    this.#seq.advance(seq); // a refused batch's events are lost and counted
    return batch;
  }

  /** The message's batch, or null (counted and logged) if it does not decode or names a rank too many. */
  #accepted(seq: bigint, payload: Uint8Array): EngineBatch | null {
    let batch: EngineBatch;
    try {
      batch = decodeBatch(this.#decoder, payload);
    } catch (err) {
      this.#stats.badPayloads++;
      this.#warn(err as ZmqError, seq);
      return null;
    }
    const rank = batch.dpRank ?? this.dpRank;
    if (!this.#ranks.has(rank) && this.#ranks.size >= MAX_RANKS_PER_SOURCE) {
      this.#stats.badPayloads++;
      this.#warn(new ZmqError(ZmqErrorCode.BadPayload, `data_parallel_rank ${rank}: this endpoint already sent ${MAX_RANKS_PER_SOURCE} other ranks`), seq);
      return null;
    }
    return batch;
  }

  /** Replays [from, to); on any failure clears and excludes every (worker, rank) filed. */
  async #heal(from: bigint, to: bigint): Promise<void> {
    let why: string;
    if (this.replayEndpoint === null) why = 'no replay endpoint';
    else {
      try {
        const replayed = (await requestReplay(this.#zmq, this.replayEndpoint, from, this.#replayTimeoutMs, this.#closing.signal)).filter((b) => b.seq < to);
        if (this.#state === SourceState.Closed) return; // see #onMessage
        const whole = replayed.length === Number(to - from) && replayed.every((b, i) => b.seq === from + BigInt(i));
        if (whole) {
          for (const b of replayed) {
            if (this.#take(b.seq, b.payload) !== null) this.#stats.replayedBatches++;
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
    this.#logger?.warn({ endpoint: this.endpoint, ranks: this.ranks(), from, to, why }, 'unreplayable seq gap: clearing the worker\'s ranks and keeping them out of scores');
    // A gap before any batch was applied: the registered rank is the one it concerns.
    const ranks = this.#ranks.size > 0 ? this.#ranks : [this.dpRank];
    this.#clear(ranks, true);
  }

  /** Clears each (worker, rank) of `ranks`; `excluded`: kept out of scores until whole again. */
  #clear(ranks: Iterable<number>, excluded: boolean): void {
    for (const rank of ranks) {
      this.#index.clear(this.workerId, rank);
      if (!excluded) this.#health.whole(rank);
    }
    if (excluded) this.#health.excludeAfterGap(ranks);
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
        this.#skipped(rank, c, ev);
        continue;
      }
      if (c.data.type === 'stored') this.#health.sizeOk(rank);
      const status: ApplyStatus = this.#index.apply(this.workerId, rank, c.tier, c.data, seq);
      st.events++;
      st.statuses[status]++;
      if (c.tier !== StorageTier.Device) st.lowerTier++;
      if (c.data.type === 'stored' && status === 'ok') st.storedBlocks += c.data.blocks.length;
      // After AllBlocksCleared the engine's state is empty and every later event is seen:
      // the (worker, rank) is whole again.
      if (c.data.type === 'cleared') this.#health.whole(rank);
    }
    this.#ranks.add(rank);
  }

  /** Counts an event dropped on purpose and reports it (rate-limited, drop-log.ts). */
  #skipped(rank: number, why: SkipReason, ev: EngineEvent): void {
    const st = this.#stats;
    if (why === SkipReason.BlockSizeMismatch) {
      st.blockSizeMismatch++;
      const engineBlockSize = ev.kind === 'stored' ? ev.blockSize : null;
      if (engineBlockSize !== null) this.#health.mismatch(rank, engineBlockSize);
      this.#drops.note(rank, why, { blockSize: engineBlockSize, registeredBlockSize: this.#converter.blockSize });
    } else if (why === SkipReason.DuplicateHash) {
      st.duplicateHash++;
      this.#drops.note(rank, why, {});
    } else {
      st.nonFullAttention++;
      this.#drops.note(rank, why, { groupIdx: ev.kind === 'removed' || ev.kind === 'stored' ? ev.groupIdx : null, kind: ev.kind === 'stored' ? ev.specKind : null });
    }
  }

  #warn(err: ZmqError, seq: bigint | null): void {
    this.#logger?.warn({ endpoint: this.endpoint, seq, code: err.code }, err.message);
  }
}
