/**
 * Loading a bincode snapshot straight into a RadixTree, without `RouterEvent` objects: each
 * Stored event's blocks are copied as bytes into one reused, 4-byte-aligned word buffer and
 * handed to the tree's raw-word entry (`applyStored`), so a block costs no `bigint` and no
 * object. A snapshot's blocks sit at odd byte offsets (a Stored head is 29 or 21 bytes plus the
 * 8-byte count), so a `Uint32Array` cannot view them in place; the copy is a memcpy. The only
 * `bigint` per event is its worker id.
 *
 * Measured on the 1M-pair peer dump (chains of 64, bench/peers.bench.ts): decoding to events and
 * `applyEvent` per event against this loader is in BENCHMARKS.md ("Replica ready from a peer").
 *
 * `loadBincode` first walks the bytes with `checkBincode`, which changes nothing, so a malformed
 * snapshot throws before the tree is touched.
 */

import { BincodeCursor, readEventCount, skipEventData } from '../protocol/snapshot-reader.js';
import { u64FromHalves } from '../protocol/u64-text.js';
import type { RadixTree } from './radix-tree.js';

/** What a bincode snapshot holds, from `checkBincode`. */
export interface BincodeSummary {
  readonly events: number;
  /** Blocks of its Stored events (the (worker, block) pairs a fresh tree gets). */
  readonly storedBlocks: number;
}

/** What `loadBincode` did. */
export interface BulkLoadReport extends BincodeSummary {
  /** Events the tree answered with another status than `ok` (an inconsistent snapshot). */
  readonly rejected: number;
}

/**
 * Walks a whole bincode (`withDp`: bincode-dp) snapshot, validating its structure, and counts
 * its events and stored blocks. Throws `SnapshotDecodeError` as `decodeSnapshot` does
 * (`label` prefixes the message, e.g. the section it came from). Allocates nothing per event.
 */
export function checkBincode(bytes: Uint8Array, withDp = false, label = ''): BincodeSummary {
  const c = new BincodeCursor(bytes, label);
  const n = readEventCount(c, withDp);
  let blocks = 0;
  for (let i = 0; i < n; i++) {
    c.event = i;
    c.skip(16, 'worker_id and event_id');
    const at = c.pos;
    skipEventData(c);
    // A Stored event's data ends with its blocks, 16 bytes each, after a head of 21 bytes
    // (variant, tag 1, parent, count) or 13 (no parent).
    if (c.view.getUint32(at, true) === 0) blocks += (c.pos - at - (c.bytes[at + 4] === 1 ? 21 : 13)) / 16;
    if (withDp) c.skip(4, 'dp_rank');
  }
  c.event = -1;
  c.expectEnd(n);
  return { events: n, storedBlocks: blocks };
}

/** A reusable word buffer for `loadBincode` (grows to the longest event's blocks). */
export class BulkLoadScratch {
  words = new Uint32Array(4096);
  bytes = new Uint8Array(this.words.buffer);

  fit(blocks: number): void {
    if (this.words.length >= blocks * 4) return;
    let n = this.words.length;
    while (n < blocks * 4) n *= 2;
    this.words = new Uint32Array(n);
    this.bytes = new Uint8Array(this.words.buffer);
  }
}

const shared = new BulkLoadScratch();

/** Little-endian hosts only: a block's 16 bytes are then its four u32 words as the tree reads them. */
const LITTLE = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * Applies every event of a bincode (or bincode-dp: the rank field is skipped; the caller picks
 * the tree) snapshot to `tree` in order. Stored events go through `applyStored` on raw words,
 * Removed through `applyRemoved`, Cleared through `clearWorker`. Throws `SnapshotDecodeError`
 * for malformed bytes before it changes the tree (it runs `checkBincode` first).
 */
export function loadBincode(tree: RadixTree, bytes: Uint8Array, withDp = false, label = '', scratch: BulkLoadScratch = shared): BulkLoadReport {
  // The whole snapshot is checked first (a walk over its events, not its blocks), so a
  // malformed one throws before the tree changes. No `tree.reserve` of its block count: in a
  // tree of its own thread that grows the node arrays in the same 1.25x steps as filling them
  // does, and the overflow-pair arrays for every block besides, which measured 3x slower at
  // 0.5M pairs (growing the node arrays is ~60 % of a 1M-pair load's CPU samples either way).
  checkBincode(bytes, withDp, label);
  const c = new BincodeCursor(bytes, label);
  const view = c.view;
  const n = readEventCount(c, withDp);
  let blocks = 0;
  let rejected = 0;
  // Dumps visit workers in node order, so consecutive events often share a worker: reuse its bigint.
  let lastLo = -1;
  let lastHi = -1;
  let worker = 0n;
  for (let i = 0; i < n; i++) {
    c.event = i;
    c.need(20, 'event head');
    const p0 = c.pos;
    const wLo = view.getUint32(p0, true);
    const wHi = view.getUint32(p0 + 4, true);
    if (wLo !== lastLo || wHi !== lastHi) {
      worker = u64FromHalves(wHi, wLo);
      lastLo = wLo;
      lastHi = wHi;
    }
    c.pos = p0 + 16;
    const at = c.pos;
    const variant = c.u32('data variant');
    let status: string;
    if (variant === 0) {
      const tagAt = c.pos;
      const tag = c.u8('parent_hash option tag');
      let pLo = 0;
      let pHi = 0;
      if (tag === 1) {
        c.need(8, 'parent_hash');
        pLo = view.getUint32(c.pos, true);
        pHi = view.getUint32(c.pos + 4, true);
        c.pos += 8;
      } else if (tag !== 0) throw c.badTag(tagAt, 'parent_hash option tag', tag, '0 or 1');
      const k = c.count(16, 'blocks length');
      scratch.fit(k);
      const words = scratch.words;
      if (LITTLE) scratch.bytes.set(bytes.subarray(c.pos, c.pos + 16 * k));
      else for (let j = 0; j < 4 * k; j++) words[j] = view.getUint32(c.pos + 4 * j, true);
      c.pos += 16 * k;
      blocks += k;
      status = tree.applyStored(worker, tag === 1, pLo, pHi, words, 0, k);
    } else if (variant === 1) {
      const k = c.count(8, 'block_hashes length');
      scratch.fit((k + 1) >> 1);
      const words = scratch.words;
      if (LITTLE) scratch.bytes.set(bytes.subarray(c.pos, c.pos + 8 * k));
      else for (let j = 0; j < 2 * k; j++) words[j] = view.getUint32(c.pos + 4 * j, true);
      c.pos += 8 * k;
      status = tree.applyRemoved(worker, words, 0, k);
    } else if (variant === 2) {
      tree.clearWorker(worker);
      status = 'ok';
    } else throw c.badTag(at, 'data variant', variant, '0 (Stored), 1 (Removed) or 2 (Cleared)');
    if (status !== 'ok') rejected++;
    if (withDp) c.skip(4, 'dp_rank');
  }
  c.event = -1;
  c.expectEnd(n);
  return { events: n, storedBlocks: blocks, rejected };
}
