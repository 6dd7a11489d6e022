/**
 * How `kvindex replay` keeps its score check honest when lookups do not wait for the shards
 * (`readYourWrites: false`, the sharded replay's default: what a router under load sees).
 *
 * Such a lookup may be answered before a shard applied the events the previous requests
 * produced; its scores then legitimately differ from the simulated caches (or a workload's
 * `expect`) for the workers those events were for. A difference counts as stale, not wrong,
 * only when all three hold:
 * - the lookup was early: the indexer was not idle just before it (`idle` is read on the calling
 *   thread, the only one that sends events, so an idle indexer answers exactly);
 * - every worker whose score differs had an event sent since the indexer was last seen idle;
 * - asked again once the shards caught up (`flush()`, then a lookup), the indexer's answer
 *   matches the truth exactly.
 * Anything else is a mismatch, as in-thread. The re-check runs outside the indexer's timing; it
 * lets the shards catch up, so it is made only for lookups that differed (a few per thousand on
 * the shipped trace slice).
 */
import type { ShardedIndexer } from '../indexer/sharded-indexer.js';

export class StaleReads {
  /** Lookups answered before the shards applied every event sent before them. */
  early = 0;
  /** Early lookups whose answer differed from the truth and was right once the shards caught up. */
  stale = 0;
  /** Workers with an event sent since the indexer was last seen idle. */
  readonly #inFlight = new Set<bigint>();

  constructor(private readonly indexer: ShardedIndexer) {}

  /** An event for `workerId` was just applied (sent towards its shard). */
  sent(workerId: bigint): void {
    this.#inFlight.add(workerId);
  }

  /** Just before a lookup: whether every event sent has been applied (the answer is then exact). */
  fresh(): boolean {
    if (this.indexer.idle) {
      this.#inFlight.clear();
      return true;
    }
    this.early++;
    return false;
  }

  /**
   * Judges a lookup whose answer differed from the truth for the workers `differing` (ids),
   * given what `fresh()` said before it. `recheck` looks the request up again (the shards have
   * caught up then) and returns how many workers still differ. Returns true when the
   * difference is a real mismatch; counts it in `stale` otherwise.
   */
  async wrong(fresh: boolean, differing: readonly bigint[], recheck: () => number): Promise<boolean> {
    if (fresh) return true;
    for (const w of differing) if (!this.#inFlight.has(w)) return true;
    await this.indexer.flush();
    this.#inFlight.clear();
    if (recheck() !== 0) return true;
    this.stale++;
    return false;
  }
}
