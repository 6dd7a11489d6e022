/**
 * Keep-warm (option `keepWarmMs`): while no lookup comes, the indexer makes a one-block lookup
 * on the calling thread every period, through the same calls a request makes, so that the next
 * request finds the lookup's code, the top of the trees and their address translations in the
 * caches rather than paying for them after idle time.
 *
 * Why: after 10 ms of idle time a lookup costs several times a hot one, mostly outside the
 * tree's data. On the 2-core dev VM (a PVM guest, conversation tree, probes beside the lookup
 * bench): a 2-shard `findMatchesInto` took 45-65 us at p50 after 10 ms of idle time, and 12 us
 * with a prime every 1 ms; after a one-block lookup made just before it, 6-8 us. With the
 * `findMatches` path primed as well, a 2-shard `findMatches` took 22 us against 64-86 us. Its
 * cost: one wake-up per period (about 5-10 us of a core then, ~1 % at 1 ms), none while
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
