/**
 * Keep-warm (option `keepWarmMs`): while no lookup comes, the indexer looks up the latest
 * request's leading blocks again on the calling thread every period (sharded-indexer.ts), through
 * the calls a request makes, so that the next request finds the lookup's code, the paths
 * requests share (system prompts) and their address translations in the caches rather than
 * paying for them after idle time.
 *
 * Why: after 10 ms of idle time a lookup costs several times a hot one, much of it outside the
 * tree's data. On the 2-core dev VM (a PVM guest, conversation tree, probes beside the lookup
 * bench, p50): a 2-shard `findMatchesInto` took 45-65 us after 10 ms of idle time, and 12 us
 * with a one-block prime every 1 ms. A 2-shard `findMatches` took 100 us unprimed, 28-30 with
 * a one-block prime of both calls, 12.6-14 with the latest request's first 32 blocks. Its
 * cost: one wake-up per period (a few us of a core then, under 1 % at 1 ms), nothing while
 * lookups come, since a tick that follows a lookup does nothing.
 *
 * Off by default: a router that sees steady traffic gains nothing from it, and a timer per
 * indexer firing every millisecond is a decision for the operator.
 */

/** What a tick needs from the indexer. */
export interface KeepWarmTarget {
  /** Lookups made so far (any count that moves with every lookup). */
  lookups(): number;
  /** Makes the priming lookup, if the indexer can make one without side effects now. */
  prime(): boolean;
}

export class KeepWarm {
  readonly #timer: NodeJS.Timeout;
  #seen = -1;
  /** Priming lookups made. */
  primes = 0;

  constructor(periodMs: number, private readonly target: KeepWarmTarget) {
    this.#timer = setInterval(() => this.tick(), periodMs);
    this.#timer.unref(); // never what keeps a process alive
  }

  /** One period: primes unless a lookup came since the last tick. */
  tick(): void {
    const n = this.target.lookups();
    if (n !== this.#seen) {
      this.#seen = n;
      return;
    }
    if (this.target.prime()) this.primes++;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
