/**
 * `llm-d`: llm-d's inference scheduler (its endpoint picker), written from its documentation:
 * weighted scorers summed per endpoint, the highest total wins (max-score picker, ties drawn at
 * random). The default profile weighs the precise prefix-cache scorer 3, the queue scorer 2 and
 * the KV-cache utilization scorer 2 (llm-d.ai docs/architecture/core/router/epp/scheduling;
 * the profile as GPUStack's operator documents it, docs.gpustack.ai model-deployment/routing,
 * and Red Hat's "prefix cache 3, queue 2" default).
 * - prefix: matched blocks over the prompt's blocks, from the index fed by KV events;
 * - queue: (maxQ - q) / (maxQ - minQ) over the scraped waiting queues (1 when all equal);
 * - KV utilization: 1 - the scraped KV usage.
 * Queue and KV usage come from the engines' metrics as last scraped (every 50 ms), not live.
 */
import { seededRandom } from '../../router/random.js';
import { createMatchResult } from '../../tree/match-result.js';
import { argMin } from './in-flight.js';
import type { PolicyContext, RoutingPolicy } from './policy.js';

/** llm-d's default scorer weights. */
export const LLMD_WEIGHTS = { prefix: 3, queue: 2, kvUtilization: 2 } as const;

/** Builds the llm-d policy. */
export function llmdPolicy(ctx: PolicyContext, weights: { prefix: number; queue: number; kvUtilization: number } = LLMD_WEIGHTS): RoutingPolicy {
  const n = ctx.workerIds.length;
  const random = seededRandom(ctx.seed);
  const result = createMatchResult();
  const slot = new Map<bigint, number>();
  ctx.workerIds.forEach((id, i) => slot.set(id, i));
  const score = new Float64Array(n);
  return {
    choose: (req) => {
      score.fill(0);
      const m = ctx.index.findMatchesInto(req.local, result);
      if (req.local.length > 0) {
        for (let k = 0; k < m; k++) {
          const i = slot.get(result.workerIds[k]!);
          if (i !== undefined) score[i] = (weights.prefix * result.scores[k]!) / req.local.length;
        }
      }
      let maxQ = -Infinity;
      let minQ = Infinity;
      for (let i = 0; i < n; i++) {
        const q = ctx.metrics(i).waiting;
        if (q > maxQ) maxQ = q;
        if (q < minQ) minQ = q;
      }
      for (let i = 0; i < n; i++) {
        const s = ctx.metrics(i);
        score[i]! += weights.queue * (maxQ === minQ ? 1 : (maxQ - s.waiting) / (maxQ - minQ));
        score[i]! += weights.kvUtilization * (1 - s.kvUsage);
      }
      return argMin(n, (i) => -score[i]!, random);
    },
    queuedPrefill: null,
    firstToken: () => undefined,
    finished: () => undefined,
  };
}
