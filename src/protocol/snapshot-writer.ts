/**
 * Snapshot writers: serialise `Vec<RouterEvent>` straight into a growable byte buffer, in
 * Dynamo's bincode-1 layout (Dynamo reference §1.3), the same plus `dp_rank`, or JSON lines.
 *
 * The radix tree dumps one single-block Stored event per (node, worker) pair, a million of them
 * for a large tree, so the writer takes every u64 as two u32 halves (no `bigint` on that path)
 * and writes little-endian fields with a `DataView` (bincode) or ASCII digits (JSON lines,
 * see `u64-decimal.ts`) into one buffer that doubles when full. Each encoding is its own
 * subclass, chosen once by `createSnapshotWriter`, so no method branches on the encoding.
 *
 * Bytes per (worker, block) pair in bincode:
 *   single-block Stored event (what a dump emits): worker_id 8 + event_id 8 + variant 4 +
 *   option tag 1 + parent 8 (0 at the root) + block count 8 + block 16 = 53 bytes (45 at the
 *   root; +4 with dp_rank);
 *   chained multi-block Stored event: 16 bytes per extra block, a 3.3x smaller snapshot.
 * In JSON lines a single-block event with full-range hashes is ~196 bytes, an extra block ~70.
 *
 * Throughput, 1M single-block Stored events with full-range hashes and worker ids into a warm
 * (reused) writer, 2-core dev VM shared with other jobs, so ranges not points: bincode
 * 15-60 ms (17-65 M blocks/s), JSON lines 360-670 ms (1.5-2.7 M blocks/s; 5 u64 decimals per
 * event are most of it). Fresh memory is the expensive part on that VM (see `finishShared`
 * and `createSnapshotWriter`).
 */

import { ErrorCode, EventParseError, KvIndexError } from '../errors.js';
import type { RouterEvent, SnapshotEncoding } from './types.js';
import { U64_MAX } from './types.js';
import { U64_DECIMAL_MAX_BYTES, writeU64Decimal, writeUintDecimal } from './u64-decimal.js';

const TWO_32 = 4294967296;

// Splitting a bigint into u32 halves through an aliased pair measured ~2 ns, against ~105 ns
// for `Number(v & 0xffffffffn)` plus `Number(v >> 32n)` (1M random u64s, 2-core dev VM).
// Typed arrays use the platform byte order.
const pair64 = new BigUint64Array(1);
const pair32 = new Uint32Array(pair64.buffer);
pair64[0] = 1n;
const LO = pair32[0] === 1 ? 0 : 1;
const HI = 1 - LO;

/** Checks that `value` is a u64 bigint and leaves its halves in `pair32[LO]`, `pair32[HI]`. */
function splitU64(value: unknown, field: string): void {
  if (typeof value !== 'bigint' || value < 0n || value > U64_MAX) {
    const shown = typeof value === 'bigint' ? `${value}n` : `${typeof value} ${String(value)}`;
    throw new EventParseError(ErrorCode.InvalidField, `${field}: expected a u64 bigint, found ${shown}`);
  }
  pair64[0] = value;
}

function checkDpRank(dpRank: unknown): void {
  if (dpRank === undefined) return;
  if (typeof dpRank !== 'number' || !Number.isInteger(dpRank) || dpRank < 0 || dpRank > 0xffffffff) {
    throw new EventParseError(
      ErrorCode.InvalidField,
      `dpRank: expected a u32 integer, found ${typeof dpRank} ${String(dpRank)}`,
    );
  }
}

function misuse(message: string): KvIndexError {
  return new KvIndexError(ErrorCode.InvalidOption, `snapshot writer: ${message}`);
}

/**
 * A growable byte buffer that serialises a snapshot (`Vec<RouterEvent>`) event by event.
 * Create one with `createSnapshotWriter`.
 *
 * u64 values (worker ids, hashes) are passed as u32 halves `lo`, `hi` (value = hi * 2^32 + lo);
 * the hot-path methods do not check them, so callers must pass u32 integers. `writeEvent` is
 * the checked, bigint-based entry point.
 *
 * Event ids: `beginStored`, `removed` and `cleared` number their event with the running
 * `eventCount` (0, 1, 2, ... as a Dynamo dump does); `writeEvent` writes the event's own
 * `eventId`. Either way `eventCount` grows by one per event.
 *
 * `dpRank`: plain bincode ignores it, bincode-dp writes `dpRank ?? 0`, JSON lines writes
 * `"dp_rank":N` only when it is given.
 *
 * Misuse (a second `beginStored` before `endStored`, `block` with no open Stored event, `finish`
 * with one open) throws `KvIndexError` with `InvalidOption`.
 */
