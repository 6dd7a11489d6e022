/**
 * The binary `/dump` between kvindex replicas (`Accept: application/x-kvindex-dump`): the same
 * content as the JSON dump (responses.ts `dumpJson`: per (model, tenant) its block size, each
 * listener with its endpoints and the engine seq the index reflects, and the device tree of
 * every rank without its excluded workers), with each tree as a plain bincode snapshot
 * (src/protocol/snapshot-writer-bincode.ts, one multi-block Stored event per chain), so a
 * replica loads it straight into its trees (src/tree/bulk-load.ts) with no JSON, no event
 * objects and no `bigint` per block. Dynamo's clients never ask for it: the JSON dump stays the
 * default, byte for byte.
 *
 * Why: at 1M pairs the JSON dump was 68 MB and 3.5 s to write on the peer, 4.7 s of the
 * replica's 5.3 s from spawn to ready (BENCHMARKS.md, "Replica ready from a peer"); the binary
 * one is ~16 bytes a pair in chains and is written and read at memory speed.
 *
 * Layout, little-endian; `str` is a u32 byte length and UTF-8:
 *   "KVXDUMP1"  u32 sections
 *   section:    str key, str model_name, str tenant_id, u32 block_size,
 *               u32 listeners, each: u64 instance_id, u32 dp_rank, str endpoint,
 *                 u8 has_replay [str replay_endpoint], u8 has_seq [u64 seq], u32 n, u32 ranks[n]
 *               u32 trees, each: u32 dp_rank, u64 bytes, a bincode snapshot of that many bytes
 *   "KVXDEND1"  u32 CRC-32 (zlib's) of every byte before it.
 * The checksum catches what a structural check cannot (a flipped bit inside a hash); the end
 * mark and the lengths catch a dump cut short. The reader checks everything before returning,
 * so a replica never applies part of a dump.
 */

import { Readable } from 'node:stream';
import { crc32 } from 'node:zlib';
import { ErrorCode, SnapshotDecodeError } from '../errors.js';
import { BincodeCursor } from '../protocol/snapshot-reader.js';
import { createSnapshotWriter } from '../protocol/snapshot-writer.js';
import { showValue } from '../protocol/show-value.js';
import { checkBincode } from '../tree/bulk-load.js';
import type { DumpListener, DumpSection, RankSnapshot } from './dump-read.js';
import type { IndexEntry, ListenerEntry } from './engine-registry.js';

/** The media type of the binary dump. */
export const DUMP_BINARY_TYPE = 'application/x-kvindex-dump';

const MAGIC = Buffer.from('KVXDUMP1', 'latin1');
const END = Buffer.from('KVXDEND1', 'latin1');

