/**
 * The `KvRouter` configurations the timed replay compares: Dynamo's defaults (`dynamo`) and
 * kvindex's default (`kv`), tuned on the timed replay (docs/replay-timed.md has the numbers).
 */
import type { KvPolicyConfig } from './kv-router.js';

/** Dynamo's `DefaultWorkerSelector` defaults: every `KvRouter` option left at its default. */
export const DYNAMO_ROUTING: Readonly<KvPolicyConfig> = Object.freeze({});

/**
 * kvindex's default routing configuration (the `kv` policy), tuned on the first 2,000 requests
 * of the Mooncake synthetic and conversation traces at load 0.8 (docs/replay-timed.md; TTFT p99
 * here is the 1,981st of 2,000 values, one rank above the nearest-rank p99 the CLI reports):
 * - `prefillLoadScale: 30`: the prefill term (queued prefill plus this prompt's uncached
 *   blocks, what the first token waits for) outweighs the decode term (blocks held by running
 *   requests, which costs memory, not TTFT) 30 to 1; Dynamo weighs them 1 to 1, so a worker
 *   holding long decodes was avoided even when its prefill queue was empty. Synthetic TTFT p99
 *   1,772 -> 1,455 ms (scales 10 / 30 / 100: 1,490 / 1,455 / -; conversation 2,280 / 2,245 /
 *   2,293).
 * - `overlapBonus: 100` (3.3 prefill blocks per cached block): keeps a conversation where its
 *   prefix is cached even when the prefill term says another worker is as fast now; the next
 *   turn finds it there. Synthetic p99 1,455 -> 1,399 ms, cached tokens 9.8 % -> 13.1 % (bonus
 *   30 / 100 / 300: 1,447 / 1,399 / 1,448 ms).
 */
export const KVINDEX_ROUTING: Readonly<KvPolicyConfig> = Object.freeze({ prefillLoadScale: 30, overlapBonus: 100 });
