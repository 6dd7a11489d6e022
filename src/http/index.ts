/**
 * kvindex/http: the standalone indexer's HTTP API (Dynamo-compatible), as routes on a fastify
 * instance the caller owns (`kvindex serve --http` is one such caller). fastify is imported by
 * the caller; this entry only uses its types. Curated: everything not listed is internal.
 */
// Values
export { registerIndexerRoutes } from './indexer-routes.js';
export { EngineRegistry } from './engine-registry.js';
export { HttpRequestError } from './requests.js';
export { engineReadiness } from './engine-readiness.js';

// Types
export type { IndexerRoutesOptions } from './indexer-routes.js';
export type { EngineRegistryOptions, IndexEntry, ListenerEntry } from './engine-registry.js';
export type { EngineReadiness, InactiveRank } from './engine-readiness.js';