/** A little-endian byte builder for the small fields (names, listeners). */
class Head {
  buf = Buffer.alloc(256);
  pos = 0;
  #fit(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }
  u8(v: number): void {
    this.#fit(1);
    this.buf[this.pos++] = v;
  }
  u32(v: number): void {
    this.#fit(4);
    this.buf.writeUInt32LE(v, this.pos);
    this.pos += 4;
  }
  u64(v: bigint): void {
    this.#fit(8);
    this.buf.writeBigUInt64LE(v, this.pos);
    this.pos += 8;
  }
  str(s: string): void {
    const n = Buffer.byteLength(s);
    this.u32(n);
    this.#fit(n);
    this.buf.write(s, this.pos);
    this.pos += n;
  }
  bytes(b: Uint8Array): void {
    this.#fit(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
  take(): Buffer {
    const out = this.buf.subarray(0, this.pos);
    this.buf = Buffer.alloc(256);
    this.pos = 0;
    return out;
  }
}

/**
 * The binary dump of `indexes` with their `listeners`, as chunks (the trees' snapshots are not
 * copied into one buffer: at 16M pairs that copy alone is ~260 MB of fresh pages). Written in
 * one synchronous turn, so trees and seqs agree, as in the JSON dump.
 */
export function dumpBinaryChunks(indexes: IndexEntry[], listeners: ListenerEntry[] = []): Buffer[] {
  const chunks: Buffer[] = [];
  const h = new Head();
  h.bytes(MAGIC);
  h.u32(indexes.length);
  for (const e of indexes) {
    h.str(`${e.modelName}:${e.tenantId}`);
    h.str(e.modelName);
    h.str(e.tenantId);
    h.u32(e.index.blockSize);
    const mine = listeners.filter((l) => l.modelName === e.modelName && l.tenantId === e.tenantId);
    h.u32(mine.length);
    for (const l of mine) {
      const p = l.source.position();
      h.u64(l.instanceId);
      h.u32(l.dpRank);
      h.str(l.endpoint);
      h.u8(l.replayEndpoint === null ? 0 : 1);
      if (l.replayEndpoint !== null) h.str(l.replayEndpoint);
      h.u8(p === null ? 0 : 1);
      if (p !== null) h.u64(p.seq);
      const ranks = p === null ? [] : p.ranks;
      h.u32(ranks.length);
      for (const r of ranks) h.u32(r);
    }
    const ranks = e.index.deviceRanks();
    h.u32(ranks.length);
    for (const rank of ranks) {
      // Sized for the worst case, 57 bytes a pair: pages never written are never touched, and
      // a writer that regrows copies into fresh memory (tree/radix-tree.ts `dumpSnapshot`).
      const w = createSnapshotWriter('bincode', 64 + 57 * e.index.blockCountOfRank(rank));
      e.index.dumpRankTo(rank, w);
      const snap = w.finishShared();
      h.u32(rank);
      h.u64(BigInt(snap.length));
      chunks.push(h.take(), Buffer.from(snap.buffer, snap.byteOffset, snap.byteLength));
    }
  }
  h.bytes(END);
  let crc = 0;
  const tail = h.take();
  for (const c of chunks) crc = crc32(c, crc);
  crc = crc32(tail, crc);
  const sum = Buffer.alloc(4);
  sum.writeUInt32LE(crc >>> 0);
  chunks.push(tail, sum);
  return chunks;
}

/** The binary dump as a stream for a reply, and its length. */
export function dumpBinaryStream(indexes: IndexEntry[], listeners: ListenerEntry[] = []): { stream: Readable; length: number } {
  const chunks = dumpBinaryChunks(indexes, listeners);
  return { stream: Readable.from(chunks, { objectMode: false }), length: chunks.reduce((n, c) => n + c.length, 0) };
}

/**
 * Parses and checks a whole binary dump into the sections `readDump` gives for JSON (with
 * `trees` instead of events): magic, every length, the end mark, the CRC-32, and
 * every tree's bincode structure (`checkBincode`). The trees are views into `bytes`. Throws
 * `SnapshotDecodeError` (`KVX_SNAPSHOT_TRUNCATED`, `_BAD_COUNT`, `_BAD_TAG`,
 * `_TRAILING_BYTES`, `KVX_SNAPSHOT_CHECKSUM`) naming the field and byte offset.
 */
export function readBinaryDump(bytes: Uint8Array): DumpSection[] {
  const min = MAGIC.length + 4 + END.length + 4;
  if (bytes.length < min) throw new SnapshotDecodeError(ErrorCode.SnapshotTruncated, `binary dump of ${bytes.length} bytes: shorter than the smallest dump (${min})`);
  if (!MAGIC.equals(bytes.subarray(0, MAGIC.length))) throw new SnapshotDecodeError(ErrorCode.SnapshotBadTag, `binary dump: does not start with KVXDUMP1 (found ${showValue(Buffer.from(bytes.subarray(0, 8)).toString('latin1'))})`);
  const body = bytes.length - 4;
  const want = new DataView(bytes.buffer, bytes.byteOffset + body, 4).getUint32(0, true);
  const got = crc32(bytes.subarray(0, body)) >>> 0;
  // The end mark first: a dump cut short is "truncated", not "a bad checksum".
  if (!END.equals(bytes.subarray(body - END.length, body))) throw new SnapshotDecodeError(ErrorCode.SnapshotTruncated, `binary dump truncated: its ${bytes.length} bytes have no end mark`);
  if (got !== want) throw new SnapshotDecodeError(ErrorCode.SnapshotChecksum, `binary dump: CRC-32 ${got.toString(16)} of its ${body} bytes, the dump says ${want.toString(16)}`);
  // The fields between the magic and the end mark; offsets in messages count from the dump's start.
  const c = new BincodeCursor(bytes.subarray(0, body - END.length), '', 'binary dump');
  c.pos = MAGIC.length;
  const out: DumpSection[] = [];
  const sections = c.count32(4 * 5, 'sections');
  for (let s = 0; s < sections; s++) {
    const key = c.str(`sections[${s}].key`);
    const at = `section ${showValue(key)}`;
    const modelName = c.str(`${at} model_name`);
    const tenantId = c.str(`${at} tenant_id`);
    const blockSize = c.u32(`${at} block_size`);
    if (blockSize === 0) throw new SnapshotDecodeError(ErrorCode.InvalidField, `binary dump: ${at} has block_size 0`);
    const listeners: DumpListener[] = [];
    const nl = c.count32(8 + 4 + 4 + 1 + 1 + 4, `${at} listeners`);
    for (let i = 0; i < nl; i++) {
      const f = `${at} listeners[${i}]`;
      const instanceId = c.u64(`${f}.instance_id`);
      const dpRank = c.u32(`${f}.dp_rank`);
      const endpoint = c.str(`${f}.endpoint`);
      if (endpoint === '') throw new SnapshotDecodeError(ErrorCode.InvalidField, `binary dump: ${f}.endpoint is empty`);
      const replayEndpoint = c.flag(`${f}.replay_endpoint tag`) ? c.str(`${f}.replay_endpoint`) : null;
      const seq = c.flag(`${f}.seq tag`) ? c.u64(`${f}.seq`) : null;
      const nr = c.count32(4, `${f}.ranks`);
      const ranks: number[] = [];
      for (let r = 0; r < nr; r++) ranks.push(c.u32(`${f}.ranks[${r}]`));
      listeners.push({ instanceId, dpRank, endpoint, replayEndpoint, position: seq === null ? null : { seq, ranks } });
    }
    const trees: RankSnapshot[] = [];
    const nt = c.count32(4 + 8, `${at} trees`);
    for (let i = 0; i < nt; i++) {
      const rank = c.u32(`${at} trees[${i}].dp_rank`);
      const lenAt = c.pos;
      const len = c.u64(`${at} trees[${i}] length`);
      if (len > BigInt(c.remaining)) throw new SnapshotDecodeError(ErrorCode.SnapshotBadCount, `binary dump: bad count at byte ${lenAt} in ${at} trees[${i}] length: ${len} bytes, ${c.remaining} remain`);
      const snap = bytes.subarray(c.pos, c.pos + Number(len));
      c.pos += Number(len);
      const { storedBlocks } = checkBincode(snap, false, `binary dump ${at} rank ${rank}: `);
      trees.push({ rank, bytes: snap, blocks: storedBlocks });
    }
    out.push({ key, modelName, tenantId, blockSize, events: [], trees, listeners });
  }
  if (c.remaining !== 0) throw new SnapshotDecodeError(ErrorCode.SnapshotTrailingBytes, `binary dump: ${c.remaining} bytes at byte ${c.pos} after the last of ${sections} sections`);
  return out;
}
