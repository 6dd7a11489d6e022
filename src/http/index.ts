/**
 * The standalone indexer's HTTP API (Dynamo-compatible), as routes on a fastify instance.
 * Internal to the CLI for now (`kvindex serve --http`); exported from `kvindex/zmq`.
 */
export { registerIndexerRoutes } from './indexer-routes.js';
export { EngineRegistry } from './engine-registry.js';
export { HttpRequestError } from './requests.js';
export type { IndexerRoutesOptions } from './indexer-routes.js';
export type { EngineRegistryOptions, IndexEntry, ListenerEntry } from './engine-registry.js';
