/**
 * One worker's reverse lookup: external block hash -> the worker's pair on a node.
 *
 * Slots hold an encoded `PairRef` only (0 = empty), no hash: the hash is read back from the pair
 * (for a member, at the worker's position in the node's set: member-sets.ts `find`, a scan of
 * a small set or a probe of a large one's table). A member's moves inside the pool change no
 * entry; a pair that goes inline -> member or back is repointed (`move`). Linear probing with
 * backward-shift deletion, load at most 0.75. Iterating the slots enumerates the worker's blocks,
 * which is what `clearWorker` and the dump use.
 *
 * A slot's 32 bits: the pair's node + 1 (bits 0-27: node ids stay below 2^28 - 1, node-store.ts
 * `MAX_NODES`), whether the pair is a member (bit 28), and the entry's distance from its home
 * slot, saturated at 7 (bits 29-31). Reading a pair's hash back is a cache miss into the node or
 * member arrays (two or more for a member); the distance spares most of them: a probe passes
 * over entries of other homes without reading their keys, and a removal's backward shift knows
 * where each following entry belongs. On the conversation workload a replay read keys back 18.4M
 * times (9.4M for homes, 9.6M to compare), and `remove` was 30 % of the apply profile.
 *
 * Capacities are not powers of two: a table grows 1.5x (a key's home slot is its hash scaled to
 * the capacity, `home`), so its load stays in [0.5, 0.75] instead of [0.375, 0.75]. On the
 * conversation workload (4 workers of 16,384 blocks) a power of two left every table at 32,768
 * slots for 16,384 entries: 8 bytes a pair; 1.5x steps give 23,643 slots, 5.5 bytes.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { nextCapacity, type ArrayStore } from './array-store.js';
import type { NodeStore, PairRef } from './node-store.js';
import { RangePool } from './range-pool.js';

export function hashKey(lo: number, hi: number): number {
  let h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 16;
  return Math.imul(h, 0xc2b2ae35) ^ (h >>> 13);
}

const ID_BITS = 0x0fffffff;
const MEMBER_BIT = 0x10000000;
/** A slot's pair bits (node and member flag), without its distance. */
const PAIR_BITS = 0x1fffffff;
const DIST_SHIFT = 29;
/** The distance a slot records at most: 7 means 7 or more (the key decides). */
const FAR = 7;

/** The pair bits of `ref` (never 0, so a slot holding a pair is never empty). */
const pairBits = (ref: number): number => (ref >= 0 ? ref + 1 : (~ref + 1) | MEMBER_BIT);
const decode = (v: number): PairRef => {
  const node = (v & ID_BITS) - 1;
  return ((v & MEMBER_BIT) !== 0 ? ~node : node) as PairRef;
};
/** A slot value: pair bits and the distance from home, saturated. */
const slotOf = (pair: number, dist: number): number => pair | ((dist < FAR ? dist : FAR) << DIST_SHIFT);

/**
 * The slots of the small worker tables of one tree (under `SLAB_BYTES`), as ranges of one array that grows in place
 * (the tree's private growable store, array-store.ts). Each table was an Int32Array of its own:
 * with its ArrayBuffer 184 bytes of heap objects, plus a malloc'd backing store and V8's record
 * of it, per worker (4,096 workers storing one 48-block prompt: ~7.7 bytes of RSS a pair for
 * tables of 324 bytes), and two allocations per new worker (9 % of that build). A range's view
 * is the array as it was when the range was taken: grown in place, an older view still covers
 * it, so tables keep no handle on the slab past `alloc`.
 */
export class TableSlab {
  /** The slab (the newest view; tables may hold older ones of the same buffer). */
  a: Int32Array;
  private readonly pool: RangePool;

  constructor(private readonly store: ArrayStore) {
    if (!store.inPlace) throw new KvIndexError(ErrorCode.Internal, 'a worker-table slab needs memory that grows in place');
    this.a = store.int32(SLAB_STEP, 0);
    this.pool = new RangePool((atLeast) => {
      if (atLeast > this.a.length) this.a = this.store.growInt32(this.a, nextCapacity(this.store, this.a.length, atLeast, SLAB_STEP), 0);
    });
  }

