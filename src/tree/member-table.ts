/**
 * A member set's own table (member-sets.ts, sets of `TABLE_FROM`+ workers): open addressing
 * from a worker slot to its index in the set + 1 (0 = empty), a range of the sets' shared
 * `tabs` array of 16-bit words. The key is read back from the set's slots
 * (`mSlot[off + entry - 1]`), so an entry is one word (two past capacity `WIDE`) and a set that
 * moves in the pool keeps its table. Linear probing with backward-shift deletion (the scheme of
 * edge-table.ts and worker-table.ts), load at most 0.75 of the table's own entry capacity (a
 * header of 2 words before the entries: member-sets.ts builds a table for twice the members
 * and doubles it when full), which a set's growth does not change.
 */

/** 2^-32: scales a uint32 hash to [0, 1). */
const SCALE = 2.3283064365386963e-10;

/**
 * Capacities past which an entry takes two 16-bit words instead of one (an entry is an index
 * in the set + 1). One word halves the tables of sets up to 65,535 workers: 8.0 -> 4.0 bytes a
 * pair at 4,096 workers on one 48-block prompt.
 */
const WIDE = 0xffff;

/** Slots of the member table of a set of capacity `cap`: its load stays at most 0.75. */
export function tableSize(cap: number): number {
  return ((cap * 4) / 3 + 1) | 0;
}

/** 16-bit words of the member table of a set of capacity `cap`. */
export function tableWords(cap: number): number {
  return cap > WIDE ? 2 * tableSize(cap) : tableSize(cap);
}

/** Entry `i` of the table at `t` (`wide`: two words an entry). */
export function entryAt(tabs: Uint16Array, t: number, i: number, wide: boolean): number {
  return wide ? tabs[t + 2 * i]! | (tabs[t + 2 * i + 1]! << 16) : tabs[t + i]!;
}

function setEntry(tabs: Uint16Array, t: number, i: number, v: number, wide: boolean): void {
  if (wide) {
    tabs[t + 2 * i] = v & 0xffff;
    tabs[t + 2 * i + 1] = v >>> 16;
  } else {
    tabs[t + i] = v;
  }
}

/** Whether a set of capacity `cap` has two-word entries. */
export function isWide(cap: number): boolean {
  return cap > WIDE;
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

/**
 * Puts entry `v` (index + 1) of worker `slot` into the table at `t` of a set of capacity `cap`
 * (at slot `hole` if >= 0).
 */
export function tablePut(tabs: Uint16Array, t: number, cap: number, slot: number, v: number, hole: number): void {
  const n = tableSize(cap);
  const wide = cap > WIDE;
  let i = hole;
  if (i < 0) {
    i = memberHome(slot, n);
    while (entryAt(tabs, t, i, wide) !== 0) i = i + 1 === n ? 0 : i + 1;
  }
  setEntry(tabs, t, i, v, wide);
}

/** Rewrites worker `slot`'s entry `from` (present) as `to` (its member moved in the set). */
export function tableRenumber(tabs: Uint16Array, t: number, cap: number, slot: number, from: number, to: number): void {
  const n = tableSize(cap);
  const wide = cap > WIDE;
  let i = memberHome(slot, n);
  while (entryAt(tabs, t, i, wide) !== from) i = i + 1 === n ? 0 : i + 1;
  setEntry(tabs, t, i, to, wide);
}

/**
 * Removes worker `slot`'s entry (present) from the table at `t` of a set of capacity `cap`,
 * whose members start at `off` in `mSlot` (backward shift: the entries after it that may move
 * back do).
 */
export function tableDelete(tabs: Uint16Array, t: number, cap: number, mSlot: Int32Array, off: number, slot: number): void {
  const n = tableSize(cap);
  const wide = cap > WIDE;
  let i = memberHome(slot, n);
  while (mSlot[off + entryAt(tabs, t, i, wide) - 1] !== slot) i = i + 1 === n ? 0 : i + 1;
  for (;;) {
    setEntry(tabs, t, i, 0, wide);
    let j = i;
    for (;;) {
      j = j + 1 === n ? 0 : j + 1;
      const v = entryAt(tabs, t, j, wide);
      if (v === 0) return;
      const h = memberHome(mSlot[off + v - 1]!, n);
      // The entry at j may move to i unless its home lies cyclically in (i, j].
      if (i <= j ? h <= i || h > j : h <= i && h > j) {
        setEntry(tabs, t, i, v, wide);
        i = j;
        break;
      }
    }
  }
}
