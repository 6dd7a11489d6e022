/**
 * Byte-level merge of snapshots: the sharded indexer dumps every shard into its own snapshot
 * bytes in parallel, then concatenates them here without decoding events into objects.
 *
 * Bincode: each part's body is copied in one `set`, then its structure is walked (validating
 * tags, counts, truncation and trailing bytes exactly as the decoder does) only to find each
 * event's `event_id` field, which is overwritten with the merged index; the leading count is
 * the sum. JSON lines: each line must start the way the writer writes it,
 * `{"worker_id":W,"event":{"event_id":N,`; the merge records where N sits in every line,
 * sizes the output exactly, and copies the bytes between ids, writing new ids in between.
 * Anything else in a JSON line is not re-validated (that would need the JSON parser); decode
 * the result to check it fully.
 */

import { ErrorCode, SnapshotDecodeError } from '../errors.js';
import type { SnapshotEncoding } from './types.js';
import { BincodeCursor, badEncoding, readEventCount, skipEventData } from './snapshot-reader.js';
import { writeUintDecimal } from './u64-decimal.js';

const TWO_32 = 4294967296;

/**
 * Concatenates the events of `parts` (snapshots in `encoding`), in order, into one snapshot
 * whose event ids are renumbered 0..n-1. Zero parts give the empty snapshot.
 *
 * Throws `SnapshotDecodeError` naming the part (0-based) for a malformed part: for bincode
 * the decoder's codes (`SnapshotTruncated`, `SnapshotTrailingBytes`, `SnapshotBadCount`,
 * `SnapshotBadTag`); for JSON lines `SnapshotTruncated` (part does not end with `\n`) or
 * `InvalidJson` (a line does not start with the writer's prefix). `KvIndexError`
 * `InvalidOption` for an unknown encoding.
 */
export function mergeSnapshots(parts: readonly Uint8Array[], encoding: SnapshotEncoding): Uint8Array {
  switch (encoding) {
    case 'bincode':
      return mergeBincode(parts, false);
    case 'bincode-dp':
      return mergeBincode(parts, true);
    case 'jsonl':
      return mergeJsonl(parts);
    default:
      throw badEncoding(encoding);
  }
}

/**
 * Copies the events of one bincode snapshot `part` (without its count) into `out` at byte `at`,
 * renumbering their event ids from `firstId`; returns the number of events. The sharded
 * indexer's shards call this to write their parts into one shared buffer in parallel.
 * Throws `SnapshotDecodeError` (prefixed with `label`) for a malformed part.
 */
export function copyBincodePart(
  part: Uint8Array, out: Uint8Array, at: number, firstId: number, withDp: boolean, label: string,
): number {
  new BincodeCursor(part, label).need(8, 'event count');
  out.set(part.subarray(8), at);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const c = new BincodeCursor(part, label);
  const n = readEventCount(c, withDp);
  const shift = at - 8; // part offset + shift = out offset
  let id = firstId;
  for (let k = 0; k < n; k++, id++) {
    c.event = k;
    c.skip(8, 'worker_id');
    c.need(8, 'event_id');
    const lo = id >>> 0;
    view.setUint32(c.pos + shift, lo, true);
    view.setUint32(c.pos + shift + 4, (id - lo) / TWO_32, true);
    c.pos += 8;
    skipEventData(c);
    if (withDp) c.skip(4, 'dp_rank');
  }
  c.event = -1;
  c.expectEnd(n);
  return n;
}

/** Writes the leading u64 event count of a bincode snapshot. */
export function writeBincodeCount(out: Uint8Array, count: number): void {
  const view = new DataView(out.buffer, out.byteOffset, 8);
  const lo = count >>> 0;
  view.setUint32(0, lo, true);
  view.setUint32(4, (count - lo) / TWO_32, true);
}