  /** Bytes of the slab (its capacity). */
  get bytes(): number {
    return this.a.byteLength;
  }

  /** A zeroed range of `n` slots; returns its start (`this.a` covers it). */
  alloc(n: number): number {
    const at = this.pool.alloc(n);
    this.a.fill(0, at, at + n);
    return at;
  }

  free(at: number, n: number): void {
    this.pool.free(at, n);
  }
}

/**
 * A slab's first size and least growth, in slots (a page): a tree whose few workers' tables
 * soon outgrow the slab (the conversation workload: 4 workers) keeps only this of it.
 */
const SLAB_STEP = 1024;

/**
 * Tables of this many bytes or more live in pages of their own: a growable SharedArrayBuffer
 * that reserves `RESERVE_BYTES` of address space and grows in place, its entries rehashed
 * through a scratch array. A fleet's tables grow together (1,000 workers, 1.5x steps to ~26k
 * slots each), and a table that moves to new memory at each step leaves the old one behind:
 * - in malloc memory, freed in pieces the heap keeps: ~50 MB of RSS at 16.4M pairs (2.9 bytes
 *   a pair); in a test of 1,000 tables, 193.9 MB of RSS for 136.4 MB of tables;
 * - in pages of their own, unmapped only when the thread's isolate collects the old buffer: a
 *   shard thread, whose heap is small, collected them late (16.4M pairs with 2 shards: RSS
 *   48.0 -> 51.7 bytes a pair).
 * Grown in place, nothing is left behind. Tables under a page stay in malloc memory, where a
 * page would be mostly empty.
 */
const PAGED_BYTES = 4096;
/**
 * Tables under this many bytes (capacities up to 122 slots: ~91 blocks) are ranges of the
 * tree's slab (`TableSlab`), larger ones under a page are plain arrays. The slab never shrinks:
 * with every table under a page in it, the conversation workload's 4 workers passing through
 * those sizes together left it at 20 KB (0.31 bytes a pair); with this bound it stays at its
 * first page.
 */
const SLAB_BYTES = 512;
const PAGE = 4096;
/**
 * Address space a paged table reserves (backed only as it grows): 16M slots, ~10M blocks of one
 * worker. A table that outgrows it moves to a reservation twice its size.
 */
const RESERVE_BYTES = 64 * 1024 * 1024;

/** The entries of a table being rehashed in place (one per thread, grown to the largest table). */
let scratch = new Int32Array(1024);

/** 2^-32: scales a uint32 hash to [0, 1). */
const SCALE = 2.3283064365386963e-10;
/** A table's first capacity (before any step). */
const FIRST = 16;
/** The slots of a table that has none yet. */
const EMPTY = new Int32Array(0);

export class WorkerTable {
  /** The array holding the slots: the slab's (from `base` on) or the table's own pages. */
  slots: Int32Array;
  /** Where the slots start in `slots` (0 in pages of its own). */
  base = 0;
  private cap: number;
  /**
   * The capacity the 1.5x steps asked for; `cap` may be more, the rest of its last page. The
   * next step grows from this, not from `cap`: rounding up at every step compounded (the
   * conversation tree's tables, 5.82 -> 6.75 bytes a pair).
   */
  private asked: number;
  /** Whether the slots are a range of the slab (else an array of their own). */
  private inSlab: boolean;
  count = 0;

  /**
   * `slot`: the worker's slot in the tree (completes its member refs). No slots until the
   * first insert or reservation (a worker's first event sizes its table: `reserveSteps`).
   */
  constructor(private readonly nodes: NodeStore, readonly slot: number, private readonly slab: TableSlab) {
    this.slots = EMPTY;
    this.cap = 0;
    this.asked = FIRST;
    this.inSlab = false;
  }

  /** Slots of the table (capacity); `refAt` and `isEmptyAt` take indexes below it. */
  get capacity(): number {
    return this.cap;
  }

