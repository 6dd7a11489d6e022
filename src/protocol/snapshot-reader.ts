/**
 * Snapshot decoders: bytes in one of the `SnapshotEncoding` layouts back to `RouterEvent`s.
 *
 * Bincode input is untrusted (it comes from an object store), so every read is bounds-checked
 * and every announced count is checked against the bytes that remain *before* anything is
 * allocated: a corrupt block count of 2^40 fails at once instead of allocating. Failures are
 * `SnapshotDecodeError`s whose message names the field, the event index and the byte offset.
 *
 * Unlike Dynamo's `bincode::deserialize` (bincode 1 legacy options allow trailing bytes), we
 * reject bytes after the last event: in practice they mean a corrupt object or the wrong
 * layout (a bincode-dp snapshot read as plain bincode usually parses its first events and then
 * stops short), and silently ignoring them would hide that.
 */

import { ErrorCode, EventParseError, KvIndexError, SnapshotDecodeError } from '../errors.js';
import { parseRouterEvent } from './json-parse.js';
import { showValue } from './show-value.js';
import type { KvCacheEventData, RouterEvent, SnapshotEncoding, StoredBlock } from './types.js';

/** Smallest event in plain bincode: worker_id 8 + event_id 8 + variant 4 (Cleared). */
export const BINCODE_MIN_EVENT_BYTES = 20;
/** Smallest event in bincode-dp: the above + dp_rank 4. */
export const BINCODE_DP_MIN_EVENT_BYTES = 24;

/**
 * A bounds-checked little-endian reader over snapshot bytes. `label` prefixes messages (the
 * merge names the part); `event` is the index of the event being read, for messages; `what`
 * names the format in them (the binary peer dump, src/http/dump-binary.ts, reads its small
 * fields with this cursor too).
 */
export class BincodeCursor {
  readonly bytes: Uint8Array;
  readonly view: DataView;
  readonly label: string;
  pos: number;
  event: number;

  constructor(bytes: Uint8Array, label: string, private readonly what = 'snapshot') {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.label = label;
    this.pos = 0;
    this.event = -1;
  }

  get remaining(): number {
    return this.bytes.length - this.pos;
  }

  /** Throws `SnapshotTruncated` unless `n` more bytes are available. */
  need(n: number, field: string): void {
    if (this.pos + n > this.bytes.length) {
      throw this.fail(
        ErrorCode.SnapshotTruncated,
        `truncated at byte ${this.pos} reading ${field}${this.where()}: ` +
          `need ${n} bytes, ${this.remaining} remain`,
      );
    }
  }

  u8(field: string): number {
    this.need(1, field);
    return this.bytes[this.pos++]!;
  }

  u32(field: string): number {
    this.need(4, field);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }

  u64(field: string): bigint {
    this.need(8, field);
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return v;
  }

  skip(n: number, field: string): void {
    this.need(n, field);
    this.pos += n;
  }

  /** A u8 that must be 0 or 1 (`SnapshotBadTag` otherwise). */
  flag(field: string): boolean {
    const at = this.pos;
    const v = this.u8(field);
    if (v > 1) throw this.badTag(at, field, v, '0 or 1');
    return v === 1;
  }

  /**
   * Reads a u32 element count and checks that `count * elementBytes` fits in the remaining
   * bytes (`SnapshotBadCount` otherwise), as `count` does for bincode's u64 counts.
   */
  count32(elementBytes: number, field: string): number {
    const at = this.pos;
    const n = this.u32(field);
    if (n * elementBytes > this.remaining) throw this.badCount(at, field, BigInt(n), elementBytes);
    return n;
  }

  /** A UTF-8 string after its u32 byte length. */
  str(field: string): string {
    const n = this.count32(1, `${field} length`);
    const s = Buffer.from(this.bytes.buffer, this.bytes.byteOffset + this.pos, n).toString('utf8');
    this.pos += n;
    return s;
  }

  /**
   * Reads a u64 element count and checks that `count * elementBytes` fits in the remaining
   * bytes (`SnapshotBadCount` otherwise), before the caller allocates anything for it.
   */
  count(elementBytes: number, field: string): number {
    const at = this.pos;
    this.need(8, field);
    const lo = this.view.getUint32(at, true);
    const hi = this.view.getUint32(at + 4, true);
    this.pos = at + 8;
    // Inexact above 2^53, but then the product is far beyond any buffer, as it should be.
    const n = hi * 4294967296 + lo;
    if (n * elementBytes > this.remaining) throw this.badCount(at, field, (BigInt(hi) << 32n) | BigInt(lo), elementBytes);
    return n;
  }

