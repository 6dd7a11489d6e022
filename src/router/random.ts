/**
 * The random source of routing decisions: a function returning a float in [0, 1), as
 * `Math.random` does (the default). Tests and replays inject `seededRandom(seed)` so a decision
 * sequence is reproducible: the same seed gives the same draws on every platform.
 */

/** A source of uniform floats in [0, 1). */
export type RandomSource = () => number;

/**
 * A seeded generator: a 32-bit xorshift state (shifts 13, 17, 5) whose output is scrambled by
 * an odd multiply, divided by 2^32. Period 2^32 - 1; plenty for tie-breaks and softmax draws
 * (the statistical tests draw 10^5). `seed` is any integer; 0 is mapped to a fixed non-zero
 * state (xorshift's only fixed point).
 */
export function seededRandom(seed: number): RandomSource {
  let s = (seed | 0) ^ 0x9e3779b9;
  if (s === 0) s = 0x2545f491;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (Math.imul(s, 0x2c1b3c6d) >>> 0) / 4294967296;
  };
}
