/** `round-robin`: engines in turn, blind to caches and load. */
import type { PolicyContext, RoutingPolicy } from './policy.js';

/** Builds the round-robin policy. */
export function roundRobinPolicy(ctx: PolicyContext): RoutingPolicy {
  const n = ctx.workerIds.length;
  let next = 0;
  return {
    choose: () => {
      const w = next;
      next = (next + 1) % n;
      return w;
    },
    queuedPrefill: null,
    firstToken: () => undefined,
    finished: () => undefined,
  };
}
