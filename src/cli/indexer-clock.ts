/**
 * How `kvindex replay` times the indexer, for its block-ops/s.
 *
 * In-thread (`shards: 0`) every call does its work before it returns, so the time inside the
 * calls is the indexer's time. With shard threads `applyEvent` only enqueues: the shards apply
 * while the calling thread reads and parses the next lines, and summing the calls' own times
 * missed that work (event and recorder files reported up to ~20x their real block-ops/s). So
 * with threads the clock counts wall time in busy spans: a span opens at the first call after
 * the indexer was last known idle and closes when it is known idle again, which is when a
 * lookup replies (every shard answers it after the events queued before it) or a `flush()`
 * resolves. Work the calling thread does inside a span (parsing lines, the cluster simulation)
 * overlaps the shards' and is counted too, so the figure is, if anything, low.
 */
import { performance } from 'node:perf_hooks';

export class IndexerClock {
  /** Closes the span after a call that only enqueued: a no-op with shard threads. */
  readonly enqueued: () => void;
  #ms = 0;
  /** Start of the open busy span, NaN when none is open. */
  #openedAt = NaN;
  readonly #now: () => number;

  /**
   * @param threaded whether the indexer applies events on other threads (`shards >= 1`)
   * @param now clock in ms (tests inject one)
   */
  constructor(threaded: boolean, now: () => number = () => performance.now()) {
    this.#now = now;
    // Chosen once: with threads an enqueue leaves work behind, so it keeps the span open.
    this.enqueued = threaded ? () => {} : () => this.idle();
  }

  /** Indexer time so far (closed spans only), ms. */
  get ms(): number {
    return this.#ms;
  }

  /** True while a span is open: the indexer may still be working on earlier calls. */
  get busy(): boolean {
    return !Number.isNaN(this.#openedAt);
  }

  /** An indexer call starts: opens a span unless one is open. */
  begin(): void {
    if (Number.isNaN(this.#openedAt)) this.#openedAt = this.#now();
  }

  /** The indexer is known idle now (a call that did its work, a lookup reply, a flush): closes the span. */
  idle(): void {
    if (Number.isNaN(this.#openedAt)) return;
    this.#ms += this.#now() - this.#openedAt;
    this.#openedAt = NaN;
  }
}
