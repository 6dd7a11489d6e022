/**
 * A lower bound of each request's time to first token in the timed replay (timed-sim.ts), valid
 * for every routing policy: what the request would take with the best cache it could possibly
 * find and an engine that does nothing else. The p99 of these bounds bounds every policy's TTFT
 * p99 from below (if x_i >= y_i for every request, each order statistic of x is >= that of y),
 * so it says how much of a gap between two policies any policy could still close.
 *
 * Per request i, for each depth d (0..its blocks) of its prompt's block chain:
 * - the first d blocks can be cached on some engine only once another request j holding them
 *   stored them, at the end of j's prefill: not before `arrival_j + bound_j` for a request
 *   routed earlier (bounds are computed in arrival order), nor before `arrival_j + one step`
 *   for a later one (its prefill takes at least one step). Infinite caches: nothing is evicted;
 * - with d blocks cached, the request prefills `input - min(d * blockSize, input - 1)` tokens
 *   (the engine recomputes the last token for its logits), in steps of at most `tokenBudget`
 *   tokens with nothing else in them: the cheapest split of those tokens into steps (the step
 *   time is convex with a 16.5 ms constant, so an 8,192-token step is within 1 % of the
 *   cheapest per token);
 * - the bound at depth d is the wait for the cache (0 when it is already stored at arrival)
 *   plus that prefill; the request's bound is the minimum over d.
 * What it ignores (each only makes real TTFTs longer): other requests' steps, decode time in
 * mixed steps and in the step that samples the first token (`firstTokenDecode`, at least
 * 5.7 ms with `dynamo-mocker`), queueing, admission limits, eviction, the event delay.
 */
import { prefillMs, type EngineParams } from './engine-params.js';

/** The prefill time of `tokens` tokens on an otherwise idle engine, in the cheapest split into steps, ms. */
export function alonePrefillMs(p: EngineParams, tokens: number): number {
  if (tokens <= 0) return 0;
  const k0 = Math.ceil(tokens / p.tokenBudget);
  let best = Infinity;
  // k * prefillMs(tokens / k) is convex in k: a few steps past the fewest find the minimum.
  for (let k = k0; k <= k0 + 8; k++) {
    const t = k * prefillMs(p, tokens / k);
    if (t < best) best = t;
    else break;
  }
  return best;
}

/**
 * Per request, the lower bound of its TTFT, ms (see the file comment). `seq[i]` are request i's
 * block sequence hashes (what the engines cache), `inputTokens[i]` its prompt length and
 * `arrivalMs[i]` its arrival; requests are in arrival order (non-decreasing times).
 */
export function ttftLowerBounds(
  seq: readonly BigUint64Array[],
  inputTokens: ArrayLike<number>,
  arrivalMs: ArrayLike<number>,
  params: EngineParams,
  blockSize: number,
): Float64Array {
  const n = seq.length;
  // Per block hash: the earliest time a request before the current one stored it, and the
  // requests holding it, to find the next one after the current request.
  const storedBy = new Map<bigint, number>();
  const holders = new Map<bigint, number[]>();
  for (let i = 0; i < n; i++) {
    for (const h of seq[i]!) {
      const list = holders.get(h);
      if (list === undefined) holders.set(h, [i]);
      else if (list[list.length - 1] !== i) list.push(i);
    }
  }
  const cursor = new Map<bigint, number>();
  const oneStep = prefillMs(params, 1);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const s = seq[i]!;
    const input = Math.max(1, inputTokens[i]!);
    const a = arrivalMs[i]!;
    let best = alonePrefillMs(params, input);
    for (let d = 1; d <= s.length; d++) {
      const h = s[d - 1]!;
      let ready = storedBy.get(h) ?? Infinity;
      // The next holder after i (holders are in index order; the cursor only moves forward).
      const list = holders.get(h)!;
      let c = cursor.get(h) ?? 0;
      while (c < list.length && list[c]! <= i) c++;
      cursor.set(h, c);
      if (c < list.length) ready = Math.min(ready, arrivalMs[list[c]!]! + oneStep);
      if (ready === Infinity) break; // no other request holds this block, nor any deeper one
      const t = Math.max(0, ready - a) + alonePrefillMs(params, input - Math.min(d * blockSize, input - 1));
      if (t < best) best = t;
    }
    out[i] = best;
    const done = a + best;
    for (const h of s) {
      const prev = storedBy.get(h);
      if (prev === undefined || done < prev) storedBy.set(h, done);
    }
  }
  return out;
}
