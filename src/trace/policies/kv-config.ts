/**
 * The `KvRouter` configurations the timed replay compares: the router's named presets
 * (src/router/presets.ts, where the `kv` tuning is written down), as policy configurations.
 */
import { ROUTING_PRESETS } from '../../router/presets.js';
import type { KvPolicyConfig } from './kv-router.js';

/** Dynamo's `DefaultWorkerSelector` defaults: every `KvRouter` option left at its default. */
export const DYNAMO_ROUTING: Readonly<KvPolicyConfig> = ROUTING_PRESETS.dynamo;

/** kvindex's default routing configuration (the `kv` policy). */
export const KVINDEX_ROUTING: Readonly<KvPolicyConfig> = ROUTING_PRESETS.kv;

/** The `kv-time` preset: a cost in predicted ms to the first token (a candidate, not the default). */
export const KV_TIME_ROUTING: Readonly<KvPolicyConfig> = ROUTING_PRESETS['kv-time'];