  /**
   * The home slot of a hash: `h / 2^32 * cap` rounded down (a multiply where a power of two
   * would take a bit mask). (2^32 - 1) * cap lies below 2^32 * cap by far more than a double's
   * rounding, so the result is always < cap.
   */
  private home(lo: number, hi: number): number {
    return ((hashKey(lo, hi) >>> 0) * this.cap * SCALE) | 0;
  }

  /** Bytes of the table's own array (0 for a range of the slab, which the tree counts whole). */
  get bytes(): number {
    return this.inSlab ? 0 : this.slots.byteLength;
  }

  /**
   * Of `bytes`, those in pages of the table's own (a SharedArrayBuffer, which
   * `process.memoryUsage()` does not count); the slab is counted by the tree's store.
   */
  get sharedBytes(): number {
    return !this.inSlab && this.slots.buffer instanceof SharedArrayBuffer ? this.slots.byteLength : 0;
  }

  // Keys are compared as int32 (`x | 0`): a uint32 half above 2^31 is not a small integer in
  // V8, so passing or returning it through a call that is not inlined allocates a heap number.
  // That was ~36 MB of garbage per replay of the conversation workload in a shard thread, whose
  // scavenges (up to 5 ms) then ran inside write sections while lookups waited for the lock.

  /** Whether slot value `v` holds hash (lo, hi) (halves as int32): reads the pair's key. */
  private holds(v: number, lo: number, hi: number): boolean {
    const n = this.nodes;
    const node = (v & ID_BITS) - 1;
    if ((v & MEMBER_BIT) === 0) return (n.h0Lo[node]! | 0) === lo && (n.h0Hi[node]! | 0) === hi;
    const p = n.memberPos(node, this.slot);
    return p >= 0 && (n.members.mLo[p]! | 0) === lo && (n.members.mHi[p]! | 0) === hi;
  }

  /** The home slot of slot value `v`, from its key (read back once). */
  private keyHome(v: number): number {
    const n = this.nodes;
    const node = (v & ID_BITS) - 1;
    if ((v & MEMBER_BIT) === 0) return this.home(n.h0Lo[node]! | 0, n.h0Hi[node]! | 0);
    const p = n.memberPos(node, this.slot);
    return this.home(n.members.mLo[p]! | 0, n.members.mHi[p]! | 0);
  }

  /** The slot index holding the hash (halves as int32: `x | 0`), or -1. */
  findSlot(lo: number, hi: number): number {
    const cap = this.cap;
    if (cap === 0) return -1;
    const slots = this.slots;
    const b = this.base;
    let i = this.home(lo, hi);
    for (let k = 0; ; k++) {
      const v = slots[b + i]!;
      if (v === 0) return -1;
      // Only an entry of the same home can hold the key: its distance is this probe's.
      const d = v >>> DIST_SHIFT;
      if ((k < FAR ? d === k : d === FAR) && this.holds(v, lo, hi)) return i;
      i = i + 1 === cap ? 0 : i + 1;
    }
  }

  /** The worker's pair holding this external hash, or null. */
  find(lo: number, hi: number): PairRef | null {
    const s = this.findSlot(lo, hi);
    return s < 0 ? null : decode(this.slots[this.base + s]!);
  }

  /** Whether slot index `i` (below `capacity`) is empty. */
  isEmptyAt(i: number): boolean {
    return this.slots[this.base + i] === 0;
  }

  /** The pair stored at a slot index (for iteration: skip those `isEmptyAt`). */
  refAt(i: number): PairRef {
    return decode(this.slots[this.base + i]!);
  }

  /** Adds pair `ref` of hash (lo, hi) (halves as int32), not in the table yet (the pair is in the tree). */
  insert(ref: PairRef, lo: number, hi: number): void {
    if ((this.count + 1) * 4 > this.cap * 3) this.resize(this.cap === 0 ? this.asked : Math.max(Math.ceil(this.asked * 1.5), this.cap + 1));
    this.putFrom(this.home(lo, hi), pairBits(ref));
    this.count++;
  }

