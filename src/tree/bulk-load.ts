/**
 * Loading a bincode snapshot straight into a RadixTree, without `RouterEvent` objects: each
 * Stored event's blocks are copied as bytes into one reused, 4-byte-aligned word buffer and
 * handed to the tree's raw-word entry (`applyStored`), so a block costs no `bigint` and no
 * object. A snapshot's blocks sit at odd byte offsets (a Stored head is 29 or 21 bytes plus the
 * 8-byte count), so a `Uint32Array` cannot view them in place; the copy is a memcpy. The only
 * `bigint` per event is its worker id, reused while consecutive events share a worker.
 *
 * Sized once: the check pass counts the snapshot's blocks, per worker too, so the tree's node
 * arrays grow once to hold them all (a snapshot's blocks bound its nodes) and each worker's
 * lookup is rehashed once to its count (`reserveLoad`). Growing as the events came (node arrays
 * in 1.25x steps, each step a copy into fresh pages, worker tables rehashed at every 1.5x) was
 * 2.6 of 3.4 s of CPU samples restoring 4.1M fleet pairs in-thread (node --cpu-prof,
 * 2026-12-04). Not the copying: a fresh page costs ~3.5-6 ms per MB the first time it is written
 * on the dev VM (160 MB filled in 0.54-0.99 s, the same pages again in 6 ms), and the steps
 * write the node arrays' bytes ~5 times over. BENCHMARKS.md ("Replica ready from a peer",
 * "Restore to ready") has the times before and after. The cost of the bound: a snapshot whose blocks share
 * nodes (many workers on one prompt) reserves a node record (36 bytes) per shared pair that it
 * never uses, up to one per pair; a fleet of 1,000 engines with 32 shared 256-block prompts
 * reserves 1.5 % more nodes than it fills.
 *
 * `BincodeEvents` first walks the bytes with `checkBincode`, which changes nothing, so a
 * malformed snapshot throws before the tree (or an indexer: src/indexer/snapshot-restore.ts)
 * is touched; its reads then need no bounds checks.
 */

import { BincodeCursor, readEventCount, skipEventData } from '../protocol/snapshot-reader.js';
import { u64FromHalves } from '../protocol/u64-text.js';
import type { ApplyStatus } from '../protocol/types.js';
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
 * its events and stored blocks; with `perWorker`, adds each worker's stored blocks to it too
 * (every worker of an event is a key, in order of first appearance, with 0 for none stored).
 * Throws `SnapshotDecodeError` as `decodeSnapshot` does (`label` prefixes the message, e.g. the
 * section it came from). Allocates nothing per event (a `bigint` per run of one worker's events
 * with `perWorker`).
 */
export function checkBincode(bytes: Uint8Array, withDp = false, label = '', perWorker?: Map<bigint, number>): BincodeSummary {
  const c = new BincodeCursor(bytes, label);
  const n = readEventCount(c, withDp);
  const counts = perWorker === undefined ? null : new WorkerCounts(perWorker);
  let blocks = 0;
  for (let i = 0; i < n; i++) {
    c.event = i;
    const p0 = c.pos;
    c.skip(16, 'worker_id and event_id');
    const at = c.pos;
    skipEventData(c);
    // A Stored event's data ends with its blocks, 16 bytes each, after a head of 21 bytes
    // (variant, tag 1, parent, count) or 13 (no parent).
    const k = c.view.getUint32(at, true) === 0 ? (c.pos - at - (c.bytes[at + 4] === 1 ? 21 : 13)) / 16 : 0;
    blocks += k;
    counts?.add(c.view.getUint32(p0, true), c.view.getUint32(p0 + 4, true), k);
    if (withDp) c.skip(4, 'dp_rank');
  }
  c.event = -1;
  c.expectEnd(n);
  counts?.finish();
  return { events: n, storedBlocks: blocks };
}

const COUNT_SLOTS = 4096;

/**
 * Stored blocks per worker, by the id's u32 halves, into a Map keyed by the id: a `bigint` and a
 * Map update only at a worker's first event or when another worker took its entry of a small
 * direct-mapped cache. Why: a snapshot of one event per pair (Dynamo's dump) with 8 workers in
 * turn measured 111-146 ms to check for 2M events, and 365-452 ms with a Map update per event.
 */
