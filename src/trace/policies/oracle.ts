/**
 * `oracle`: a reference, not a router. It reads the engines' true state (their queues, caches,
 * decoders and the step under way: `EngineModel.backlog`), which no router sees, and sends each
 * request to the engine where its own first token is predicted soonest:
 *
 *   ttft(w) = wait(w) + prefill(P) + steps(P) * decode(w)
 *   P       = the engine's prompt tokens still to prefill + this prompt net of the engine's cache
 *   wait    = the rest of the step under way; prefill(P) = P in full-budget steps (the engine's
 *             prefill polynomial); decode = the decode part of a step with the engine's decoders
 *             at its u (`EngineBacklog.decodeKvFraction`); with no decoder, one decode part for
 *             the first token when the engine times it so (`firstTokenDecode`)
 *
 * Ties go to a seeded draw. It answers one question about issue 39's goal: whether the routers'
 * loss to the TTFT lower bound is a lack of information (what they cannot see of the engines)
 * or what per-request greedy routing can do at all. Measured (docs/replay-timed.md): at load 0.8
 * its TTFT p99 is 7.5-15.5 % under `dynamo`'s on the held-out slices (mean 11.1 %; `kv`
 * 4.1-14.7 %, mean 8.4 %): information is worth ~3 points, far from issue 39's 20 %.
 */
import { computeSequenceHashes } from '../../hash/block-hash.js';
import { seededRandom } from '../../router/random.js';
import { decodeMs, prefillMs, type EngineParams } from '../engine-params.js';
import type { PolicyContext, RoutingPolicy } from './policy.js';

/** Time to prefill `tokens` in steps of the full budget, ms, nothing else in them. */
export function budgetStepsMs(p: EngineParams, tokens: number): number {
  const full = Math.floor(tokens / p.tokenBudget);
  const rest = tokens - full * p.tokenBudget;
  return full * prefillMs(p, p.tokenBudget) + prefillMs(p, rest);
}

/** Builds the oracle reference policy (reads `ctx.oracle`). */
export function oraclePolicy(ctx: PolicyContext): RoutingPolicy {
  const n = ctx.workerIds.length;
  const random = seededRandom(ctx.seed);
  const view = ctx.oracle;
  const p = view.params;
  return {
    choose: (req) => {
      const now = ctx.now();
      const seq = computeSequenceHashes(req.local);
      const words = new Uint32Array(seq.buffer, seq.byteOffset, seq.length * 2);
      let best = 0;
      let bestMs = Infinity;
      let ties = 0;
      for (let w = 0; w < n; w++) {
        const b = view.backlog(w);
        const own = Math.max(1, req.tokens - view.cachedBlocks(w, words, seq.length) * ctx.blockSize);
        const tokens = b.prefillTokens + own;
        const steps = Math.ceil(tokens / p.tokenBudget);
        // Every prefill step carries the decode part of the engine's decoders; with none, the
        // prompt's last step still pays it where the engine times a first token as a decode.
        const decode = b.decoders > 0 ? steps * decodeMs(p, b.decoders, b.decodeKvFraction) : p.firstTokenDecode === 1 ? decodeMs(p, 1, b.decodeKvFraction) : 0;
        const ms = Math.max(0, b.stepEndMs - now) + budgetStepsMs(p, tokens) + decode;
        if (ms < bestMs) {
          best = w;
          bestMs = ms;
          ties = 1;
        } else if (ms === bestMs && random() * ++ties < 1) {
          best = w;
        }
      }
      return best;
    },
    queuedPrefill: null,
    firstToken: () => undefined,
    finished: () => undefined,
  };
}