  /**
   * Makes room for `extra` more entries in one rehash (a bulk load that knows a worker's count:
   * bulk-load.ts), instead of one per 1.5x step on the way. Sized for a load of 0.625 once they
   * are in, the middle of the [0.5, 0.75] that 1.5x steps keep: the same bytes as a table grown
   * by events, and the worker's next stores after the load do not rehash at once (a table of 2M
   * entries takes tens of ms to rehash, on the event loop of a replica that just became ready).
   */
  reserve(extra: number): void {
    const need = this.count + extra;
    // Plain memory: a table sized once leaves no steps behind to collect, and the in-thread
    // restore of 16.4M pairs measured ~0.8 s slower with paged tables (4.1-4.7 against 5.2-5.6
    // s, 2 alternating rounds; the cause not isolated: the same faults, 3.5 ms a MB here).
    if (need * 4 > this.cap * 3) this.resize(Math.ceil(need * 1.6), false);
  }

  /**
   * Makes room for `extra` more entries in one rehash (a worker's first event: radix-tree.ts
   * `prepareStore`). A table with no slots yet is sized for them at the highest load the steps
   * allow (0.75), and 1.5x steps go on from there: 4,096 workers storing a 48-block prompt, 64
   * slots a worker instead of the 81 the steps from 16 reach (6.91 -> 5.42 bytes a pair); the
   * conversation workload's tables 6.06 -> 5.81 (sized at 1.6x the need, as `reserve` does,
   * they took 6.46). A table with slots takes the step that 1.5x steps of `insert` would reach.
   */
  reserveSteps(extra: number): void {
    const need = this.count + extra;
    if (need * 4 <= this.cap * 3) return;
    if (this.cap === 0) {
      this.resize(Math.max(FIRST, Math.ceil((need * 4) / 3)));
      return;
    }
    let asked = this.asked;
    do asked = Math.ceil(asked * 1.5);
    while (need * 4 > asked * 3);
    this.resize(Math.max(asked, this.cap + 1));
  }

  /**
   * Points the entry of pair `from`, of hash (lo, hi), at `to` (the same pair, now inline or now
   * a member), finding it by value from the hash's home slot: no key is read back on the way
   * (a pair in the middle of the switch has none to read).
   */
  move(lo: number, hi: number, from: PairRef, to: PairRef): void {
    const i = this.slotOfRef(lo, hi, from);
    if (i >= 0) this.slots[this.base + i] = (this.slots[this.base + i]! & ~PAIR_BITS) | pairBits(to);
  }

  /**
   * The slot index of pair `ref`'s entry, whose hash is (lo, hi), found by value from the hash's
   * home (a worker has one pair a node, so its ref names one entry), or -1.
   */
  private slotOfRef(lo: number, hi: number, ref: PairRef): number {
    const cap = this.cap;
    if (cap === 0) return -1;
    const slots = this.slots;
    const b = this.base;
    const v = pairBits(ref);
    let i = this.home(lo, hi);
    for (;;) {
      const x = slots[b + i]!;
      if ((x & PAIR_BITS) === v) return i;
      if (x === 0) return -1;
      i = i + 1 === cap ? 0 : i + 1;
    }
  }

  /** Removes the hash; returns false when it was absent. */
  remove(lo: number, hi: number): boolean {
    const i = this.findSlot(lo, hi);
    if (i < 0) return false;
    this.removeAt(i);
    return true;
  }

  /**
   * Removes the entry of pair `ref`, whose hash is (lo, hi), found by value as `move` finds it:
   * no key is read back to confirm it. Returns false when the table does not hold it.
   */
  removeRef(lo: number, hi: number, ref: PairRef): boolean {
    const i = this.slotOfRef(lo, hi, ref);
    if (i < 0) return false;
    this.removeAt(i);
    return true;
  }