export abstract class SnapshotWriter {
  readonly encoding: SnapshotEncoding;
  protected buf: Uint8Array;
  protected view: DataView;
  /** Next byte to write. */
  protected pos: number;
  /** Complete events written so far (an open Stored event is not counted yet). */
  protected count: number;
  /** Where the open Stored event's blocks start (encoding-specific); -1 when none is open. */
  protected openAt: number;
  /** Where the buffer starts after a `finish` (bincode reserves the leading u64 count). */
  private readonly startPos: number;

  protected constructor(encoding: SnapshotEncoding, initialBytes: number, startPos: number) {
    this.encoding = encoding;
    this.buf = new Uint8Array(initialBytes);
    this.view = new DataView(this.buf.buffer);
    this.pos = startPos;
    this.count = 0;
    this.openAt = -1;
    this.startPos = startPos;
  }

  /** Number of complete events written since creation or the last `finish`. */
  get eventCount(): number {
    return this.count;
  }

  /** Bytes written so far (before `finish` patches anything). */
  get byteLength(): number {
    return this.pos;
  }

  /**
   * Starts a Stored event of worker `hi * 2^32 + lo` with event id `eventCount`; `parentLo` and
   * `parentHi` are ignored when `hasParent` is false. Follow with `block` calls and `endStored`.
   */
  beginStored(
    workerLo: number,
    workerHi: number,
    hasParent: boolean,
    parentLo: number,
    parentHi: number,
  ): void {
    const id = this.count;
    const idLo = id >>> 0;
    this.openStored(workerLo, workerHi, idLo, (id - idLo) / TWO_32, hasParent, parentLo, parentHi);
  }

  /** Appends one block (external block hash, tokens hash) to the open Stored event. */
  abstract block(blockLo: number, blockHi: number, tokensLo: number, tokensHi: number): void;

  /** Closes the open Stored event (see the class comment for `dpRank`). */
  abstract endStored(dpRank?: number): void;

  /**
   * Writes a Removed event of worker `hi * 2^32 + lo` with event id `eventCount`. Hashes in a
   * plain array are checked to be u64 bigints (`EventParseError` `InvalidField`).
   */
  removed(
    workerLo: number,
    workerHi: number,
    hashes: BigUint64Array | readonly bigint[],
    dpRank?: number,
  ): void {
    const id = this.count;
    const idLo = id >>> 0;
    this.writeRemoved(workerLo, workerHi, idLo, (id - idLo) / TWO_32, hashes, dpRank);
  }

  /** Writes a Cleared event of worker `hi * 2^32 + lo` with event id `eventCount`. */
  cleared(workerLo: number, workerHi: number, dpRank?: number): void {
    const id = this.count;
    const idLo = id >>> 0;
    this.writeCleared(workerLo, workerHi, idLo, (id - idLo) / TWO_32, dpRank);
  }

  /**
   * Writes one event with its own `eventId`, after checking every field: u64 bigints for ids
   * and hashes, a u32 integer for `dpRank`, a known `data.type`. Throws `EventParseError`
   * (`InvalidField`, `UnknownVariant`) and leaves the writer as it was before the call.
   */
  writeEvent(event: RouterEvent): void {
    if (this.openAt >= 0) throw misuse('writeEvent while a Stored event is open');
    const mark = this.pos;
    try {
      splitU64(event.workerId, 'workerId');
      const wLo = pair32[LO]!;
      const wHi = pair32[HI]!;
      const ev = event.event;
      splitU64(ev.eventId, 'event.eventId');
      const idLo = pair32[LO]!;
      const idHi = pair32[HI]!;
      const dpRank = ev.dpRank;
      checkDpRank(dpRank);
      const data = ev.data;
      switch (data.type) {
        case 'stored': {
          const parent = data.parentHash;
          let pLo = 0;
          let pHi = 0;
          if (parent !== null) {
            splitU64(parent, 'parentHash');
            pLo = pair32[LO]!;
            pHi = pair32[HI]!;
          }
          this.openStored(wLo, wHi, idLo, idHi, parent !== null, pLo, pHi);
          const blocks = data.blocks;
          for (let i = 0; i < blocks.length; i++) {
            const b = blocks[i]!;
            splitU64(b.blockHash, `blocks[${i}].blockHash`);
            const bLo = pair32[LO]!;
            const bHi = pair32[HI]!;
            splitU64(b.tokensHash, `blocks[${i}].tokensHash`);
            this.block(bLo, bHi, pair32[LO]!, pair32[HI]!);
          }
          this.endStored(dpRank);
          break;
        }
        case 'removed':
          this.writeRemoved(wLo, wHi, idLo, idHi, data.blockHashes, dpRank);
          break;
        case 'cleared':
          this.writeCleared(wLo, wHi, idLo, idHi, dpRank);
          break;
        default:
          throw new EventParseError(
            ErrorCode.UnknownVariant,
            'event.data.type: expected stored, removed or cleared, found ' +
              String((data as { type: unknown }).type),
          );
      }
    } catch (err) {
      // Roll back a half-written event; `count` only moves once an event is complete.
      this.pos = mark;
      this.openAt = -1;
      throw err;
    }
  }

