/**
 * vLLM's (and SGLang's) KV event wire format, decoded: a batch is the msgpack array
 * `[ts, events, data_parallel_rank?]`; an event is a tagged array (`["BlockStored", ...]`,
 * vLLM up to 0.25 and SGLang, trailing fields optional) or, since vLLM 0.26, a map with a
 * `"type"` key and the same field names. Unknown keys and extra trailing elements are ignored.
 *
 * The msgpack decoder must be created with `useBigInt64: true`: the default one reads a u64
 * hash through a double (15760518052499183552 came back as 15760518052499184000). With it,
 * 64-bit integers arrive as `bigint` and smaller ones as `number`; both are accepted.
 * Hashes may be unsigned or signed 64-bit integers (read as the same 64 bits) or bytes (the
 * last 8 bytes, big-endian, as llm-d folds vLLM's raw sha256 digests).
 */

import { DirectBatchReader } from './direct-batch.js';
import { ZmqError, ZmqErrorCode } from './errors.js';
import { showValue } from '../protocol/show-value.js';

/** A `BlockStored` event as the engine sent it (hashes already folded to u64). */
export interface EngineStored {
  readonly kind: 'stored';
  readonly blockHashes: bigint[];
  readonly parentHash: bigint | null;
  readonly tokenIds: Uint32Array;
  readonly blockSize: number;
  readonly medium: string | null;
  readonly loraName: string | null;
  /** Per block, its extra keys (multimodal identifiers among them), as decoded. */
  readonly extraKeys: readonly unknown[] | null;
  readonly groupIdx: number | null;
  readonly specKind: string | null;
}

export interface EngineRemoved {
  readonly kind: 'removed';
  readonly blockHashes: bigint[];
  readonly medium: string | null;
  readonly groupIdx: number | null;
}

export interface EngineCleared {
  readonly kind: 'cleared';
}

export type EngineEvent = EngineStored | EngineRemoved | EngineCleared;

/** One decoded batch. `events[i]` is a `ZmqError` (`BadEvent`) where event i was malformed. */
export interface EngineBatch {
  /** The publisher's wall clock at publish time, in seconds (float). */
  readonly ts: number;
  readonly events: Array<EngineEvent | ZmqError>;
  /** `data_parallel_rank`, or null when the batch omits it (SGLang, older vLLM). */
  readonly dpRank: number | null;
}

/** The one method of a msgpack decoder used here (`new Decoder({ useBigInt64: true })`). */
export interface MsgpackDecoder {
  decode(bytes: Uint8Array): unknown;
}

// Positions of the fields in the array encoding (index 0 is the tag).
const STORED_POS = {
  block_hashes: 1,
  parent_block_hash: 2,
  token_ids: 3,
  block_size: 4,
  medium: 6,
  lora_name: 7,
  extra_keys: 8,
  group_idx: 9,
  kv_cache_spec_kind: 10,
} as const;
const REMOVED_POS = { block_hashes: 1, medium: 2, group_idx: 3 } as const;

const U64 = (1n << 64n) - 1n;
/** One reader per module: decodeBatch does not reenter (nothing in it calls back). */
const directReader = new DirectBatchReader();
const I64_MIN = -(1n << 63n);

/** Decodes a batch payload. Throws `ZmqError` `BadPayload` when the batch itself is malformed. */
export function decodeBatch(decoder: MsgpackDecoder, payload: Uint8Array): EngineBatch {
  // The usual shapes straight from the bytes (direct-batch.ts); anything else decoded generically.
  return directReader.read(payload) ?? decodeBatchGeneric(decoder, payload);
}

/**
 * `decodeBatch` through the msgpack decoder for every payload: the path of the shapes the direct
 * reader leaves (and its reference in tests and benchmarks).
 */
export function decodeBatchGeneric(decoder: MsgpackDecoder, payload: Uint8Array): EngineBatch {
  let raw: unknown;
  try {
    raw = decoder.decode(payload);
  } catch (err) {
    throw new ZmqError(ZmqErrorCode.BadPayload, `payload is not msgpack: ${(err as Error).message}`, { cause: err });
  }
  if (!Array.isArray(raw) || raw.length < 2) {
    throw new ZmqError(ZmqErrorCode.BadPayload, 'payload: expected the array [ts, events, data_parallel_rank?]');
  }
  const [ts, events, rank] = raw as [unknown, unknown, unknown];
  if (typeof ts !== 'number' && typeof ts !== 'bigint') throw new ZmqError(ZmqErrorCode.BadPayload, 'payload: ts is not a number');
  if (!Array.isArray(events)) throw new ZmqError(ZmqErrorCode.BadPayload, 'payload: events is not an array');
  let dpRank: number | null = null;
  if (rank !== undefined && rank !== null) {
    if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 0 || rank > 0xffff_ffff) {
      throw new ZmqError(ZmqErrorCode.BadPayload, `payload: data_parallel_rank ${String(rank)} is not a u32`);
    }
    dpRank = rank;
  }
  const out: Array<EngineEvent | ZmqError> = new Array(events.length);
  for (let i = 0; i < events.length; i++) {
    try {
      out[i] = decodeEvent(events[i]);
    } catch (err) {
      out[i] = err instanceof ZmqError ? err : new ZmqError(ZmqErrorCode.BadEvent, `event ${i}: ${String(err)}`);
    }
  }
  return { ts: Number(ts), events: out, dpRank };
}

