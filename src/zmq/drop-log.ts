/**
 * Rate-limited log lines for engine events a source drops on purpose (a block size that is not
 * the registered one, a repeated hash, a KV cache group that is not full attention). The
 * counters (`ZmqSourceStats`) say how many; these lines say which engine, which rank and why,
 * so a misconfigured engine shows in the log and not only in a metric nobody graphs.
 *
 * One budget per (rank, reason) of a source (the source is the engine's publisher, named in
 * the line): the first drop is logged at once; later drops within `intervalMs` of the last line
 * are counted, and one line carrying that count is written when the interval ends (a timer, so
 * the tail of a burst is reported even if the engine then goes quiet). A misconfigured engine
 * storing 1,000 blocks a second thus writes one line a minute with the default interval, not
 * 1,000. `dropped` in each line is the number of events dropped since the previous line of the
 * same (rank, reason), the one that triggered it included.
 *
 * A drop costs a Map lookup keyed by a small integer and, at most once per interval, a log call.
 */

import type { Logger } from 'pino';
import { SkipReason } from './convert.js';

/** Default time between two lines of one (rank, reason): 60 s. */
export const DROP_LOG_INTERVAL_MS = 60_000;

const REASONS: readonly SkipReason[] = [SkipReason.BlockSizeMismatch, SkipReason.DuplicateHash, SkipReason.NonFullAttention];

const MESSAGES: Record<SkipReason, string> = {
  block_size_mismatch: "engine events dropped: the engine's block size is not the one registered for its index",
  duplicate_hash: 'engine events dropped: a Stored event repeats a block hash (or its parent\'s)',
  non_full_attention: 'engine events skipped: KV cache group that is not full attention (expected on hybrid models)',
};

interface Budget {
  rank: number;
  reason: SkipReason;
  /** Drops not yet reported. */
  pending: number;
  /** When the last line was written (performance.now() ms), -Infinity before the first. */
  lastLine: number;
  /** Fields of the latest drop (the engine's block size, its group, ...). */
  detail: Record<string, unknown>;
  timer: ReturnType<typeof setTimeout> | null;
}

export interface DropLogOptions {
  logger: Logger | null;
  /** Bound into every line: who the engine is (instance id, endpoint). */
  engine: Record<string, unknown>;
  /** Minimum ms between two lines of one (rank, reason). */
  intervalMs: number;
}

/** The drop lines of one source (see the top of the file). */
export class DropLog {
  readonly #logger: Logger | null;
  readonly #engine: Record<string, unknown>;
  readonly #intervalMs: number;
  /** rank * 4 + reason index -> budget. */
  readonly #budgets = new Map<number, Budget>();

  constructor(o: DropLogOptions) {
    this.#logger = o.logger;
    this.#engine = o.engine;
    this.#intervalMs = o.intervalMs;
  }

  /** Counts one dropped event of `rank` for `reason`; `detail` goes into the line that reports it. */
  note(rank: number, reason: SkipReason, detail: Record<string, unknown>): void {
    if (this.#logger === null) return;
    const k = rank * 4 + REASONS.indexOf(reason);
    let b = this.#budgets.get(k);
    if (b === undefined) this.#budgets.set(k, (b = { rank, reason, pending: 0, lastLine: -Infinity, detail, timer: null }));
    b.pending++;
    b.detail = detail;
    if (b.timer !== null) return;
    const wait = b.lastLine + this.#intervalMs - performance.now();
    if (wait <= 0) this.#write(b);
    else {
      b.timer = setTimeout(() => {
        b.timer = null;
        this.#write(b);
      }, wait);
      b.timer.unref(); // a pending report must not keep a process alive
    }
  }

  /** Writes what is pending (an unregistered engine's last drops are reported too) and stops the timers. */
  close(): void {
    for (const b of this.#budgets.values()) {
      if (b.timer !== null) clearTimeout(b.timer);
      b.timer = null;
      if (b.pending > 0) this.#write(b);
    }
  }

  #write(b: Budget): void {
    const fields = { ...this.#engine, dpRank: b.rank, reason: b.reason, dropped: b.pending, ...b.detail };
    if (b.reason === SkipReason.NonFullAttention) this.#logger?.info(fields, MESSAGES[b.reason]);
    else this.#logger?.warn(fields, MESSAGES[b.reason]);
    b.pending = 0;
    b.lastLine = performance.now();
  }
}