  /**
   * Completes the snapshot (bincode: patches the leading event count) and returns a tight copy
   * of exactly its bytes, whose `.buffer` can be transferred to another thread. The writer is
   * then empty again and keeps its grown buffer for the next dump.
   */
  finish(): Uint8Array {
    return this.finishShared().slice();
  }

  /**
   * Like `finish`, but returns a view of the writer's own buffer instead of a copy: valid only
   * until the next write to this writer, which overwrites it. Copying 52 MB (a million
   * single-block events) into fresh memory measured 170-670 ms on the 2-core dev VM, where
   * first-touch page faults are expensive, against 15-60 ms for writing the events; callers
   * that upload or decode the bytes before the next dump should use this.
   */
  finishShared(): Uint8Array {
    if (this.openAt >= 0) throw misuse('finish while a Stored event is open');
    this.finishHeader();
    const out = this.buf.subarray(0, this.pos);
    this.pos = this.startPos;
    this.count = 0;
    return out;
  }

  protected abstract openStored(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    hasParent: boolean,
    parentLo: number,
    parentHi: number,
  ): void;

  protected abstract writeRemoved(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    hashes: BigUint64Array | readonly bigint[],
    dpRank: number | undefined,
  ): void;

  protected abstract writeCleared(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    dpRank: number | undefined,
  ): void;

  protected abstract finishHeader(): void;

  /** Makes room for `need` more bytes by doubling the buffer. */
  protected grow(need: number): void {
    let size = this.buf.length * 2;
    while (size < this.pos + need) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
}

/** Most bytes of a Stored event before its blocks: 8 + 8 + 4 + 1 + 8 + 8. */
const BINCODE_STORED_HEAD = 37;

/** Dynamo PR-era bincode-1 fixint little-endian layout, without `dp_rank`. */
class BincodeWriter extends SnapshotWriter {
  constructor(encoding: SnapshotEncoding, initialBytes: number) {
    super(encoding, initialBytes, 8);
  }

  protected openStored(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    hasParent: boolean,
    parentLo: number,
    parentHi: number,
  ): void {
    if (this.openAt >= 0) throw misuse('beginStored while a Stored event is open');
    if (this.pos + BINCODE_STORED_HEAD > this.buf.length) this.grow(BINCODE_STORED_HEAD);
    const v = this.view;
    let p = this.pos;
    v.setUint32(p, workerLo, true);
    v.setUint32(p + 4, workerHi, true);
    v.setUint32(p + 8, idLo, true);
    v.setUint32(p + 12, idHi, true);
    v.setUint32(p + 16, 0, true); // variant Stored
    if (hasParent) {
      this.buf[p + 20] = 1;
      v.setUint32(p + 21, parentLo, true);
      v.setUint32(p + 25, parentHi, true);
      p += 29;
    } else {
      this.buf[p + 20] = 0;
      p += 21;
    }
    this.openAt = p; // the block count, patched by endStored
    this.pos = p + 8;
  }

  block(blockLo: number, blockHi: number, tokensLo: number, tokensHi: number): void {
    if (this.openAt < 0) throw misuse('block with no open Stored event');
    const p = this.pos;
    if (p + 16 > this.buf.length) this.grow(16);
    const v = this.view;
    v.setUint32(p, blockLo, true);
    v.setUint32(p + 4, blockHi, true);
    v.setUint32(p + 8, tokensLo, true);
    v.setUint32(p + 12, tokensHi, true);
    this.pos = p + 16;
  }

