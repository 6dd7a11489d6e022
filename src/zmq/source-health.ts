/**
 * What a source's ranks really are, for `/workers`, `/ready` and the metrics: whether the
 * engine is connected, which (worker, rank)s are kept out of scores and why, since when, and
 * when they come back. It also owns the exclusion itself (the index's `exclude`) and the
 * readmission timer, so the state reported and the state applied cannot disagree.
 *
 * States, worst first (a listener reports its worst rank):
 * - `failed` / `closed`: the source's receive loop stopped (source.ts);
 * - `connecting`: no ZMQ peer. zeromq's SUB socket does not say whether it is connected, so the
 *   socket's monitor does: a peer counts from its ZMTP handshake (a port where something that
 *   is not a ZMQ publisher listens never handshakes) until its disconnect; a message received
 *   counts too (transports without monitor events). So an engine that is up but idle (vLLM
 *   publishes only when its cache changes) is not `connecting`. In the log: a WARN once a new
 *   source has had no peer for `connectWarnMs` (10 s: nothing listens at the endpoint, or no
 *   engine connected to a bound one), a WARN when the peer goes, an INFO when one comes;
 * - `excluded`: out of scores. `unreplayable_gap`: events were lost, the (worker, rank) was
 *   cleared and is kept out until its own AllBlocksCleared, an engine restart, or the
 *   readmission delay (below). `block_size_mismatch`: the rank's latest Stored event was dropped
 *   for its block size and the rank holds no block that could score (an engine has one block
 *   size: registered 16, the engine uses 32, every store is dropped), until a Stored event of
 *   the right size applies. A rank that still holds blocks of the right size stays `active`
 *   (its drops are still logged and counted);
 * - `active`.
 *
 * Readmission (`readmitAfterMs`): an unreplayable gap is healed by the engine only when it
 * clears its cache or restarts, which vLLM may never do. After the delay, counted from the
 * latest gap, the (worker, rank) is counted back in with what was applied since the gap (the
 * source keeps applying while excluded). That can only under-score: every block applied since
 * the gap was stored after it; what is missing are the blocks stored before it and every later
 * store that extends them (`parent_block_not_found`), for as long as the engine keeps those.
 */

import type { Logger } from 'pino';
import type { EngineIndex } from './engine-index.js';

/** The state of a source's rank or listener (see the top of the file). */
export const RankState = {
  Active: 'active',
  Excluded: 'excluded',
  Connecting: 'connecting',
  Failed: 'failed',
  Closed: 'closed',
} as const;

export type RankState = (typeof RankState)[keyof typeof RankState];

/** Why a rank is `excluded` or `connecting`. */
export const StateReason = {
  UnreplayableGap: 'unreplayable_gap',
  BlockSizeMismatch: 'block_size_mismatch',
  NeverConnected: 'never_connected',
  Disconnected: 'disconnected',
} as const;

export type StateReason = (typeof StateReason)[keyof typeof StateReason];

/** One rank's state. Times are epoch ms. */
export interface RankHealth {
  readonly rank: number;
  readonly state: RankState;
  /** Why (excluded, connecting), else null. */
  readonly reason: StateReason | null;
  /** Since when the rank is in this state (excluded: the first gap or mismatch of the run). */
  readonly since: number | null;
  /** Excluded after a gap with readmission on: when it is counted back in. */
  readonly readmitAt: number | null;
  /** For `block_size_mismatch`: the engine's block size (the registered one is the index's). */
  readonly engineBlockSize: number | null;
}

/** Worst first: a listener reports the first of these that any of its ranks is in. */
export const STATE_ORDER: readonly RankState[] = [RankState.Failed, RankState.Closed, RankState.Connecting, RankState.Excluded, RankState.Active];

/** Default readmission delay after an unreplayable gap: 30 s (docs/zmq.md says why). */
export const READMIT_AFTER_MS = 30_000;

/**
 * Default wait for a first peer before a WARN: 10 s. ZMQ retries a refused connection every
 * 100 ms, and an engine that starts with its publisher needs a few seconds at most.
 */
export const CONNECT_WARN_MS = 10_000;

export interface SourceHealthOptions {
  index: EngineIndex;
  workerId: bigint;
  /** The rank reported while the source has filed no batch. */
  registeredRank: number;
  /** ms after the latest unreplayable gap before readmission; null: only the engine heals it. */
  readmitAfterMs: number | null;
  logger: Logger | null;
  /** Bound into the readmission and connection lines. */
  engine: Record<string, unknown>;
  /** ms without a first peer before a WARN (default CONNECT_WARN_MS). */
  connectWarnMs?: number;
}

interface Exclusion {
  reason: StateReason;
  since: number;
  engineBlockSize: number | null;
}

/** The health of one source's ranks (see the top of the file). */
export class SourceHealth {
  readonly #o: SourceHealthOptions;
  /** Live ZMQ peers (handshakes minus disconnects, never below 0). */
  #peers = 0;
  /** A message came while no handshake was seen (transports without monitor events). */
  #heard = false;
  #connectionSince = Date.now();
  #everConnected = false;
  /** rank -> gap exclusion (kept out of scores in the index). */
  readonly #gaps = new Map<number, Exclusion>();
  /** rank -> block size mismatch (its stores dropped; nothing to keep out). */
  readonly #mismatches = new Map<number, Exclusion>();
  #readmitAt: number | null = null;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #connectTimer: ReturnType<typeof setTimeout> | null;
  #readmissions = 0;

