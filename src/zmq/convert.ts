/**
 * Engine events -> kvindex events, as Dynamo's `zmq_wire.rs` converts them:
 * - `block_hashes[i]` is block i's external hash, `parent_block_hash` its parent's;
 * - block i's tokens hash is `compute_block_hash_for_seq` of `token_ids[i*bs, (i+1)*bs)` with
 *   the event's LoRA name and the block's multimodal hashes (from `extra_keys`);
 * - an event whose `block_size` differs from the index's stores nothing (Dynamo stops at the
 *   first block of a mismatched size, and all blocks of an event share the size);
 * - a store that repeats a hash, its parent included, is rejected whole;
 * - blocks beyond the full blocks of `token_ids` are dropped (Dynamo's loop stops there too).
 * Tiers: `medium` maps to a storage tier; only `device` blocks count in device scores.
 * Hybrid models: a store of a KV cache group that is not full attention is skipped, and
 * removals for a group seen as such are skipped too (vLLM's block hashes are the same across
 * groups, so applying them would remove full-attention blocks).
 */

import { computeBlockHashes } from '../hash/block-hash.js';
import type { KvCacheEventData, StoredBlock } from '../protocol/types.js';
import type { EngineEvent, EngineStored } from './wire.js';

/** Storage tiers, named as Dynamo's `StorageTier`. */
export const StorageTier = {
  Device: 'device',
  HostPinned: 'host_pinned',
  Disk: 'disk',
  External: 'external',
} as const;

export type StorageTier = (typeof StorageTier)[keyof typeof StorageTier];

/**
 * `medium` -> tier: vLLM's `GPU`/`CPU`/`STORAGE` and Dynamo's names. Absent or unknown media
 * are the device tier, as in Dynamo.
 */
export function tierOf(medium: string | null): StorageTier {
  switch (medium) {
    case 'CPU':
    case 'CPU_PINNED':
    case 'CPU_TIER1':
      return StorageTier.HostPinned;
    case 'STORAGE':
    case 'CPU_TIER2':
    case 'DISK':
    case 'NVME':
      return StorageTier.Disk;
    case 'EXTERNAL':
    case 'NETWORK':
    case 'REMOTE':
    case 'SHARED':
      return StorageTier.External;
    default:
      return StorageTier.Device;
  }
}

/** Why a converted event applies nothing; each is counted by the source. */
export const SkipReason = {
  BlockSizeMismatch: 'block_size_mismatch',
  DuplicateHash: 'duplicate_hash',
  NonFullAttention: 'non_full_attention',
} as const;

export type SkipReason = (typeof SkipReason)[keyof typeof SkipReason];

export interface Converted {
  readonly tier: StorageTier;
  readonly data: KvCacheEventData;
}

/**
 * Per-source conversion state: the index's block size and the KV cache groups seen as not
 * full attention (their removals are skipped).
 */
export class EventConverter {
  readonly blockSize: number;
  readonly #skippedGroups = new Set<number>();

  constructor(blockSize: number) {
    this.blockSize = blockSize;
  }

  /** The event as a kvindex event with its tier, or the reason it applies nothing. */
  convert(ev: EngineEvent): Converted | SkipReason {
    switch (ev.kind) {
      case 'cleared':
        return { tier: StorageTier.Device, data: { type: 'cleared' } };
      case 'removed':
        if (ev.groupIdx !== null && this.#skippedGroups.has(ev.groupIdx)) return SkipReason.NonFullAttention;
        return { tier: tierOf(ev.medium), data: { type: 'removed', blockHashes: ev.blockHashes } };
      case 'stored':
        return this.#stored(ev);
    }
  }

  #stored(ev: EngineStored): Converted | SkipReason {
    if (ev.specKind !== null && ev.specKind !== 'full_attention') {
      if (ev.groupIdx !== null) this.#skippedGroups.add(ev.groupIdx);
      return SkipReason.NonFullAttention;
    }
    if (ev.blockSize !== this.blockSize) return SkipReason.BlockSizeMismatch;
    if (hasDuplicate(ev.blockHashes, ev.parentHash)) return SkipReason.DuplicateHash;
    const bs = this.blockSize;
    const n = Math.min(ev.blockHashes.length, Math.floor(ev.tokenIds.length / bs));
    const local = computeBlockHashes(ev.tokenIds.subarray(0, n * bs), bs, {
      loraName: ev.loraName,
      blockMmHashes: ev.extraKeys === null ? null : ev.extraKeys.slice(0, n).map(mmHashes),
    });
    const blocks = new Array<StoredBlock>(n);
    for (let i = 0; i < n; i++) blocks[i] = { blockHash: ev.blockHashes[i]!, tokensHash: local[i]! };
    return { tier: tierOf(ev.medium), data: { type: 'stored', parentHash: ev.parentHash, blocks } };
  }
}

function hasDuplicate(hashes: readonly bigint[], parent: bigint | null): boolean {
  const n = hashes.length;
  if (n <= SMALL_EVENT) {
    // Most events hold a few blocks: comparing pairs allocates nothing.
    for (let i = 0; i < n; i++) {
      const h = hashes[i]!;
      if (h === parent) return true;
      for (let j = i + 1; j < n; j++) if (hashes[j] === h) return true;
    }
    return false;
  }
  // Up to a few hundred blocks: a Set is cheaper than sorting a copy.
  const seen = new Set<bigint>(hashes);
  if (seen.size !== n) return true;
  return parent !== null && seen.has(parent);
}

/** Events up to this many blocks are checked for repeated hashes pair by pair. */
const SMALL_EVENT = 16;

const MM_ID = /^[0-9a-f]{64}$/i;

/**
 * The multimodal hashes of one block's extra keys: every 64-hex-digit identifier (the first
 * 16 digits as the u64, as Dynamo does), whether the key is the bare string, a tuple
 * `(identifier, offset)`, vLLM's tagged `MultiModalKey` as a map (`hash`) or as an array.
 */
function mmHashes(keys: unknown): bigint[] | null {
  if (!Array.isArray(keys)) return null;
  const out: bigint[] = [];
  for (const k of keys) {
    const id = mmIdentifier(k);
    if (id !== null) out.push(BigInt(`0x${id.slice(0, 16)}`));
  }
  return out.length === 0 ? null : out;
}

function mmIdentifier(k: unknown): string | null {
  if (typeof k === 'string') return MM_ID.test(k) ? k : null;
  if (Array.isArray(k)) {
    for (const part of k.slice(0, 3)) if (typeof part === 'string' && MM_ID.test(part)) return part;
    return null;
  }
  if (typeof k === 'object' && k !== null && !(k instanceof Uint8Array)) {
    const h = (k as Record<string, unknown>).hash;
    return typeof h === 'string' && MM_ID.test(h) ? h : null;
  }
  return null;
}