  endStored(dpRank?: number): void {
    const at = this.openAt;
    if (at < 0) throw misuse('endStored with no open Stored event');
    const n = (this.pos - at - 8) / 16;
    this.view.setUint32(at, n, true);
    this.view.setUint32(at + 4, 0, true); // a buffer below 64 GiB holds fewer than 2^32 blocks
    this.openAt = -1;
    this.writeDpRank(dpRank);
    this.count++;
  }

  protected writeRemoved(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    hashes: BigUint64Array | readonly bigint[],
    dpRank: number | undefined,
  ): void {
    if (this.openAt >= 0) throw misuse('removed while a Stored event is open');
    const n = hashes.length;
    const need = 28 + 8 * n;
    if (this.pos + need > this.buf.length) this.grow(need);
    const v = this.view;
    let p = this.pos;
    v.setUint32(p, workerLo, true);
    v.setUint32(p + 4, workerHi, true);
    v.setUint32(p + 8, idLo, true);
    v.setUint32(p + 12, idHi, true);
    v.setUint32(p + 16, 1, true); // variant Removed
    v.setUint32(p + 20, n, true);
    v.setUint32(p + 24, 0, true);
    p += 28;
    if (hashes instanceof BigUint64Array) {
      for (let i = 0; i < n; i++, p += 8) v.setBigUint64(p, hashes[i]!, true);
    } else {
      for (let i = 0; i < n; i++, p += 8) {
        const h = hashes[i];
        splitU64(h, `blockHashes[${i}]`);
        v.setUint32(p, pair32[LO]!, true);
        v.setUint32(p + 4, pair32[HI]!, true);
      }
    }
    this.pos = p;
    this.writeDpRank(dpRank);
    this.count++;
  }

  protected writeCleared(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    dpRank: number | undefined,
  ): void {
    if (this.openAt >= 0) throw misuse('cleared while a Stored event is open');
    if (this.pos + 20 > this.buf.length) this.grow(20);
    const v = this.view;
    const p = this.pos;
    v.setUint32(p, workerLo, true);
    v.setUint32(p + 4, workerHi, true);
    v.setUint32(p + 8, idLo, true);
    v.setUint32(p + 12, idHi, true);
    v.setUint32(p + 16, 2, true); // variant Cleared
    this.pos = p + 20;
    this.writeDpRank(dpRank);
    this.count++;
  }

  /** Plain bincode has no dp_rank field. */
  protected writeDpRank(_dpRank: number | undefined): void {}

