/**
 * kvindex: a KV-cache-aware router indexer, wire-compatible with NVIDIA Dynamo's KV router.
 * This is the curated public surface of the core (events, hashing, snapshots, the tree, the
 * indexer, the routing decision, errors); the adapters have their own entry points, `kvindex/nats` (src/nats/index.ts)
 * and `kvindex/trace` (src/trace/index.ts). Everything not listed is internal.
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
export { storedBlocks } from './hash/stored-blocks.js';
export { RadixTree } from './tree/radix-tree.js';
export { createMatchResult, MatchResult } from './tree/match-result.js';
export { ShardedIndexer } from './indexer/sharded-indexer.js';
export { KvRouter } from './router/kv-router.js';
export { selectWorker } from './router/select-worker.js';
export { ActiveSequences } from './router/active-sequences.js';
export { ApproxIndex } from './router/approx-index.js';
export { formatActiveSequenceEvent, parseActiveSequenceEvent } from './router/sequence-event.js';
export { seededRandom } from './router/random.js';
export { DYNAMO_MOCKER_PROFILE, ROUTING_PRESETS, ROUTING_PRESET_NAMES, isRoutingPresetName } from './router/presets.js';

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
export type { BlockHashOptions, BlockMmHashes } from './hash/block-hash.js';
export type { StoredBlocksOptions } from './hash/stored-blocks.js';
export type { JsonValue, JsonObject } from './protocol/json-value.js';
export type { SnapshotWriter } from './protocol/snapshot-writer.js';
export type { RadixTreeOptions } from './tree/radix-tree.js';
export type { DumpSink } from './tree/dump.js';
export type { Indexer, IndexerEvents, ReadsPastWriter } from './indexer/indexer.js';
export type { ShardedIndexerOptions } from './indexer/sharded-indexer.js';
export type { ShardStats } from './shard/wire/messages.js';
export type { KvRouterOptions, RouteOptions, RouteDecision, RouterIndex } from './router/kv-router.js';
export type { RoutingCost, RoutingPresetName } from './router/presets.js';
export type {
  WorkerCandidate,
  CandidateLoad,
  TieredOverlap,
  RouteOverrides,
  SelectorConfig,
  SelectionRequest,
  Selection,
  TimeCost,
} from './router/select-worker.js';
export type {
  ActiveSequencesOptions,
  AddRequestOptions,
  SequenceLoad,
  ActiveSequencesStats,
} from './router/active-sequences.js';
export type { ApproxIndexOptions, ApproxIndexStats, ApproxTarget } from './router/approx-index.js';
export type { ActiveSequenceEvent, ActiveSequenceEventData } from './router/sequence-event.js';
export type { RandomSource } from './router/random.js';
