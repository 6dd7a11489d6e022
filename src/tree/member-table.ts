/**
 * A member set's own table (member-sets.ts, sets of `TABLE_FROM`+ workers): open addressing
 * from a worker slot to its index in the set + 1 (0 = empty), a range of the sets' shared
 * `tabs` array. The key is read back from the set's slots (`mSlot[off + entry - 1]`), so an
 * entry is 4 bytes and a set that moves in the pool keeps its table. Linear probing with
 * backward-shift deletion (the scheme of edge-table.ts and worker-table.ts), load at most 0.75
 * of the set's capacity.
 */

/** 2^-32: scales a uint32 hash to [0, 1). */
const SCALE = 2.3283064365386963e-10;

/** Slots of the member table of a set of capacity `cap`: its load stays at most 0.75. */
export function tableSize(cap: number): number {
  return ((cap * 4) / 3 + 1) | 0;
}

/**
 * The home slot of worker `slot` in a member table of `n` slots: Fibonacci hashing, unmixed.
 * Slots are handed out in order, and the multiples of the golden ratio spread consecutive ones
 * evenly over the table (three-gap theorem), so a prompt that a whole fleet shares fills its
 * table with short runs; mixed further, the runs of linear probing were random-like (a missed
 * `find` probed ~5 slots: 24 % of the shared-prompt build).
 */
export function memberHome(slot: number, n: number): number {
  return ((Math.imul(slot, 0x9e3779b9) >>> 0) * n * SCALE) | 0;
}

/** Puts entry `v` (index + 1) of worker `slot` into the table at `t` of `n` slots (at `hole` if >= 0). */
export function tablePut(tabs: Int32Array, t: number, n: number, slot: number, v: number, hole: number): void {
  let i = hole;
  if (i < 0) {
    i = memberHome(slot, n);
    while (tabs[t + i] !== 0) i = i + 1 === n ? 0 : i + 1;
  }
  tabs[t + i] = v;
}

/**
 * Removes worker `slot`'s entry (present) from the table at `t` of `n` slots, whose set's
 * members start at `off` in `mSlot` (backward shift: the entries after it that may move back do).
 */
export function tableDelete(tabs: Int32Array, t: number, n: number, mSlot: Int32Array, off: number, slot: number): void {
  let i = memberHome(slot, n);
  while (mSlot[off + tabs[t + i]! - 1] !== slot) i = i + 1 === n ? 0 : i + 1;
  for (;;) {
    tabs[t + i] = 0;
    let j = i;
    for (;;) {
      j = j + 1 === n ? 0 : j + 1;
      const v = tabs[t + j]!;
      if (v === 0) return;
      const h = memberHome(mSlot[off + v - 1]!, n);
      // The entry at j may move to i unless its home lies cyclically in (i, j].
      if (i <= j ? h <= i || h > j : h <= i && h > j) {
        tabs[t + i] = v;
        i = j;
        break;
      }
    }
  }
}