  protected finishHeader(): void {
    const n = this.count;
    const lo = n >>> 0;
    this.view.setUint32(0, lo, true);
    this.view.setUint32(4, (n - lo) / TWO_32, true);
  }
}

/** Bincode after Dynamo `f978f4d1` (2025-10-15): `dp_rank` u32 LE after `data`. */
class BincodeDpWriter extends BincodeWriter {
  protected override writeDpRank(dpRank: number | undefined): void {
    if (this.pos + 4 > this.buf.length) this.grow(4);
    this.view.setUint32(this.pos, dpRank ?? 0, true);
    this.pos += 4;
  }
}

/**
 * An ASCII constant packed into little-endian u32 words. `put` stores it four bytes at a time
 * and may write up to 3 bytes of padding past its end, which the next write overwrites (every
 * capacity check below adds `PAD`). Measured on the 2-core dev box, writing the 113 constant
 * bytes of a single-block Stored line: u32 words ~115 ns, a byte loop ~205 ns,
 * `Uint8Array.prototype.set` per constant ~230 ns.
 */
interface Ascii {
  readonly words: Uint32Array;
  readonly length: number;
}

function ascii(text: string): Ascii {
  const bytes = new TextEncoder().encode(text);
  const padded = new Uint8Array(Math.ceil(bytes.length / 4) * 4);
  padded.set(bytes);
  const view = new DataView(padded.buffer);
  const words = new Uint32Array(padded.length / 4);
  for (let i = 0; i < words.length; i++) words[i] = view.getUint32(4 * i, true);
  return { words, length: bytes.length };
}

/** Bytes `put` may write past a constant's end. */
const PAD = 3;

function put(view: DataView, p: number, text: Ascii): number {
  const words = text.words;
  for (let i = 0; i < words.length; i++) view.setUint32(p + 4 * i, words[i]!, true);
  return p + text.length;
}

const J_WORKER = ascii('{"worker_id":');
const J_EVENT_ID = ascii(',"event":{"event_id":');
const J_STORED = ascii(',"data":{"stored":{"parent_hash":');
const J_NULL = ascii('null');
const J_BLOCKS = ascii(',"blocks":[');
const J_BLOCK_HASH = ascii('{"block_hash":');
const J_TOKENS_HASH = ascii(',"tokens_hash":');
const J_END_DATA = ascii(']}}');
const J_REMOVED = ascii(',"data":{"removed":{"block_hashes":[');
const J_CLEARED = ascii(',"data":"cleared"');
const J_DP_RANK = ascii(',"dp_rank":');
const J_END_EVENT = ascii('}}\n');
const COMMA = 0x2c;
const CLOSE_BRACE = 0x7d;

/** Bytes of `{"worker_id":W,"event":{"event_id":N` at most. */
const JSON_HEAD_MAX = J_WORKER.length + J_EVENT_ID.length + 2 * U64_DECIMAL_MAX_BYTES;
/** Bytes of `]}},"dp_rank":D}}\n` at most, padding included. */
const JSON_TAIL_MAX = J_END_DATA.length + J_DP_RANK.length + 10 + J_END_EVENT.length + PAD;
/** Bytes of `,{"block_hash":B,"tokens_hash":T}` at most, padding included. */
const JSON_BLOCK_MAX =
  1 + J_BLOCK_HASH.length + J_TOKENS_HASH.length + 2 * U64_DECIMAL_MAX_BYTES + 1 + PAD;

/**
 * JSON lines: one compact serde-JSON RouterEvent per line, `\n`-terminated, fields in Dynamo's
 * declaration order (Dynamo reference §1.2).
 */
class JsonlWriter extends SnapshotWriter {
  constructor(initialBytes: number) {
    super('jsonl', initialBytes, 0);
  }

  /** Writes `{"worker_id":W,"event":{"event_id":N` at `p` (room checked by the caller). */
  private head(p: number, workerLo: number, workerHi: number, idLo: number, idHi: number): number {
    const buf = this.buf;
    const view = this.view;
    p = put(view, p, J_WORKER);
    p = writeU64Decimal(buf, p, workerLo, workerHi);
    p = put(view, p, J_EVENT_ID);
    return writeU64Decimal(buf, p, idLo, idHi);
  }

  /** Writes `]}}` when `closeData`, the optional dp_rank and `}}\n`; counts the event. */
  private tail(closeData: boolean, dpRank: number | undefined): void {
    if (this.pos + JSON_TAIL_MAX > this.buf.length) this.grow(JSON_TAIL_MAX);
    const view = this.view;
    let p = this.pos;
    if (closeData) p = put(view, p, J_END_DATA);
    if (dpRank !== undefined) {
      p = put(view, p, J_DP_RANK);
      p = writeUintDecimal(this.buf, p, dpRank);
    }
    this.pos = put(view, p, J_END_EVENT);
    this.count++;
  }

  protected openStored(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    hasParent: boolean,
    parentLo: number,
    parentHi: number,
  ): void {
    if (this.openAt >= 0) throw misuse('beginStored while a Stored event is open');
    const need = JSON_HEAD_MAX + J_STORED.length + U64_DECIMAL_MAX_BYTES + J_BLOCKS.length + PAD;
    if (this.pos + need > this.buf.length) this.grow(need);
    const view = this.view;
    let p = this.head(this.pos, workerLo, workerHi, idLo, idHi);
    p = put(view, p, J_STORED);
    p = hasParent ? writeU64Decimal(this.buf, p, parentLo, parentHi) : put(view, p, J_NULL);
    p = put(view, p, J_BLOCKS);
    this.openAt = p; // a block written here is the first one: no comma before it
    this.pos = p;
  }

  block(blockLo: number, blockHi: number, tokensLo: number, tokensHi: number): void {
    const at = this.openAt;
    if (at < 0) throw misuse('block with no open Stored event');
    if (this.pos + JSON_BLOCK_MAX > this.buf.length) this.grow(JSON_BLOCK_MAX);
    const buf = this.buf;
    const view = this.view;
    let p = this.pos;
    if (p !== at) buf[p++] = COMMA;
    p = put(view, p, J_BLOCK_HASH);
    p = writeU64Decimal(buf, p, blockLo, blockHi);
    p = put(view, p, J_TOKENS_HASH);
    p = writeU64Decimal(buf, p, tokensLo, tokensHi);
    buf[p] = CLOSE_BRACE;
    this.pos = p + 1;
  }

