/**
 * The event model, wire-compatible with NVIDIA Dynamo's KV router (see the Dynamo reference,
 * section 1.1). All hashes, event ids and worker ids are u64 values held as `bigint`, because
 * real ones exceed 2^53 and a `number` would silently round them.
 */

/** One block of a Stored event: the engine's external hash and the hash of its tokens. */
export interface StoredBlock {
  /** ExternalSequenceBlockHash: opaque per-worker identifier of the block (u64). */
  blockHash: bigint;
  /** LocalBlockHash: xxh3-64 of the block's tokens (u64); the tree is keyed by it. */
  tokensHash: bigint;
}

export type KvCacheEventData =
  | { type: 'stored'; parentHash: bigint | null; blocks: StoredBlock[] }
  | { type: 'removed'; blockHashes: bigint[] }
  | { type: 'cleared' };

export interface KvCacheEvent {
  /** u64; not used by the index, kept for logs and dumps. */
  eventId: bigint;
  data: KvCacheEventData;
  /** Data-parallel rank (u32), present in post-Oct-2025 producers; absent means 0. */
  dpRank?: number;
}

export interface RouterEvent {
  /** u64 worker id (an etcd lease id in Dynamo, typically above 2^53). */
  workerId: bigint;
  event: KvCacheEvent;
}

/** Result of a lookup: per-worker overlap in blocks, plus the optional frequency trail. */
export interface OverlapScores {
  /** worker id -> number of matched-path nodes that hold the worker; zeros are absent. */
  scores: Map<bigint, number>;
  /** Per visited node, its number of recent uses inside the expiration window (non-zero only). */
  frequencies: number[];
}

/** Outcome of applying one event, named as Dynamo's `kv_cache_events_applied` status labels. */
export const ApplyStatus = {
  Ok: 'ok',
  ParentBlockNotFound: 'parent_block_not_found',
  BlockNotFound: 'block_not_found',
  InvalidBlockSequence: 'invalid_block_sequence',
} as const;

export type ApplyStatus = (typeof ApplyStatus)[keyof typeof ApplyStatus];

/** Snapshot layouts: Dynamo's PR-era bincode (default), bincode with dp_rank, JSON lines. */
export type SnapshotEncoding = 'bincode' | 'bincode-dp' | 'jsonl';

/** Largest u64, the bound every hash and id is checked against. */
export const U64_MAX = 0xffff_ffff_ffff_ffffn;
