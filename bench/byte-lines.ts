/**
 * Lines of a plain (not gzip) file as byte ranges of one reused buffer, for the fleet bench's
 * JSON ingest (`KVX_FLEET_JSON=1`): a router on NATS or ZMQ hands the indexer each event's bytes
 * (`applyEventJson`) and never makes a string of them. Reading the workload as strings and
 * parsing them into event objects grew the calling isolate's young generation to ~29 MiB
 * resident at 16.4M pairs (docs/layout.md, "Where a 2-shard process's RSS goes"): memory the
 * bench's parser holds, counted as the index's. A yielded line is valid until the next one.
 */
import { closeSync, openSync, readSync } from 'node:fs';

export function* byteLines(path: string, chunkBytes = 8 << 20): Generator<Uint8Array> {
  const fd = openSync(path, 'r');
  let buf = Buffer.allocUnsafe(chunkBytes);
  let have = 0;
  try {
    for (;;) {
      if (have === buf.length) {
        // One line longer than the buffer: double it (events of thousands of blocks).
        const next = Buffer.allocUnsafe(buf.length * 2);
        buf.copy(next, 0, 0, have);
        buf = next;
      }
      const n = readSync(fd, buf, have, buf.length - have, null);
      const end = have + n;
      let start = 0;
      for (;;) {
        const nl = buf.indexOf(0x0a, start);
        if (nl < 0 || nl >= end) break;
        if (nl > start) yield buf.subarray(start, nl);
        start = nl + 1;
      }
      if (n === 0) {
        if (end > start) yield buf.subarray(start, end);
        return;
      }
      buf.copy(buf, 0, start, end);
      have = end - start;
    }
  } finally {
    closeSync(fd);
  }
}

/** Whether `line` starts with the ASCII bytes of `prefix`. */
export function startsWith(line: Uint8Array, prefix: Uint8Array): boolean {
  if (line.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (line[i] !== prefix[i]) return false;
  return true;
}

/** How many times `needle` occurs in `line` (counting blocks without parsing the event). */
export function occurrences(line: Buffer, needle: Buffer): number {
  let k = 0;
  for (let at = line.indexOf(needle); at >= 0; at = line.indexOf(needle, at + needle.length)) k++;
  return k;
}
