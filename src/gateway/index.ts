/**
 * kvindex/gateway: an OpenAI-compatible proxy that sends each request to the engine holding its
 * prompt's prefix, as a fastify plugin (`gatewayPlugin`) or framework-free (`Gateway`:
 * `pickEngine(request)`, then `markPrefill` and `free`; `relay` proxies one request over a
 * Node `ServerResponse`; `RemoteIndexClient` asks replicas of `serve --http` for overlaps within
 * a deadline). docs/gateway.md has the details. Curated: everything not listed is
 * internal.
 */
// Values
export { Gateway } from './gateway.js';
export { gatewayPlugin, TENANT_HEADER } from './plugin.js';
export { relay, engineHeaders } from './proxy.js';
export { readOpenAiRequest, Endpoint } from './openai-request.js';
export { readEngineUrl, Health, EngineCatalog } from './engine-catalog.js';
export { GatewayError } from './openai-error.js';
export { Outcome } from './observer.js';
export { LocalTokenizer } from './local-tokenizer.js';
export { SharedLoads, SharedLoadsState } from './shared-loads.js';
export { registerSharedLoadsMetrics } from './shared-loads-metrics.js';
export { RemoteIndexClient, ReplicaFailure, FailOpen, RemoteTransport } from './remote-index.js';
export { RemoteIndexMetrics, watchRegistrar } from './remote-index-metrics.js';
export { ReplicaRegistrar, RegisterFailure } from './remote-register.js';

// Types
export type { GatewayOptions } from './gateway.js';
export type { EnginePick } from './engine-pick.js';
export type { GatewayPluginOptions } from './plugin.js';
export type { OpenAiRequest, Prompt } from './openai-request.js';
export type { EngineEntry, CatalogEngine, ListedModel } from './engine-catalog.js';
export type { GatewayObserver } from './observer.js';
export type { SharedLoadsOptions, SharedLoadsStats } from './shared-loads.js';
export type { RemoteIndexOptions, RemoteLookup, RemoteIndexStats, ReplicaStats } from './remote-index.js';
export type { ReplicaRegistrarOptions, ReplicaRegistrationStats } from './remote-register.js';
