/**
 * `sglang`: SGLang's cache-aware routing policy (the `cache_aware` default of its model gateway,
 * sgl-router / SMG), written from its documentation (lightseekorg/smg
 * docs/getting-started/load-balancing.md and docs/concepts/routing/cache-aware.md):
 * - the load is each worker's count of requests in flight, as the router tracks them;
 * - when the load is imbalanced, `max - min > balanceAbsThreshold` (64) and
 *   `max > balanceRelThreshold * min` (1.5), the least-loaded worker takes the request;
 * - otherwise the worker with the longest prefix match takes it if its match ratio (matched
 *   blocks over the prompt's blocks) exceeds `cacheThreshold` (0.3); below that, the worker
 *   whose tree is smallest (here: fewest blocks in the index), to spread new prefixes.
 * Prefix matches come from the index fed by KV events (the gateway's event-driven mode).
 */
import { seededRandom } from '../../router/random.js';
import { createMatchResult } from '../../tree/match-result.js';
import { argMin, InFlight } from './in-flight.js';
import type { PolicyContext, RoutingPolicy } from './policy.js';

/** SGLang's defaults. */
export const SGLANG_DEFAULTS = { cacheThreshold: 0.3, balanceAbsThreshold: 64, balanceRelThreshold: 1.5 } as const;

/** Builds the SGLang cache-aware policy. */
export function sglangPolicy(ctx: PolicyContext, config: { cacheThreshold: number; balanceAbsThreshold: number; balanceRelThreshold: number } = SGLANG_DEFAULTS): RoutingPolicy {
  const n = ctx.workerIds.length;
  const random = seededRandom(ctx.seed);
  const inFlight = new InFlight(n);
  const result = createMatchResult();
  const slot = new Map<bigint, number>();
  ctx.workerIds.forEach((id, i) => slot.set(id, i));
  const matched = new Float64Array(n);
  return {
    choose: (req) => {
      let max = -Infinity;
      let min = Infinity;
      for (let i = 0; i < n; i++) {
        const c = inFlight.count(i);
        if (c > max) max = c;
        if (c < min) min = c;
      }
      let w: number;
      if (max - min > config.balanceAbsThreshold && max > config.balanceRelThreshold * min) {
        w = argMin(n, (i) => inFlight.count(i), random);
      } else {
        matched.fill(0);
        const m = ctx.index.findMatchesInto(req.local, result);
        for (let k = 0; k < m; k++) {
          const i = slot.get(result.workerIds[k]!);
          if (i !== undefined) matched[i] = result.scores[k]!;
        }
        const best = argMin(n, (i) => -matched[i]!, random);
        const ratio = req.local.length === 0 ? 0 : matched[best]! / req.local.length;
        w = ratio > config.cacheThreshold ? best : argMin(n, (i) => ctx.index.blockCount(ctx.workerIds[i]!), random);
      }
      inFlight.add(req.id, w);
      return w;
    },
    queuedPrefill: null,
    firstToken: () => undefined,
    finished: (id) => inFlight.remove(id),
  };
}
