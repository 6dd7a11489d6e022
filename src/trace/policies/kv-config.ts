/**
 * The `KvRouter` configurations the timed replay compares: Dynamo's defaults (`dynamo`) and
 * kvindex's default (`kv`), tuned on the timed replay (docs/replay-timed.md has the numbers).
 */
import type { KvPolicyConfig } from './kv-router.js';

/** Dynamo's `DefaultWorkerSelector` defaults: every `KvRouter` option left at its default. */
export const DYNAMO_ROUTING: Readonly<KvPolicyConfig> = Object.freeze({});

/** kvindex's default routing configuration (the `kv` policy). */
export const KVINDEX_ROUTING: Readonly<KvPolicyConfig> = Object.freeze({});
