/**
 * kvindex/nats: the NATS JetStream adapter (subscriber, publisher, lookup and routing services), wire-compatible
 * with Dynamo's KV router. A separate entry point so that `import 'kvindex'` does not load the
 * NATS client. Curated like src/index.ts: everything not listed here is internal.
 */

// Values
export { KvEventSubscriber } from './subscriber.js';
export { KvEventPublisher } from './publisher.js';
export { KvQueryService, requestFindMatches } from './query.js';
export { KvRouteService, routeSubjects } from './route-service.js';
export { kvNames } from './names.js';
export { connectNats } from './connect.js';
export { redactUrl } from './auth.js';
export { NatsError, NatsErrorCode } from './errors.js';

// Types
export type { KvEventSubscriberOptions, SubscriberStats } from './subscriber-options.js';
export type { KvEventPublisherOptions, PublishOptions } from './publisher.js';
export type { FindQuery, FindRequest, QueryServiceOptions, RemoteScores } from './query.js';
export type { KvNames } from './names.js';
export type { RouteServiceOptions, RouteSubjects } from './route-service.js';
export type { NatsConnectOptions } from './connect.js';
export type { NatsAuthOptions, NatsTlsOptions } from './auth.js';
export type { Readiness } from './readiness.js';
