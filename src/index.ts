/**
 * kvindex: a KV-cache-aware router indexer, wire-compatible with NVIDIA Dynamo's KV router.
 * This is the curated public surface; everything not listed here is internal.
 */

// Values
export { KvIndexError, EventParseError, SnapshotDecodeError, ErrorCode } from './errors.js';
export { ApplyStatus, U64_MAX } from './protocol/types.js';
export { parseRouterEvent, parseRecorderLine } from './protocol/json-parse.js';
export { parseJsonLossless } from './protocol/json-value.js';
export { formatRouterEvent } from './protocol/json-format.js';
export { encodeSnapshot, createSnapshotWriter } from './protocol/snapshot-writer.js';
export { decodeSnapshot, iterateSnapshot } from './protocol/snapshot-reader.js';
export { mergeSnapshots } from './protocol/snapshot-merge.js';
export { computeBlockHashes, computeSequenceHashes, XXH3_SEED } from './hash/block-hash.js';
export { RadixTree } from './tree/radix-tree.js';
export { ShardedIndexer } from './indexer/sharded-indexer.js';
export { ClusterSim, deriveWorkerIds } from './trace/cluster-sim.js';
export { readTraceFile, parseTraceLine } from './trace/mooncake.js';
export { readWorkload } from './trace/workload.js';
export { KvEventSubscriber } from './nats/subscriber.js';
export { KvEventPublisher } from './nats/publisher.js';
export { KvQueryService, requestFindMatches } from './nats/query.js';
export { kvNames } from './nats/names.js';
export { connectNats } from './nats/connect.js';
export { NatsError, NatsErrorCode } from './nats/errors.js';

// Types
export type {
  RouterEvent,
  KvCacheEvent,
  KvCacheEventData,
  StoredBlock,
  OverlapScores,
  SnapshotEncoding,
} from './protocol/types.js';
export type { ErrorCode as ErrorCodeValue } from './errors.js';
export type { RecorderLine } from './protocol/json-parse.js';
export type { JsonValue, JsonObject } from './protocol/json-value.js';
export type { SnapshotWriter } from './protocol/snapshot-writer.js';
export type { RadixTreeOptions } from './tree/radix-tree.js';
export type { DumpSink } from './tree/dump.js';
export type { ShardedIndexerOptions } from './indexer/sharded-indexer.js';
export type { ShardStats } from './shard/wire/messages.js';
export type { ClusterSimOptions } from './trace/cluster-sim.js';
export type { TraceRequest } from './trace/mooncake.js';
export type { WorkloadOp } from './trace/workload.js';
export type { KvEventSubscriberOptions, SubscriberStats } from './nats/subscriber-options.js';
export type { KvEventPublisherOptions, PublishOptions } from './nats/publisher.js';
export type { FindRequest, QueryServiceOptions, RemoteScores } from './nats/query.js';
export type { KvNames } from './nats/names.js';
export type { NatsConnectOptions } from './nats/connect.js';
