/**
 * A router's own view of the load it placed: requests routed to each engine and not finished
 * (the count SGLang's and the least-loaded policies balance on).
 */
export class InFlight {
  readonly #count: Int32Array;
  readonly #where = new Map<string, number>();

  constructor(workers: number) {
    this.#count = new Int32Array(workers);
  }

  /** Requests in flight on engine `w`. */
  count(w: number): number {
    return this.#count[w]!;
  }

  /** Records `id` as routed to `w`. */
  add(id: string, w: number): void {
    this.#where.set(id, w);
    this.#count[w]!++;
  }

  /** Records the end of `id` (unknown ids are ignored). */
  remove(id: string): void {
    const w = this.#where.get(id);
    if (w === undefined) return;
    this.#where.delete(id);
    this.#count[w]!--;
  }
}

/**
 * The index of the smallest value of `score(i)` for i in 0..n-1; ties go to a uniform draw
 * from `random` (reservoir), so no engine is favoured by its position.
 */
export function argMin(n: number, score: (i: number) => number, random: () => number): number {
  let best = 0;
  let bestScore = Infinity;
  let ties = 0;
  for (let i = 0; i < n; i++) {
    const s = score(i);
    if (s < bestScore) {
      best = i;
      bestScore = s;
      ties = 1;
    } else if (s === bestScore && random() * ++ties < 1) {
      best = i;
    }
  }
  return best;
}
