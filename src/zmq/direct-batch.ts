/**
 * vLLM/SGLang KV event batches read straight from their msgpack bytes into `EngineBatch`, for
 * the shapes engines send: `[ts, [event, ...], rank?]` with tagged-array or map events whose
 * fields have the expected msgpack types (wire.ts describes the format). The generic decoder
 * first builds the whole payload as JS values (an object per map event, an array of numbers per
 * event's tokens, a string per string) and `decodeEvent` then builds the result from them: per
 * batch of the ZMQ bench (4 stores of 4 blocks and a removal, map events) that path left
 * 17.7-26.3 kB for the collector and took 13.7-19.7 us; read here, 3.8 kB and 8.7-11.0 us (two
 * runs, each side in the same run).
 *
 * Anything else returns null and `decodeBatch` takes the generic path, which gives the same
 * result or the same errors as before: a malformed event (it becomes a `ZmqError` there), a
 * string that is not printable ASCII, `extra_keys` that is not nil (multimodal blocks), a float
 * or 64-bit integer where the generic path converts or rejects it, an ext value, a repeated
 * key, deep nesting inside ignored values, or trailing bytes (msgpack-cursor.ts).
 * test/zmq-direct-batch.test.ts checks that on generated, edge and mutated payloads: wherever
 * this reader answers, its answer equals the generic path's.
 */

import { BIN16, BIN32, BIN8, intSize, MsgpackCursor, NO, UINT16, UINT32, UINT64, UINT8, INT8, INT16, INT32, ARRAY16, ARRAY32 } from './msgpack-cursor.js';
import type { EngineBatch, EngineEvent } from './wire.js';

/** Strings engines send, returned as these constants instead of a new string each time. */
const KNOWN_STRINGS = ['BlockStored', 'BlockRemoved', 'AllBlocksCleared', 'GPU', 'CPU', 'full_attention'];

/** An event's fields, as map keys name them. */
const enum Field {
  Unknown,
  Type,
  BlockHashes,
  Parent,
  TokenIds,
  BlockSize,
  Medium,
  LoraName,
  ExtraKeys,
  GroupIdx,
  SpecKind,
}
const FIELD_COUNT = 11;
const KEY_NAMES = ['', 'type', 'block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'medium', 'lora_name',
  'extra_keys', 'group_idx', 'kv_cache_spec_kind'];
/** Array positions (index 0 is the tag), as wire.ts's STORED_POS and REMOVED_POS. */
const STORED_ORDER = [Field.Type, Field.BlockHashes, Field.Parent, Field.TokenIds, Field.BlockSize, Field.Unknown,
  Field.Medium, Field.LoraName, Field.ExtraKeys, Field.GroupIdx, Field.SpecKind];
const REMOVED_ORDER = [Field.Type, Field.BlockHashes, Field.Medium, Field.GroupIdx];

export class DirectBatchReader {
  private readonly m = new MsgpackCursor();
  // One event's fields while it is read (reset per event).
  private readonly seen = new Uint8Array(FIELD_COUNT);
  private hashes: bigint[] | null = null;
  private parent: bigint | null = null;
  private tokens: Uint32Array | null = null;
  private blockSize = NO;
  private medium: string | null = null;
  private loraName: string | null = null;
  private groupIdx: number | null = null;
  private specKind: string | null = null;
  private tag: string | null = null;

  /** The batch, or null to take the generic path. */
  read(payload: Uint8Array): EngineBatch | null {
    this.m.load(payload);
    try {
      return this.batch();
    } finally {
      this.m.release();
      this.hashes = null;
      this.tokens = null;
    }
  }

  private batch(): EngineBatch | null {
    const m = this.m;
    const top = m.arrayHeader();
    if (top !== 2 && top !== 3) return null;
    const ts = m.number();
    if (ts === null) return null;
    const n = m.arrayHeader();
    if (n < 0) return null;
    const events = new Array<EngineEvent>(n);
    for (let i = 0; i < n; i++) {
      const e = this.event();
      if (e === null) return null;
      events[i] = e;
    }
    let dpRank: number | null = null;
    if (top === 3 && !m.nil()) {
      dpRank = m.smallUint();
      if (dpRank === NO) return null;
    }
    if (m.p !== m.end) return null;
    return { ts, events, dpRank };
  }

  private event(): EngineEvent | null {
    const m = this.m;
    this.seen.fill(0);
    this.hashes = null;
    this.parent = null;
    this.tokens = null;
    this.blockSize = NO;
    this.medium = null;
    this.loraName = null;
    this.groupIdx = null;
    this.specKind = null;
    this.tag = null;
    const c = m.byte();
    if ((c & 0xf0) === 0x90 || c === ARRAY16 || c === ARRAY32) {
      const n = m.arrayHeader();
      if (n < 1 || !this.field(Field.Type)) return null;
      const order = this.tag === 'BlockStored' ? STORED_ORDER : this.tag === 'BlockRemoved' ? REMOVED_ORDER : null;
      for (let i = 1; i < n; i++) {
        if (!this.field(order !== null && i < order.length ? order[i]! : Field.Unknown)) return null;
      }
    } else {
      const n = m.mapHeader();
      if (n < 0) return null;
      for (let i = 0; i < n; i++) {
        const f = this.key();
        if (f === null || !this.field(f)) return null;
      }
    }
    return this.built();
  }

