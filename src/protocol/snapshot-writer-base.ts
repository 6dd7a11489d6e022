/**
 * The base of the snapshot writers (see snapshot-writer.ts for the layouts and figures): a
 * growable byte buffer, event numbering, and the checked bigint entry point `writeEvent`.
 */

import { ErrorCode, EventParseError, KvIndexError } from '../errors.js';
import type { RouterEvent, SnapshotEncoding } from './types.js';
import { U64_MAX } from './types.js';
import { showValue } from './show-value.js';


export const TWO_32 = 4294967296;

// Splitting a bigint into u32 halves through an aliased pair measured ~2 ns, against ~105 ns
// for `Number(v & 0xffffffffn)` plus `Number(v >> 32n)` (1M random u64s, 2-core dev VM).
// Typed arrays use the platform byte order.
export const pair64 = new BigUint64Array(1);
export const pair32 = new Uint32Array(pair64.buffer);
pair64[0] = 1n;
export const LO = pair32[0] === 1 ? 0 : 1;
export const HI = 1 - LO;

/** Checks that `value` is a u64 bigint and leaves its halves in `pair32[LO]`, `pair32[HI]`. */
export function splitU64(value: unknown, field: string): void {
  if (typeof value !== 'bigint' || value < 0n || value > U64_MAX) {
    const shown = typeof value === 'bigint' ? `${value}n` : `${typeof value} ${showValue(value)}`;
    throw new EventParseError(ErrorCode.InvalidField, `${field}: expected a u64 bigint, found ${shown}`);
  }
  pair64[0] = value;
}

export function checkDpRank(dpRank: unknown): void {
  if (dpRank === undefined) return;
  if (typeof dpRank !== 'number' || !Number.isInteger(dpRank) || dpRank < 0 || dpRank > 0xffffffff) {
    throw new EventParseError(
      ErrorCode.InvalidField,
      `dpRank: expected a u32 integer, found ${typeof dpRank} ${String(dpRank)}`,
    );
  }
}

export function misuse(message: string): KvIndexError {
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

  /** Bytes the buffer holds before it has to grow (a writer kept for reuse is checked on it). */
  get capacity(): number {
    return this.buf.length;
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