class WorkerCounts {
  private readonly lo = new Int32Array(COUNT_SLOTS);
  private readonly hi = new Int32Array(COUNT_SLOTS);
  private readonly used = new Uint8Array(COUNT_SLOTS);
  private readonly n = new Float64Array(COUNT_SLOTS);

  constructor(private readonly out: Map<bigint, number>) {}

  add(lo: number, hi: number, k: number): void {
    const h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b) >>> 20; // 12 bits
    if (this.used[h] === 1 && this.lo[h] === (lo | 0) && this.hi[h] === (hi | 0)) {
      this.n[h] = this.n[h]! + k;
      return;
    }
    if (this.used[h] === 1) this.flush(h);
    const id = u64FromHalves(hi, lo);
    if (!this.out.has(id)) this.out.set(id, 0); // its first event: the Map keeps that order
    this.used[h] = 1;
    this.lo[h] = lo;
    this.hi[h] = hi;
    this.n[h] = k;
  }

  finish(): void {
    for (let h = 0; h < COUNT_SLOTS; h++) if (this.used[h] === 1) this.flush(h);
  }

  private flush(h: number): void {
    const id = u64FromHalves(this.hi[h]!, this.lo[h]!);
    this.out.set(id, this.out.get(id)! + this.n[h]!);
    this.used[h] = 0;
  }
}

/**
 * The worker id of a bincode event as one `bigint` per run of events of the same worker (a
 * dump writes a worker's chains one after another), from its two u32 halves.
 */
export class WorkerIds {
  lo = -1;
  hi = -1;
  id = 0n;
  constructor(private readonly view: DataView) {}

  /** The worker id of the event at byte `p` (its first field); sets `lo`, `hi`, `id`. */
  at(p: number): bigint {
    const lo = this.view.getUint32(p, true);
    const hi = this.view.getUint32(p + 4, true);
    if (lo !== this.lo || hi !== this.hi) {
      this.id = u64FromHalves(hi, lo);
      this.lo = lo;
      this.hi = hi;
    }
    return this.id;
  }
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

/** Data variants of a bincode event. */
export const STORED = 0;
export const REMOVED = 1;
export const CLEARED = 2;

/**
 * The events of a bincode snapshot, checked whole on construction (`checkBincode`: throws
 * `SnapshotDecodeError` before anything is read), then decoded one at a time into this object's
 * fields by `next()`: no object and no `bigint` per event or block besides the worker id's. The
 * one walk of `loadBincode` and of the indexer's `restoreSnapshot`.
 */
export class BincodeEvents {
  readonly summary: BincodeSummary;
  /** Stored blocks per worker, in order of first appearance (filled by the check). */
  readonly perWorker = new Map<bigint, number>();
  /** The current event's worker id, and its halves. */
  worker = 0n;
  wLo = 0;
  wHi = 0;
  /** Byte offset of the current event (its worker id field). */
  at = 0;
  /** STORED, REMOVED or CLEARED. */
  variant = 0;
  hasParent = false;
  parentLo = 0;
  parentHi = 0;
  /** Blocks (Stored: 4 words each in `words`) or hashes (Removed: 2 words each). */
  count = 0;
  private readonly view: DataView;
  private readonly ids: WorkerIds;
  private readonly n: number;
  private i = 0;
  private pos: number;

  constructor(private readonly bytes: Uint8Array, private readonly withDp = false, label = '', private readonly scratch: BulkLoadScratch = shared) {
    this.summary = checkBincode(bytes, withDp, label, this.perWorker);
    const c = new BincodeCursor(bytes, label);
    this.n = readEventCount(c, withDp);
    this.pos = c.pos;
    this.view = c.view;
    this.ids = new WorkerIds(this.view);
  }

  /** The scratch words of the current event's blocks or hashes (valid until the next `next`). */
  get words(): Uint32Array {
    return this.scratch.words;
  }

  /** The current event's id. */
  get eventId(): bigint {
    return this.view.getBigUint64(this.at + 8, true);
  }