  endStored(dpRank?: number): void {
    if (this.openAt < 0) throw misuse('endStored with no open Stored event');
    this.openAt = -1;
    this.tail(true, dpRank);
  }

  protected writeRemoved(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    hashes: BigUint64Array | readonly bigint[],
    dpRank: number | undefined,
  ): void {
    if (this.openAt >= 0) throw misuse('removed while a Stored event is open');
    const n = hashes.length;
    const need = JSON_HEAD_MAX + J_REMOVED.length + n * (U64_DECIMAL_MAX_BYTES + 1) + PAD;
    if (this.pos + need > this.buf.length) this.grow(need);
    const buf = this.buf;
    let p = put(this.view, this.head(this.pos, workerLo, workerHi, idLo, idHi), J_REMOVED);
    for (let i = 0; i < n; i++) {
      if (i > 0) buf[p++] = COMMA;
      // A BigUint64Array element is always in range; a plain array element is checked.
      if (hashes instanceof BigUint64Array) pair64[0] = hashes[i]!;
      else splitU64(hashes[i], `blockHashes[${i}]`);
      p = writeU64Decimal(buf, p, pair32[LO]!, pair32[HI]!);
    }
    this.pos = p;
    this.tail(true, dpRank);
  }

  protected writeCleared(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    dpRank: number | undefined,
  ): void {
    if (this.openAt >= 0) throw misuse('cleared while a Stored event is open');
    const need = JSON_HEAD_MAX + J_CLEARED.length + PAD;
    if (this.pos + need > this.buf.length) this.grow(need);
    this.pos = put(this.view, this.head(this.pos, workerLo, workerHi, idLo, idHi), J_CLEARED);
    this.tail(false, dpRank);
  }

  protected finishHeader(): void {}
}

/** Smallest buffer a writer starts with, so every single write fits after one doubling. */
const MIN_INITIAL_BYTES = 256;

/**
 * Creates a snapshot writer for `encoding`, starting with a buffer of `initialBytes` bytes
 * (at least 256) that doubles as needed. Each doubling copies and touches fresh memory, so a
 * dump that knows its size should say so: in bincode, at most 8 + 53 * pairs bytes for `pairs`
 * single-block Stored events (57 with dp_rank); JSON lines needs up to ~200 bytes per event.
 * Throws `KvIndexError` `InvalidOption` for an unknown encoding or a non-integer / negative
 * size.
 */
export function createSnapshotWriter(
  encoding: SnapshotEncoding,
  initialBytes: number = 64 * 1024,
): SnapshotWriter {
  if (!Number.isSafeInteger(initialBytes) || initialBytes < 0) {
    throw new KvIndexError(
      ErrorCode.InvalidOption,
      `initialBytes: expected a non-negative integer, found ${String(initialBytes)}`,
    );
  }
  const size = Math.max(initialBytes, MIN_INITIAL_BYTES);
  switch (encoding) {
    case 'bincode':
      return new BincodeWriter(encoding, size);
    case 'bincode-dp':
      return new BincodeDpWriter(encoding, size);
    case 'jsonl':
      return new JsonlWriter(size);
    default:
      throw new KvIndexError(
        ErrorCode.InvalidOption,
        `encoding: expected 'bincode', 'bincode-dp' or 'jsonl', found ${String(encoding)}`,
      );
  }
}

/**
 * Serialises `events` as one snapshot, keeping each event's own `eventId`. Plain bincode drops
 * `dpRank`; bincode-dp writes `dpRank ?? 0`; JSON lines writes `"dp_rank"` only when present.
 * Throws `EventParseError` (`InvalidField`, `UnknownVariant`) for an event that cannot be
 * encoded, `KvIndexError` `InvalidOption` for an unknown encoding.
 */
export function encodeSnapshot(
  events: Iterable<RouterEvent>,
  encoding: SnapshotEncoding = 'bincode',
): Uint8Array {
  const estimate = Array.isArray(events) ? 64 * events.length : 64 * 1024;
  const writer = createSnapshotWriter(encoding, estimate);
  for (const event of events) writer.writeEvent(event);
  return writer.finish();
}
