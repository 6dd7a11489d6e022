/** Deterministic pseudo-random streams for tests, so that a failing case reproduces. */

/** xorshift32: u32 values (seed 0 counts as 1). */
export function xorshift32(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

/** Numbers in [0, 1) from xorshift32. */
export function unitRandom(seed: number): () => number {
  const next = xorshift32(seed);
  return () => next() / 2 ** 32;
}