function mergeBincode(parts: readonly Uint8Array[], withDp: boolean): Uint8Array {
  let total = 8;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    // A part must at least hold its count for the sizes below to make sense.
    new BincodeCursor(part, `part ${i}: `).need(8, 'event count');
    total += part.length - 8;
  }
  const out = new Uint8Array(total);
  let at = 8; // where the current part's body starts in `out`
  let id = 0;
  for (let i = 0; i < parts.length; i++) {
    id += copyBincodePart(parts[i]!, out, at, id, withDp, `part ${i}: `);
    at += parts[i]!.length - 8;
  }
  writeBincodeCount(out, id);
  return out;
}

const PREFIX_WORKER = new TextEncoder().encode('{"worker_id":');
const PREFIX_EVENT_ID = new TextEncoder().encode(',"event":{"event_id":');
const NEWLINE = 0x0a;

function jsonFail(part: number, line: number, at: number, expected: string): SnapshotDecodeError {
  return new SnapshotDecodeError(
    ErrorCode.InvalidJson,
    `part ${part}: snapshot line ${line} at byte ${at}: expected ${expected}`,
  );
}

/** Matches `text` at `p`; returns the position after it, or -1. */
function match(bytes: Uint8Array, p: number, end: number, text: Uint8Array): number {
  if (p + text.length > end) return -1;
  for (let i = 0; i < text.length; i++) if (bytes[p + i] !== text[i]) return -1;
  return p + text.length;
}

/** Skips 1-20 ASCII digits at `p`; returns the position after them, or -1. */
function digits(bytes: Uint8Array, p: number, end: number): number {
  const start = p;
  while (p < end && p - start <= 20) {
    const b = bytes[p]!;
    if (b < 0x30 || b > 0x39) break;
    p++;
  }
  return p > start && p - start <= 20 ? p : -1;
}

function decimalLength(n: number): number {
  let len = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    len++;
  }
  return len;
}

function mergeJsonl(parts: readonly Uint8Array[]): Uint8Array {
  // Pass 1: validate line prefixes, record every event id's [start, end) per part.
  const spans: number[][] = [];
  let total = 0;
  let id = 0;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const len = part.length;
    if (len > 0 && part[len - 1] !== NEWLINE) {
      throw new SnapshotDecodeError(
        ErrorCode.SnapshotTruncated,
        `part ${i}: snapshot does not end with a newline (${len} bytes)`,
      );
    }
    const ids: number[] = [];
    let start = 0;
    for (let line = 1; start < len; line++, id++) {
      const end = part.indexOf(NEWLINE, start); // >= 0: the part ends with one
      let p = match(part, start, end, PREFIX_WORKER);
      if (p < 0) throw jsonFail(i, line, start, '{"worker_id":');
      p = digits(part, p, end);
      if (p < 0) throw jsonFail(i, line, start, 'a worker id of 1-20 digits');
      p = match(part, p, end, PREFIX_EVENT_ID);
      if (p < 0) throw jsonFail(i, line, start, '"event":{"event_id": after the worker id');
      const idEnd = digits(part, p, end);
      if (idEnd < 0 || part[idEnd] !== 0x2c) {
        throw jsonFail(i, line, start, 'an event id of 1-20 digits followed by a comma');
      }
      ids.push(p, idEnd);
      total += decimalLength(id) - (idEnd - p);
      start = end + 1;
    }
    spans.push(ids);
    total += len;
  }
  // Pass 2: copy the bytes between ids, writing the new ids.
  const out = new Uint8Array(total);
  let pos = 0;
  id = 0;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const ids = spans[i]!;
    let from = 0;
    for (let k = 0; k < ids.length; k += 2, id++) {
      const idStart = ids[k]!;
      out.set(part.subarray(from, idStart), pos);
      pos = writeUintDecimal(out, pos + idStart - from, id);
      from = ids[k + 1]!;
    }
    out.set(part.subarray(from), pos);
    pos += part.length - from;
  }
  return out;
}
