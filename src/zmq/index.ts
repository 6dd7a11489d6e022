/**
 * kvindex/zmq: engine KV events from vLLM and SGLang over ZMQ (their native publishers), into
 * per-(model, tenant) indexes with data-parallel ranks and storage tiers. A separate entry
 * point: `zeromq` and `@msgpack/msgpack` are optional dependencies loaded on first use.
 * Curated like src/index.ts: everything not listed here is internal.
 */

// Values
export { ZmqKvSource, SourceState } from './source.js';
export { RankState, StateReason, READMIT_AFTER_MS } from './source-health.js';
export { DROP_LOG_INTERVAL_MS } from './drop-log.js';
export { EngineIndex } from './engine-index.js';
export { EventConverter, StorageTier, SkipReason, tierOf } from './convert.js';
export { decodeBatch, decodeEvent, toHash } from './wire.js';
export { requestReplay } from './replay.js';
export { checkEndpoint, offsetEndpoint } from './endpoint.js';
export { loadZeromq, loadMsgpack } from './load.js';
export { ZmqError, ZmqErrorCode } from './errors.js';

// Types
export type { ZmqKvSourceOptions } from './source.js';
export type { ZmqSourceStats } from './source-stats.js';
export type { RankHealth } from './source-health.js';
export type { EngineIndexOptions, EngineScores, RankMap } from './engine-index.js';
export type { Converted } from './convert.js';
export type { EngineBatch, EngineEvent, EngineStored, EngineRemoved, EngineCleared, MsgpackDecoder } from './wire.js';
export type { ReplayedBatch } from './replay.js';
