/**
 * The caller-owned result of an allocation-free lookup (`findMatchesInto`): a lookup fills
 * `workerIds[0..n)` and `scores[0..n)` and returns n. The arrays are replaced by larger ones
 * only when a lookup matches more workers than they hold, so a router that keeps one result
 * allocates nothing per lookup in steady state (no Map, no bigint: ids are written as 32-bit
 * halves into the BigUint64Array's memory).
 */
export class MatchResult {
  /** Matching workers, at 0..n-1 (n as returned by the lookup). */
  workerIds: BigUint64Array;
  /** Each matching worker's score (blocks of the prefix it holds), at 0..n-1. */
  scores: Uint32Array;
  /** @internal `workerIds` as (lo, hi) words, for writers that hold ids as halves. */
  idWords: Uint32Array;

  constructor(capacity: number) {
    const cap = Math.max(1, capacity);
    this.workerIds = new BigUint64Array(cap);
    this.scores = new Uint32Array(cap);
    this.idWords = new Uint32Array(this.workerIds.buffer);
  }

  /** @internal Makes room for `n` entries, keeping the first `keep`. */
  reserve(n: number, keep: number): void {
    if (n <= this.scores.length) return;
    const cap = Math.max(n, this.scores.length * 2);
    const ids = new BigUint64Array(cap);
    const scores = new Uint32Array(cap);
    ids.set(this.workerIds.subarray(0, keep));
    scores.set(this.scores.subarray(0, keep));
    this.workerIds = ids;
    this.scores = scores;
    this.idWords = new Uint32Array(ids.buffer);
  }
}

/** A reusable lookup result for `findMatchesInto`, sized for `capacity` workers (it grows). */
export function createMatchResult(capacity = 64): MatchResult {
  return new MatchResult(capacity);
}