  private badCount(at: number, field: string, n: bigint, elementBytes: number): SnapshotDecodeError {
    return this.fail(
      ErrorCode.SnapshotBadCount,
      `bad count at byte ${at} in ${field}${this.where()}: ${n} elements of at least ` +
        `${elementBytes} bytes cannot fit in the ${this.remaining} bytes that remain`,
    );
  }

  badTag(at: number, field: string, tag: number, expected: string): SnapshotDecodeError {
    return this.fail(
      ErrorCode.SnapshotBadTag,
      `bad tag at byte ${at} in ${field}${this.where()}: ${tag}, expected ${expected}`,
    );
  }

  /** Throws `SnapshotTrailingBytes` unless the cursor is at the end. */
  expectEnd(events: number): void {
    if (this.pos !== this.bytes.length) {
      throw this.fail(
        ErrorCode.SnapshotTrailingBytes,
        `${this.remaining} trailing bytes at byte ${this.pos}, after the last of ${events} events`,
      );
    }
  }

  fail(code: ErrorCode, message: string): SnapshotDecodeError {
    return new SnapshotDecodeError(code, `${this.label}${this.what} ${message}`);
  }

  private where(): string {
    return this.event >= 0 ? ` of event ${this.event}` : '';
  }
}

/** Reads the leading u64 event count of a bincode snapshot. */
export function readEventCount(c: BincodeCursor, withDp: boolean): number {
  return c.count(withDp ? BINCODE_DP_MIN_EVENT_BYTES : BINCODE_MIN_EVENT_BYTES, 'event count');
}

/**
 * Moves the cursor over one event's `data` (variant index onwards) without building objects,
 * validating tags and counts. Used by the merge.
 */
export function skipEventData(c: BincodeCursor): void {
  const at = c.pos;
  const variant = c.u32('data variant');
  switch (variant) {
    case 0: {
      const tagAt = c.pos;
      const tag = c.u8('parent_hash option tag');
      if (tag === 1) c.skip(8, 'parent_hash');
      else if (tag !== 0) throw c.badTag(tagAt, 'parent_hash option tag', tag, '0 or 1');
      const blocks = c.count(16, 'blocks length'); // (`c.pos += f()` would read pos first)
      c.pos += 16 * blocks;
      return;
    }
    case 1: {
      const hashes = c.count(8, 'block_hashes length');
      c.pos += 8 * hashes;
      return;
    }
    case 2:
      return;
    default:
      throw c.badTag(at, 'data variant', variant, '0 (Stored), 1 (Removed) or 2 (Cleared)');
  }
}

function readEvent(c: BincodeCursor, withDp: boolean): RouterEvent {
  const workerId = c.u64('worker_id');
  const eventId = c.u64('event_id');
  const at = c.pos;
  const variant = c.u32('data variant');
  const view = c.view;
  let data: KvCacheEventData;
  switch (variant) {
    case 0: {
      const tagAt = c.pos;
      const tag = c.u8('parent_hash option tag');
      let parentHash: bigint | null = null;
      if (tag === 1) parentHash = c.u64('parent_hash');
      else if (tag !== 0) throw c.badTag(tagAt, 'parent_hash option tag', tag, '0 or 1');
      const n = c.count(16, 'blocks length');
      // `count` proved that n blocks fit, so the block reads need no further checks.
      const blocks: StoredBlock[] = [];
      let p = c.pos;
      for (let i = 0; i < n; i++, p += 16) {
        blocks.push({
          blockHash: view.getBigUint64(p, true),
          tokensHash: view.getBigUint64(p + 8, true),
        });
      }
      c.pos = p;
      data = { type: 'stored', parentHash, blocks };
      break;
    }
    case 1: {
      const n = c.count(8, 'block_hashes length');
      const blockHashes: bigint[] = [];
      let p = c.pos;
      for (let i = 0; i < n; i++, p += 8) blockHashes.push(view.getBigUint64(p, true));
      c.pos = p;
      data = { type: 'removed', blockHashes };
      break;
    }
    case 2:
      data = { type: 'cleared' };
      break;
    default:
      throw c.badTag(at, 'data variant', variant, '0 (Stored), 1 (Removed) or 2 (Cleared)');
  }
  if (withDp) {
    const dpRank = c.u32('dp_rank');
    return { workerId, event: { eventId, data, dpRank } };
  }
  return { workerId, event: { eventId, data } };
}

function* iterateBincode(bytes: Uint8Array, withDp: boolean): Generator<RouterEvent, void, void> {
  const c = new BincodeCursor(bytes, '');
  const n = readEventCount(c, withDp);
  for (let i = 0; i < n; i++) {
    c.event = i;
    yield readEvent(c, withDp);
  }
  c.event = -1;
  c.expectEnd(n);
}

