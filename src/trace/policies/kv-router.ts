/**
 * `kv` and `dynamo`: the product's `KvRouter` over the replay's index, through its public API
 * (`routeBlocks`, `markPrefillCompleted` at the first token, `free` at the end). `dynamo` keeps
 * Dynamo's default selector weights; `kv` uses the configuration kvindex ships as its default
 * (`KVINDEX_ROUTING`, src/trace/policies/kv-config.ts). Overrides (tuning, `--kv-config`) are
 * merged over either.
 */
import { KvRouter, type KvRouterOptions } from '../../router/kv-router.js';
import { seededRandom } from '../../router/random.js';
import type { PolicyContext, RoutingPolicy } from './policy.js';

/** The `KvRouter` options a policy may set (everything but the wiring). */
export type KvPolicyConfig = Omit<KvRouterOptions, 'indexer' | 'blockSize' | 'workers' | 'now' | 'random' | 'routerId' | 'onSequenceEvent' | 'approximate'>;

/** Builds a `KvRouter` policy with `config`. */
export function kvRouterPolicy(ctx: PolicyContext, config: KvPolicyConfig): RoutingPolicy {
  const slot = new Map<bigint, number>();
  ctx.workerIds.forEach((id, i) => slot.set(id, i));
  const workers = ctx.workerIds.map((workerId) => ({ workerId, dpRank: 0 }));
  const router = new KvRouter({
    ...config,
    indexer: ctx.index,
    blockSize: ctx.blockSize,
    workers,
    random: seededRandom(ctx.seed),
    now: ctx.now,
  });
  return {
    choose: (req, allowed) => {
      const d = router.routeBlocks(req.local, req.tokens, {
        requestId: req.id,
        expectedOutputTokens: req.outputTokens,
        ...(allowed === undefined ? {} : { candidates: allowed.map((w) => workers[w]!) }),
      });
      return slot.get(d.workerId)!;
    },
    queuedPrefill: (w) => router.queuedPrefillTokens(ctx.workerIds[w]!),
    firstToken: (id) => {
      router.markPrefillCompleted(id);
    },
    finished: (id) => {
      router.free(id);
    },
  };
}
