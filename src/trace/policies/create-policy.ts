/** Builds a timed-replay policy by name. */
import { kvRouterPolicy, type KvPolicyConfig } from './kv-router.js';
import { DYNAMO_ROUTING, KVINDEX_ROUTING, KV_TIME_ROUTING } from './kv-config.js';
import { leastLoadedPolicy } from './least-loaded.js';
import { llmdPolicy } from './llm-d.js';
import { oraclePolicy } from './oracle.js';
import type { PolicyContext, PolicyName, RoutingPolicy } from './policy.js';
import { randomPolicy } from './random.js';
import { roundRobinPolicy } from './round-robin.js';
import { sglangPolicy } from './sglang.js';

/**
 * The policy `name` over `ctx`. `kvConfig` is merged over the `kv` or `dynamo` configuration
 * (ignored by the other policies). `kv` and `kv-time` also get the engines' profiled prefill
 * speed (`prefillTokensPerMs`: their virtual prefill queues), `kv-time` the whole profile of
 * the engines it routes to (its `timeCost`, in place of the preset's `dynamo-mocker` numbers).
 */
export function createPolicy(name: PolicyName, ctx: PolicyContext, kvConfig: KvPolicyConfig = {}): RoutingPolicy {
  switch (name) {
    case 'kv':
      return kvRouterPolicy(ctx, { ...KVINDEX_ROUTING, prefillTokensPerMs: ctx.prefillTokensPerMs, ...kvConfig });
    case 'dynamo':
      return kvRouterPolicy(ctx, { ...DYNAMO_ROUTING, ...kvConfig });
    case 'kv-time':
      return kvRouterPolicy(ctx, { ...KV_TIME_ROUTING, prefillTokensPerMs: ctx.prefillTokensPerMs, timeCost: ctx.profile, ...kvConfig });
    case 'round-robin':
      return roundRobinPolicy(ctx);
    case 'random':
      return randomPolicy(ctx);
    case 'least-loaded':
      return leastLoadedPolicy(ctx);
    case 'sglang':
      return sglangPolicy(ctx);
    case 'llm-d':
      return llmdPolicy(ctx);
    case 'oracle':
      return oraclePolicy(ctx);
  }
}
