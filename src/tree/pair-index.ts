/**
 * Open-addressing index of the members of a tree's member sets (member-sets.ts): (set, worker
 * slot) -> the member's position in the pool. It makes
 * "does this worker already hold this node?" O(1) where it was a walk of the node's worker list,
 * which made storing a block that thousands of workers share cost O(workers) (fleet shapes:
 * 7.3 us per pair at 4,096 workers, 2.1 us at 1,024). Slots hold `position + 1` (0 = empty); the
 * key is read back from the pool (the member's owner set and slot), so an entry is 4 bytes. Linear probing with backward-shift deletion, load <= 0.75,
 * the same scheme as the edge table (edge-table.ts), with the worker tables' capacities
 * (worker-table.ts: 1.5x steps, home slot = hash scaled to the capacity), so the load stays in
 * [0.5, 0.75] instead of [0.375, 0.75] (5.3-8 bytes per member instead of 5.3-10.7).
 */

/** 2^-32: scales a uint32 hash to [0, 1). */
const SCALE = 2.3283064365386963e-10;

function pairHash(set: number, slot: number): number {
  let h = Math.imul(set ^ Math.imul(slot, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 15;
  return Math.imul(h, 0x27d4eb2f) ^ (h >>> 13);
}

/** The home slot of hash `h` in a table of `cap` slots (worker-table.ts `home`). */
function home(h: number, cap: number): number {
  return ((h >>> 0) * cap * SCALE) | 0;
}

/** The pool arrays the index reads keys from (replaced when they grow). */
export interface PairKeys {
  /** Owner set of each position. */
  mSet: Int32Array;
  /** Worker slot of each position. */
  mSlot: Int32Array;
}

export class PairIndex {
  private slots = new Int32Array(64);
  private cap = 64;
  private count = 0;
  /**
   * The empty slot where the last `find` that missed stopped: where its key goes if it is
   * inserted next (`insert`'s `hole`), saving the second probe of the same run of slots.
   */
  hole = -1;

  constructor(private readonly keys: PairKeys) {}

  get bytes(): number {
    return this.slots.byteLength;
  }

  /** The position of worker `slot` in set `set`, or -1. */
  find(set: number, slot: number): number {
    const s = this.slots;
    const cap = this.cap;
    const { mSet, mSlot } = this.keys;
    let i = home(pairHash(set, slot), cap);
    for (;;) {
      const v = s[i]!;
      if (v === 0) {
        this.hole = i;
        return -1;
      }
      const p = v - 1;
      if (mSet[p] === set && mSlot[p] === slot) return p;
      i = i + 1 === cap ? 0 : i + 1;
    }
  }

  /** The entry of position `from` now names `to`, where the same member was copied (same key). */
  move(from: number, to: number): void {
    const s = this.slots;
    const cap = this.cap;
    const { mSet, mSlot } = this.keys;
    let i = home(pairHash(mSet[to]!, mSlot[to]!), cap);
    while (s[i] !== from + 1) i = i + 1 === cap ? 0 : i + 1;
    s[i] = to + 1;
  }

  /**
   * Adds position `p` (its set and slot already written). `hole`: the `hole` of a `find` of the
   * same key that missed, with no insert or removal since (moves keep it empty), or -1.
   */
  insert(p: number, hole = -1): void {
    if ((this.count + 1) * 4 > this.cap * 3) {
      this.resize(Math.ceil(this.cap * 1.5));
      hole = -1;
    }
    if (hole >= 0) this.slots[hole] = p + 1;
    else this.place(this.slots, this.cap, p);
    this.count++;
  }

  /** Removes position `p` (before its set and slot are overwritten). */
  remove(p: number): void {
    const s = this.slots;
    const cap = this.cap;
    const { mSet, mSlot } = this.keys;
    let i = home(pairHash(mSet[p]!, mSlot[p]!), cap);
    while (s[i] !== p + 1) i = i + 1 === cap ? 0 : i + 1;
    this.count--;
    for (;;) {
      s[i] = 0;
      let j = i;
      for (;;) {
        j = j + 1 === cap ? 0 : j + 1;
        const v = s[j]!;
        if (v === 0) return;
        const q = v - 1;
        const h = home(pairHash(mSet[q]!, mSlot[q]!), cap);
        // The entry at j may move to i unless its home lies cyclically in (i, j].
        if (i <= j ? h <= i || h > j : h <= i && h > j) {
          s[i] = v;
          i = j;
          break;
        }
      }
    }
  }

  private place(s: Int32Array, cap: number, p: number): void {
    let i = home(pairHash(this.keys.mSet[p]!, this.keys.mSlot[p]!), cap);
    while (s[i] !== 0) i = i + 1 === cap ? 0 : i + 1;
    s[i] = p + 1;
  }

  private resize(capacity: number): void {
    const old = this.slots;
    const next = new Int32Array(capacity);
    for (let i = 0; i < old.length; i++) if (old[i] !== 0) this.place(next, capacity, old[i]! - 1);
    this.slots = next;
    this.cap = capacity;
  }
}
