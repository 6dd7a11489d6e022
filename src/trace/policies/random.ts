/** `random`: a uniform seeded draw per request, blind to caches and load. */
import { seededRandom } from '../../router/random.js';
import type { PolicyContext, RoutingPolicy } from './policy.js';

/** Builds the random policy. */
export function randomPolicy(ctx: PolicyContext): RoutingPolicy {
  const n = ctx.workerIds.length;
  const random = seededRandom(ctx.seed);
  return {
    choose: () => Math.min(n - 1, Math.floor(random() * n)),
    queuedPrefill: null,
    firstToken: () => undefined,
    finished: () => undefined,
  };
}