  /** Decodes the next event; false after the last. */
  next(): boolean {
    if (this.i === this.n) return false;
    this.i++;
    const view = this.view;
    const bytes = this.bytes;
    const p0 = this.pos;
    this.at = p0;
    this.worker = this.ids.at(p0);
    this.wLo = this.ids.lo;
    this.wHi = this.ids.hi;
    const variant = view.getUint32(p0 + 16, true);
    this.variant = variant;
    let p = p0 + 20;
    // Checked whole by the constructor: the reads below cannot run past the end, a count is
    // below 2^32 (it fitted in the bytes), and the variant is one of the three.
    if (variant === STORED) {
      const hasParent = bytes[p] === 1;
      this.hasParent = hasParent;
      this.parentLo = hasParent ? view.getUint32(p + 1, true) : 0;
      this.parentHi = hasParent ? view.getUint32(p + 5, true) : 0;
      p += hasParent ? 9 : 1;
      const k = view.getUint32(p, true);
      p += 8;
      this.count = k;
      p = this.copy(p, 4 * k);
    } else if (variant === REMOVED) {
      const k = view.getUint32(p, true);
      p += 8;
      this.count = k;
      p = this.copy(p, 2 * k);
    } else this.count = 0;
    this.pos = p + (this.withDp ? 4 : 0);
    return true;
  }

  private copy(p: number, words: number): number {
    const s = this.scratch;
    s.fit((words + 3) >> 2);
    if (LITTLE) s.bytes.set(this.bytes.subarray(p, p + 4 * words));
    else for (let j = 0; j < words; j++) s.words[j] = this.view.getUint32(p + 4 * j, true);
    return p + 4 * words;
  }
}

/**
 * Sizes `tree` for the Stored blocks to come (`BincodeEvents`' counts): its node arrays to
 * `blocks` more nodes at once, each worker's lookup to its count (for a worker the tree does not
 * hold yet, when it comes). The tree's own growth steps otherwise; see the file's comment for
 * the measured cost. `workers` as (lo, hi, blocks) triples: the form a shard thread receives.
 */
export function reserveLoad(tree: RadixTree, blocks: number, workers: Uint32Array): void {
  tree.nodes.reserve(blocks);
  for (let i = 0; i + 2 < workers.length; i += 3) tree.reserveWorker(u64FromHalves(workers[i + 1]!, workers[i]!), workers[i + 2]!);
}

/** Per-worker counts as the (lo, hi, blocks) triples of `reserveLoad`. */
export function workerTriples(perWorker: ReadonlyMap<bigint, number>, only?: (worker: bigint) => boolean): Uint32Array {
  const out: number[] = [];
  for (const [w, n] of perWorker) if (n > 0 && (only === undefined || only(w))) out.push(Number(w & 0xffffffffn), Number(w >> 32n), Math.min(n, 0xffffffff));
  return Uint32Array.from(out);
}

/**
 * Applies every event of a bincode (or bincode-dp: the rank field is skipped; the caller picks
 * the tree) snapshot to `tree` in order. Stored events go through `applyStored` on raw words,
 * Removed through `applyRemoved`, Cleared through `clearWorker`. Throws `SnapshotDecodeError`
 * for malformed bytes before it changes the tree.
 */
export function loadBincode(tree: RadixTree, bytes: Uint8Array, withDp = false, label = '', scratch: BulkLoadScratch = shared): BulkLoadReport {
  const ev = new BincodeEvents(bytes, withDp, label, scratch);
  reserveLoad(tree, ev.summary.storedBlocks, workerTriples(ev.perWorker));
  let rejected = 0;
  while (ev.next()) {
    let status: ApplyStatus;
    if (ev.variant === STORED) {
      status = tree.applyStored(ev.worker, ev.hasParent, ev.parentLo, ev.parentHi, ev.words, 0, ev.count);
    } else if (ev.variant === REMOVED) {
      status = tree.applyRemoved(ev.worker, ev.words, 0, ev.count);
    } else {
      tree.clearWorker(ev.worker);
      status = 'ok';
    }
    if (status !== 'ok') rejected++;
  }
  return { ...ev.summary, rejected };
}
