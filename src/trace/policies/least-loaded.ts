/** `least-loaded`: the engine with the fewest requests in flight (the router's own count), blind to caches. */
import { seededRandom } from '../../router/random.js';
import { argMin, InFlight } from './in-flight.js';
import type { PolicyContext, RoutingPolicy } from './policy.js';

/** Builds the least-loaded policy. */
export function leastLoadedPolicy(ctx: PolicyContext): RoutingPolicy {
  const n = ctx.workerIds.length;
  const random = seededRandom(ctx.seed);
  const inFlight = new InFlight(n);
  return {
    choose: (req) => {
      const w = argMin(n, (i) => inFlight.count(i), random);
      inFlight.add(req.id, w);
      return w;
    },
    queuedPrefill: null,
    firstToken: () => undefined,
    finished: (id) => inFlight.remove(id),
  };
}
