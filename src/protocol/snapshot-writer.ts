/**
 * Snapshot writers: serialise `Vec<RouterEvent>` straight into a growable byte buffer, in
 * Dynamo's bincode-1 layout (Dynamo reference §1.3), the same plus `dp_rank`, or JSON lines.
 *
 * The radix tree dumps one multi-block Stored event per maximal per-worker chain (src/tree/dump.ts),
 * a million blocks for a large tree, so the writer takes every u64 as two u32 halves (no `bigint`
 * on that path) and writes little-endian fields with a `DataView` (bincode) or ASCII digits (JSON
 * lines, see `u64-decimal.ts`) into one buffer that doubles when full. Each encoding is its own
 * subclass, chosen once by `createSnapshotWriter`, so no method branches on the encoding.
 *
 * Bytes per (worker, block) pair in bincode:
 *   single-block Stored event (what Dynamo's dump emits for every pair, and the worst case of
 *   ours, a chain of one block): worker_id 8 + event_id 8 + variant 4 + option tag 1 + parent 8
 *   (0 at the root) + block count 8 + block 16 = 53 bytes (45 at the root; +4 with dp_rank);
 *   chained multi-block Stored event (what kvindex's dump emits): 16 bytes per extra block, a
 *   3.3x smaller snapshot (17 MB instead of ~55 MB for the 1M-pair tree of bench/tree.bench.ts).
 * In JSON lines a single-block event with full-range hashes is ~196 bytes, an extra block ~70.
 *
 * Throughput, 1M single-block Stored events (the most work per pair) with full-range hashes and
 * worker ids into a warm (reused) writer, 2-core dev VM shared with other jobs, so ranges not
 * points: bincode 15-60 ms (17-65 M blocks/s), JSON lines 360-670 ms (1.5-2.7 M blocks/s; 5 u64
 * decimals per event are most of it). Fresh memory is the expensive part on that VM (see `finishShared`
 * and `createSnapshotWriter`).
 */

import { ErrorCode, KvIndexError } from '../errors.js';
import { SnapshotWriter } from './snapshot-writer-base.js';
import { BincodeDpWriter, BincodeWriter } from './snapshot-writer-bincode.js';
import { JsonlWriter } from './snapshot-writer-jsonl.js';
import type { RouterEvent, SnapshotEncoding } from './types.js';

export { SnapshotWriter };

/** Smallest buffer a writer starts with, so every single write fits after one doubling. */
const MIN_INITIAL_BYTES = 256;

/**
 * Creates a snapshot writer for `encoding`, starting with a buffer of `initialBytes` bytes
 * (at least 256) that doubles as needed. Each doubling copies and touches fresh memory, so a
 * dump that knows its size should say so: in bincode a tree dump of `pairs` pairs takes at most
 * 8 + 53 * pairs bytes, when every pair is its own single-block Stored event (57 with dp_rank;
 * chains take less); JSON lines needs up to ~200 bytes per event.
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