  /** The event read, or null when it is not one this reader builds (the generic path decides). */
  private built(): EngineEvent | null {
    switch (this.tag) {
      case 'BlockStored':
        if (this.hashes === null || this.tokens === null || this.blockSize === NO) return null;
        return {
          kind: 'stored', blockHashes: this.hashes, parentHash: this.parent, tokenIds: this.tokens,
          blockSize: this.blockSize, medium: this.medium, loraName: this.loraName, extraKeys: null,
          groupIdx: this.groupIdx, specKind: this.specKind,
        };
      case 'BlockRemoved':
        if (this.hashes === null) return null;
        return { kind: 'removed', blockHashes: this.hashes, medium: this.medium, groupIdx: this.groupIdx };
      case 'AllBlocksCleared':
        return { kind: 'cleared' };
      default:
        return null;
    }
  }

  /** Reads one field's value; false to take the generic path. */
  private field(f: Field): boolean {
    const m = this.m;
    if (f !== Field.Unknown) {
      if (this.seen[f] !== 0) return false; // a repeated key: the generic path keeps the last
      this.seen[f] = 1;
    }
    switch (f) {
      case Field.Unknown:
        return m.skip();
      case Field.Type:
        this.tag = m.ascii(KNOWN_STRINGS);
        return this.tag !== null;
      case Field.BlockHashes:
        this.hashes = this.hashList();
        return this.hashes !== null;
      case Field.Parent:
        if (m.nil()) return true;
        this.parent = this.hash();
        return this.parent !== null;
      case Field.TokenIds:
        this.tokens = this.tokenList();
        return this.tokens !== null;
      case Field.BlockSize:
        this.blockSize = m.smallUint();
        return this.blockSize !== NO;
      case Field.Medium:
        if (m.nil()) return true;
        this.medium = m.ascii(KNOWN_STRINGS);
        return this.medium !== null;
      case Field.LoraName:
        if (m.nil()) return true;
        this.loraName = m.ascii(KNOWN_STRINGS);
        return this.loraName !== null;
      case Field.SpecKind:
        if (m.nil()) return true;
        this.specKind = m.ascii(KNOWN_STRINGS);
        return this.specKind !== null;
      case Field.ExtraKeys:
        return m.nil(); // a list: the generic path reads its keys
      case Field.GroupIdx:
        if (m.nil()) return true;
        this.groupIdx = m.smallUint();
        return this.groupIdx !== NO;
    }
  }

  /** A map key (a printable ASCII string) as a field; null to take the generic path. */
  private key(): Field | null {
    const m = this.m;
    const len = m.strHeader();
    if (len < 0) return null;
    const at = m.p;
    m.p += len;
    for (let f = 1; f < FIELD_COUNT; f++) if (m.bytesAre(at, len, KEY_NAMES[f]!)) return f as Field;
    if (!m.printable(at, len) || m.bytesAre(at, len, '__proto__')) return null;
    return Field.Unknown;
  }

  private hashList(): bigint[] | null {
    const n = this.m.arrayHeader();
    if (n < 0) return null;
    const out = new Array<bigint>(n);
    for (let i = 0; i < n; i++) {
      const h = this.hash();
      if (h === null) return null;
      out[i] = h;
    }
    return out;
  }

  /**
   * A block hash as u64, as wire.ts's toHash reads what the generic decoder gives: an integer
   * of any width (negative ones as the same 64 bits), or bytes (the last 8, big-endian); null
   * for anything else (empty bytes, floats).
   */
  private hash(): bigint | null {
    const m = this.m;
    const c = m.byte();
    const p = m.p;
    if (c < 0) return null;
    if (c <= 0x7f || c >= 0xe0) {
      m.p++;
      return c <= 0x7f ? BigInt(c) : BigInt.asUintN(64, BigInt(c - 0x100));
    }
    const size = intSize(c);
    if (size > 0) {
      if (p + 1 + size > m.end) return null;
      m.p += 1 + size;
      const v = m.view;
      switch (c) {
        case UINT8: return BigInt(v.getUint8(p + 1));
        case UINT16: return BigInt(v.getUint16(p + 1));
        case UINT32: return BigInt(v.getUint32(p + 1));
        case UINT64: return v.getBigUint64(p + 1);
        case INT8: return BigInt.asUintN(64, BigInt(v.getInt8(p + 1)));
        case INT16: return BigInt.asUintN(64, BigInt(v.getInt16(p + 1)));
        case INT32: return BigInt.asUintN(64, BigInt(v.getInt32(p + 1)));
        default: return BigInt.asUintN(64, v.getBigInt64(p + 1));
      }
    }
    if (c !== BIN8 && c !== BIN16 && c !== BIN32) return null;
    const len = m.binHeader();
    if (len <= 0) return null;
    const at = m.p;
    m.p += len;
    let h = 0n;
    for (let i = Math.max(0, len - 8); i < len; i++) h = (h << 8n) | BigInt(m.b[at + i]!);
    return h;
  }

  private tokenList(): Uint32Array | null {
    const m = this.m;
    const n = m.arrayHeader();
    if (n < 0) return null;
    const out = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const t = m.smallUint();
      if (t === NO) return null;
      out[i] = t;
    }
    return out;
  }
}