  constructor(o: SourceHealthOptions) {
    this.#o = o;
    this.#connectTimer = setTimeout(() => {
      this.#connectTimer = null;
      if (this.connected) return;
      const since = new Date(this.#connectionSince).toISOString();
      o.logger?.warn({ ...o.engine, since }, 'no engine publisher yet: nothing listens at the endpoint, or it is not a ZMQ publisher (its ranks are connecting)');
    }, o.connectWarnMs ?? CONNECT_WARN_MS);
    this.#connectTimer.unref();
  }

  /** A ZMQ peer completed its handshake. */
  peerUp(): void {
    const was = this.connected;
    this.#peers++;
    if (!was) this.#up();
  }

  /** A ZMQ peer went away. */
  peerDown(): void {
    const was = this.connected;
    this.#peers = Math.max(0, this.#peers - 1);
    if (this.#peers === 0) this.#heard = false;
    if (was && !this.connected) {
      this.#connectionSince = Date.now();
      this.#o.logger?.warn(this.#o.engine, 'engine publisher disconnected: its ranks are connecting until it is back');
    }
  }

  /** A message arrived: someone is publishing, whatever the monitor said. */
  heard(): void {
    if (this.connected) return;
    this.#heard = true;
    this.#up();
  }

  #up(): void {
    this.#everConnected = true;
    this.#connectionSince = Date.now();
    this.#o.logger?.info(this.#o.engine, 'engine publisher connected');
  }

  /** Exclusions ended by the readmission delay (the source's stats). */
  get readmissions(): number {
    return this.#readmissions;
  }

  /** Whether a publisher is there (a live handshake, or a message since the last disconnect). */
  get connected(): boolean {
    return this.#peers > 0 || this.#heard;
  }

  /**
   * An unreplayable gap: each rank (already cleared by the caller) is kept out of scores, and
   * the readmission delay starts again from now.
   */
  excludeAfterGap(ranks: Iterable<number>): void {
    const now = Date.now();
    for (const rank of ranks) {
      this.#o.index.exclude(this.#o.workerId, rank, true);
      if (!this.#gaps.has(rank)) this.#gaps.set(rank, { reason: StateReason.UnreplayableGap, since: now, engineBlockSize: null });
    }
    const after = this.#o.readmitAfterMs;
    if (after === null) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#readmitAt = now + after;
    this.#timer = setTimeout(() => this.#readmit(), after);
    this.#timer.unref(); // the source's socket keeps a server alive, not this timer
  }

  /** The engine made the rank whole (its AllBlocksCleared, or a restart): back in scores. */
  whole(rank: number): void {
    this.#o.index.exclude(this.#o.workerId, rank, false);
    this.#gaps.delete(rank);
    if (this.#gaps.size === 0) this.#stopTimer();
  }

  /** A Stored event of `rank` was dropped: the engine's block size is `engineBlockSize`. */
  mismatch(rank: number, engineBlockSize: number): void {
    const m = this.#mismatches.get(rank);
    if (m === undefined) this.#mismatches.set(rank, { reason: StateReason.BlockSizeMismatch, since: Date.now(), engineBlockSize });
    else m.engineBlockSize = engineBlockSize;
  }

  /** A Stored event of `rank` had the right block size. */
  sizeOk(rank: number): void {
    if (this.#mismatches.size !== 0) this.#mismatches.delete(rank);
  }

  /** Each rank's state (`ranks`: those filed; the registered one when none), given the source's own state. */
  report(sourceState: RankState, ranks: readonly number[]): RankHealth[] {
    const list = new Set(ranks.length > 0 ? ranks : [this.#o.registeredRank]);
    for (const rank of this.#gaps.keys()) list.add(rank); // excluded before its first batch
    return [...list].map((rank) => this.#rank(rank, sourceState));
  }

  #rank(rank: number, sourceState: RankState): RankHealth {
    const plain = { rank, reason: null, since: null, readmitAt: null, engineBlockSize: null };
    if (sourceState !== RankState.Active) return { ...plain, state: sourceState };
    if (!this.connected) {
      return { ...plain, state: RankState.Connecting, reason: this.#everConnected ? StateReason.Disconnected : StateReason.NeverConnected, since: this.#connectionSince };
    }
    const gap = this.#gaps.get(rank);
    if (gap !== undefined) return { ...plain, state: RankState.Excluded, reason: gap.reason, since: gap.since, readmitAt: this.#readmitAt };
    const m = this.#mismatches.get(rank);
    if (m !== undefined && this.#o.index.blockCount(this.#o.workerId, rank) === 0) return { ...plain, state: RankState.Excluded, reason: m.reason, since: m.since, engineBlockSize: m.engineBlockSize };
    return { ...plain, state: RankState.Active };
  }

  /** Stops the timers (the source closed). */
  close(): void {
    this.#stopTimer();
    if (this.#connectTimer !== null) clearTimeout(this.#connectTimer);
    this.#connectTimer = null;
  }

  #stopTimer(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#readmitAt = null;
  }

  #readmit(): void {
    this.#timer = null;
    const ranks = [...this.#gaps.keys()];
    for (const rank of ranks) this.#o.index.exclude(this.#o.workerId, rank, false);
    this.#gaps.clear();
    this.#readmitAt = null;
    this.#readmissions++;
    this.#o.logger?.info(
      { ...this.#o.engine, ranks, readmitAfterMs: this.#o.readmitAfterMs },
      'readmitting the worker to scores after an unreplayable gap: blocks it stored before the gap (and stores extending them) stay unscored until the engine stores them again',
    );
  }
}

/** The worst of a listener's ranks (STATE_ORDER); `list` is never empty (`report` lists one at least). */
export function worstRank(list: readonly RankHealth[]): RankHealth {
  let worst = list[0]!;
  for (const h of list) if (STATE_ORDER.indexOf(h.state) < STATE_ORDER.indexOf(worst.state)) worst = h;
  return worst;
}
