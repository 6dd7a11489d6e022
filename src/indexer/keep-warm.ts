/**
 * Keep-warm (option `keepWarmMs`, on by default at 1 ms): while no lookup comes, the indexer
 * looks up the latest request's leading blocks again on the calling thread every period
 * (sharded-indexer.ts), through the calls a request makes, so that the next request finds the
 * lookup's code, the paths requests share (system prompts) and their address translations in
 * the caches rather than paying for them after idle time.
 *
 * Why: after 10 ms of idle time a lookup costs several times a hot one, much of it outside the
 * tree's data. On the 2-core dev VM (conversation tree, probes beside the lookup bench, p50): a
 * 2-shard `findMatchesInto` took 45-65 us after 10 ms of idle time, and 12 us with a one-block
 * prime every 1 ms. A 2-shard `findMatches` took 100 us unprimed, 28-30 with a one-block prime
 * of both calls, 12.6-14 with the latest request's first 32 blocks (full bench run: 52.5 us
 * without keep-warm, 8.05 with it).
 *
 * On by default, and why it lingers: a router that answers a request every 10 ms pays that
 * cold cost on every request, which is what the router exists to avoid. Its cost, measured by
 * the lookup bench with 2 shards (process CPU time, a request every 10 ms, sides alternating,
 * two full runs): 5.1-5.9 % of a core with keep-warm against 4.6-4.8 % without; nothing while
 * lookups come faster than the period, since a tick that follows a lookup does nothing. A
 * process that sees no lookup for `LINGER_MS` stops its timer altogether (no wake-up at all
 * while it idles), and the next lookup starts it again; that lookup pays the cold cost once.
 * `keepWarmMs: 0` turns it off. What it does not do: make the wake-up itself fast. In this
 * session's two full runs a 2-shard lookup after 10 ms of idle time took 15.5 and 12.6 us
 * with keep-warm (32.8-35.3 without), while an empty async call took 6.1-6.9 us in the same
 * rounds (3.6 in the run that measured 8.05).
 */

/**
 * Ticks stop after this long without a lookup (see above), in wall time: counted in ticks
 * (LINGER_MS / period), the linger lasted longer where ticks fire late, as on a loaded machine
 * (a CI run saw 971 primes 1.2 s after the last lookup, where 1,000 ticks of 1 ms make the
 * linger). A clock read per tick costs ~50 ns a millisecond.
 */
export const LINGER_MS = 1000;

/** What a tick needs from the indexer. */
export interface KeepWarmTarget {
  /** Lookups made so far (any count that moves with every lookup). */
  lookups(): number;
  /** Makes the priming lookup, if the indexer can make one without side effects now. */
  prime(): boolean;
}

export class KeepWarm {
  readonly #timer: NodeJS.Timeout;
  /** When a tick last saw the lookup count move (or the timer was armed), on `now`. */
  #lastLookupAt: number;
  #seen = -1;
  #stopped = false;
  #armed = true;
  /** Priming lookups made. */
  primes = 0;

  constructor(
    periodMs: number,
    private readonly target: KeepWarmTarget,
    private readonly lingerMs = LINGER_MS,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.#lastLookupAt = now();
    // One Timeout re-armed with refresh() (no allocation per period or per wake).
    this.#timer = setTimeout(() => this.#fire(), periodMs);
    this.#timer.unref(); // never what keeps a process alive
  }

  /** Whether the timer runs: false after the linger without a lookup, until `wake()`. */
  get armed(): boolean {
    return this.#armed;
  }

  #fire(): void {
    this.tick();
    if (this.#armed && !this.#stopped) this.#timer.refresh();
  }

  /**
   * One period: primes unless a lookup came since the last tick; once the linger has passed
   * since a tick last saw a lookup, disarms instead (the timer is not re-armed until `wake()`).
   */
  tick(): void {
    const n = this.target.lookups();
    if (n !== this.#seen) {
      this.#seen = n;
      this.#lastLookupAt = this.now();
      return;
    }
    if (this.now() - this.#lastLookupAt >= this.lingerMs) {
      this.#armed = false;
      return;
    }
    if (this.target.prime()) this.primes++;
  }

  /** Re-arms a disarmed timer (a lookup came); the indexer calls it only when `armed` is false. */
  wake(): void {
    if (this.#armed || this.#stopped) return;
    this.#armed = true;
    this.#lastLookupAt = this.now();
    this.#timer.refresh();
  }

  stop(): void {
    this.#stopped = true;
    this.#armed = false;
    clearTimeout(this.#timer);
  }
}