  /** Empties slot index `i` and shifts the entries after it back over the gap. */
  private removeAt(i: number): void {
    const slots = this.slots;
    const b = this.base;
    const cap = this.cap;
    this.count--;
    for (;;) {
      slots[b + i] = 0;
      let j = i;
      for (;;) {
        j = j + 1 === cap ? 0 : j + 1;
        const v = slots[b + j]!;
        if (v === 0) return;
        const d = v >>> DIST_SHIFT;
        const home = d < FAR ? (j >= d ? j - d : j - d + cap) : this.keyHome(v);
        if (i <= j ? home <= i || home > j : home <= i && home > j) {
          slots[b + i] = slotOf(v & PAIR_BITS, i >= home ? i - home : i - home + cap);
          i = j;
          break;
        }
      }
    }
  }

  /** Gives the slots back (the worker leaves the tree: radix-tree.ts `removeWorker`). */
  dispose(): void {
    if (this.inSlab) this.slab.free(this.base, this.cap);
    this.slots = EMPTY;
    this.base = 0;
    this.cap = 0;
    this.count = 0;
    this.inSlab = false;
  }

  /** Re-places slot value `v` (a rehash: its home from its key, at the current capacity). */
  private place(v: number): void {
    this.putFrom(this.keyHome(v), v & PAIR_BITS);
  }

  /** Writes `pair` into the first empty slot from `home` on, with its distance from there. */
  private putFrom(home: number, pair: number): void {
    const cap = this.cap;
    const slots = this.slots;
    const b = this.base;
    let i = home;
    let k = 0;
    while (slots[b + i] !== 0) {
      i = i + 1 === cap ? 0 : i + 1;
      k++;
    }
    slots[b + i] = slotOf(pair, k);
  }

  private resize(capacity: number, paged = true): void {
    const old = this.slots;
    const oldBase = this.base;
    const oldCap = this.cap;
    const wasInSlab = this.inSlab;
    this.asked = capacity;
    if (capacity * 4 < SLAB_BYTES) {
      // A range of the slab: the old range is rehashed from, then given back (the slab grows
      // in place, so `old` still covers it after `alloc`).
      const at = this.slab.alloc(capacity);
      this.slots = this.slab.a;
      this.base = at;
      this.cap = capacity;
      this.inSlab = true;
      this.rehashFrom(old, oldBase, oldCap);
      if (wasInSlab) this.slab.free(oldBase, oldCap);
      return;
    }
    this.base = 0;
    this.inSlab = false;
    if (!paged || capacity * 4 < PAGED_BYTES) {
      this.slots = new Int32Array(capacity);
      this.cap = capacity;
      this.rehashFrom(old, oldBase, oldCap);
      if (wasInSlab) this.slab.free(oldBase, oldCap);
      return;
    }
    const bytes = Math.ceil((capacity * 4) / PAGE) * PAGE; // whole pages: the slack is slots
    capacity = bytes / 4;
    const sab = old.buffer;
    if (!wasInSlab && sab instanceof SharedArrayBuffer && sab.growable && bytes <= sab.maxByteLength) {
      // In place: the entries out to the scratch, the old slots cleared, the buffer grown.
      if (scratch.length < this.count) scratch = new Int32Array(Math.max(this.count, scratch.length * 2));
      let n = 0;
      for (let i = 0; i < old.length; i++) if (old[i] !== 0) scratch[n++] = old[i]!;
      old.fill(0);
      sab.grow(bytes);
      this.slots = new Int32Array(sab, 0, capacity);
      this.cap = capacity;
      for (let i = 0; i < n; i++) this.place(scratch[i]!);
      return;
    }
    // Its length given: a view that tracks a growable buffer's length reads several times slower.
    this.slots = new Int32Array(new SharedArrayBuffer(bytes, { maxByteLength: Math.max(RESERVE_BYTES, 2 * bytes) }), 0, capacity);
    this.cap = capacity;
    this.rehashFrom(old, oldBase, oldCap);
    if (wasInSlab) this.slab.free(oldBase, oldCap);
  }

  /** Places the entries of `n` slots of `old` from `at` on into the current slots. */
  private rehashFrom(old: Int32Array, at: number, n: number): void {
    for (let i = at; i < at + n; i++) {
      const v = old[i]!;
      if (v !== 0) this.place(v);
    }
  }
}