/** Decodes one event (array or map encoding). Throws `ZmqError` `BadEvent`. */
export function decodeEvent(ev: unknown): EngineEvent {
  let tag: unknown;
  const arr = Array.isArray(ev);
  if (arr) {
    tag = ev[0];
  } else if (typeof ev === 'object' && ev !== null && !(ev instanceof Uint8Array)) {
    tag = field(ev, false, 'type', 0);
  } else {
    throw bad('an event must be a tagged array or a map with "type"');
  }
  switch (tag) {
    case 'BlockStored': {
      const blockHashes = hashList(field(ev, arr, 'block_hashes', STORED_POS.block_hashes), 'block_hashes');
      const parent = field(ev, arr, 'parent_block_hash', STORED_POS.parent_block_hash);
      return {
        kind: 'stored',
        blockHashes,
        parentHash: parent === null || parent === undefined ? null : toHash(parent, 'parent_block_hash'),
        tokenIds: tokens(field(ev, arr, 'token_ids', STORED_POS.token_ids)),
        blockSize: u32(field(ev, arr, 'block_size', STORED_POS.block_size), 'block_size'),
        medium: optString(field(ev, arr, 'medium', STORED_POS.medium), 'medium'),
        loraName: optString(field(ev, arr, 'lora_name', STORED_POS.lora_name), 'lora_name'),
        extraKeys: optList(field(ev, arr, 'extra_keys', STORED_POS.extra_keys), 'extra_keys'),
        groupIdx: optU32(field(ev, arr, 'group_idx', STORED_POS.group_idx), 'group_idx'),
        specKind: optString(field(ev, arr, 'kv_cache_spec_kind', STORED_POS.kv_cache_spec_kind), 'kv_cache_spec_kind'),
      };
    }
    case 'BlockRemoved':
      return {
        kind: 'removed',
        blockHashes: hashList(field(ev, arr, 'block_hashes', REMOVED_POS.block_hashes), 'block_hashes'),
        medium: optString(field(ev, arr, 'medium', REMOVED_POS.medium), 'medium'),
        groupIdx: optU32(field(ev, arr, 'group_idx', REMOVED_POS.group_idx), 'group_idx'),
      };
    case 'AllBlocksCleared':
      return { kind: 'cleared' };
    default:
      throw bad(`unknown event tag ${typeof tag === 'string' ? JSON.stringify(tag) : typeof tag}`);
  }
}

/**
 * A field of an event: element `pos` of the array encoding, or own key `name` of the map
 * encoding (a function, not a closure per event: one fewer object per event).
 */
function field(ev: object, arr: boolean, name: string, pos: number): unknown {
  if (arr) return (ev as unknown[])[pos];
  return Object.hasOwn(ev, name) ? (ev as Record<string, unknown>)[name] : undefined;
}

/**
 * A block hash as u64: an integer (signed i64 values are read as the same 64 bits) or bytes
 * (the last 8, big-endian; fewer than 8 are a big-endian number).
 */
export function toHash(v: unknown, field: string): bigint {
  if (typeof v === 'bigint') {
    if (v >= 0n && v <= U64) return v; // as decoded: no new bigint (the common case, a u64)
    if (v < I64_MIN) throw bad(`${field}: ${v} is outside 64 bits`);
    return BigInt.asUintN(64, v);
  }
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw bad(`${field}: ${v} is not an integer`);
    return BigInt.asUintN(64, BigInt(v));
  }
  if (v instanceof Uint8Array) {
    if (v.length === 0) throw bad(`${field}: empty bytes`);
    let h = 0n;
    for (let i = Math.max(0, v.length - 8); i < v.length; i++) h = (h << 8n) | BigInt(v[i]!);
    return h;
  }
  throw bad(`${field}: expected an integer or bytes, got ${v === null ? 'null' : typeof v}`);
}

function hashList(v: unknown, field: string): bigint[] {
  if (!Array.isArray(v)) throw bad(`${field}: expected a list`);
  const out = new Array<bigint>(v.length);
  for (let i = 0; i < v.length; i++) out[i] = toHash(v[i], `${field}[${i}]`);
  return out;
}

function tokens(v: unknown): Uint32Array {
  if (!Array.isArray(v)) throw bad('token_ids: expected a list');
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const t = v[i];
    // msgpack sends the smallest integer type, so a token id is a number; a bigint here is
    // either a u64-encoded small id or out of range.
    const n = typeof t === 'bigint' ? (t >= 0n && t <= 0xffff_ffffn ? Number(t) : -1) : t;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 0xffff_ffff) {
      throw bad(`token_ids[${i}]: expected a u32, got ${typeof t === 'object' ? (Array.isArray(t) ? 'a pair (EAGLE bigram tokens are not supported)' : 'an object') : showValue(t)}`);
    }
    out[i] = n;
  }
  return out;
}

function u32(v: unknown, field: string): number {
  const n = typeof v === 'bigint' && v >= 0n && v <= 0xffff_ffffn ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 0xffff_ffff) throw bad(`${field}: expected a u32, got ${showValue(v)}`);
  return n;
}

function optU32(v: unknown, field: string): number | null {
  return v === undefined || v === null ? null : u32(v, field);
}

function optString(v: unknown, field: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw bad(`${field}: expected a string or null`);
  return v;
}

function optList(v: unknown, field: string): readonly unknown[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw bad(`${field}: expected a list or null`);
  return v;
}

function bad(message: string): ZmqError {
  return new ZmqError(ZmqErrorCode.BadEvent, message);
}