function isBlank(bytes: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const b = bytes[i]!;
    if (b !== 0x20 && b !== 0x09 && b !== 0x0d && b !== 0x0a) return false;
  }
  return true;
}

/**
 * JSON lines: one event per `\n`-terminated line. The last line may lack its `\n`; whitespace
 * after the last event is allowed, a blank line between events is not.
 */
function* iterateJsonl(bytes: Uint8Array): Generator<RouterEvent, void, void> {
  const len = bytes.length;
  let start = 0;
  for (let line = 1; start < len; line++) {
    let end = bytes.indexOf(0x0a, start);
    if (end < 0) end = len;
    if (isBlank(bytes, start, end)) {
      if (isBlank(bytes, end, len)) return;
      throw new SnapshotDecodeError(
        ErrorCode.InvalidJson,
        `snapshot line ${line} (byte ${start}) is blank but events follow it`,
      );
    }
    let event: RouterEvent;
    try {
      event = parseRouterEvent(bytes.subarray(start, end));
    } catch (err) {
      if (!(err instanceof KvIndexError)) throw err;
      throw new EventParseError(err.code, `snapshot line ${line} (byte ${start}): ${err.message}`, {
        cause: err,
      });
    }
    yield event;
    start = end + 1;
  }
}

/**
 * Iterates over the events of a snapshot lazily, validating as it goes: the generator throws
 * where `decodeSnapshot` would, after yielding the events before the fault (bincode checks the
 * leading count first and trailing bytes last). Errors as for `decodeSnapshot`.
 */
export function iterateSnapshot(
  bytes: Uint8Array,
  encoding: SnapshotEncoding = 'bincode',
): Generator<RouterEvent, void, void> {
  checkBytes(bytes);
  switch (encoding) {
    case 'bincode':
      return iterateBincode(bytes, false);
    case 'bincode-dp':
      return iterateBincode(bytes, true);
    case 'jsonl':
      return iterateJsonl(bytes);
    default:
      throw badEncoding(encoding);
  }
}

/**
 * Decodes a whole snapshot. Bincode-dp sets `dpRank` on every event, plain bincode never does,
 * JSON lines where the line has `"dp_rank"`.
 *
 * Throws `SnapshotDecodeError` for malformed bincode: `SnapshotTruncated` (bytes end inside an
 * event), `SnapshotTrailingBytes` (bytes after the last event), `SnapshotBadCount` (a count
 * whose minimum size exceeds the remaining bytes), `SnapshotBadTag` (variant index not 0-2,
 * option tag not 0/1). Counts are checked before their elements are read, so a snapshot cut
 * short often reports `SnapshotBadCount` (its event count, or the block list it was cut in, no
 * longer fits) rather than `SnapshotTruncated`.
 *
 * For JSON lines: the parser's `EventParseError`, re-thrown with the 1-based line number in
 * the message and the original as `cause`, keeping its code (`InvalidJson`, `InvalidField`,
 * `UnknownVariant`); `SnapshotDecodeError` `InvalidJson` for a blank line between events.
 * `KvIndexError` `InvalidOption` for an unknown encoding, and for bytes that are not a
 * `Uint8Array` (a Buffer is one).
 */
export function decodeSnapshot(
  bytes: Uint8Array,
  encoding: SnapshotEncoding = 'bincode',
): RouterEvent[] {
  checkBytes(bytes);
  if (encoding === 'bincode' || encoding === 'bincode-dp') {
    // Same as the generator, without its per-event resume cost.
    const withDp = encoding === 'bincode-dp';
    const c = new BincodeCursor(bytes, '');
    const n = readEventCount(c, withDp);
    const events: RouterEvent[] = [];
    for (let i = 0; i < n; i++) {
      c.event = i;
      events.push(readEvent(c, withDp));
    }
    c.event = -1;
    c.expectEnd(n);
    return events;
  }
  return Array.from(iterateSnapshot(bytes, encoding));
}

/** The error for an encoding outside `SnapshotEncoding` (shared with the merge). */
export function badEncoding(encoding: unknown): KvIndexError {
  return new KvIndexError(
    ErrorCode.InvalidOption,
    `encoding: expected 'bincode', 'bincode-dp' or 'jsonl', found ${String(encoding)}`,
  );
}

/**
 * Untyped callers only: an ArrayBuffer or DataView of a valid jsonl snapshot decoded to no event
 * at all, and other values threw a TypeError from inside the reader (found by fuzzing).
 */
function checkBytes(bytes: unknown): void {
  if (!(bytes instanceof Uint8Array)) {
    throw new KvIndexError(ErrorCode.InvalidOption, `snapshot bytes: expected a Uint8Array, got ${showValue(bytes)}`);
  }
}
