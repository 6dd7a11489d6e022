/**
 * One worker's reverse lookup: external block hash -> the worker's pair on a node.
 *
 * Slots hold an encoded `PairRef` only (0 = empty; `ref + 1` for inline pairs, `ref` itself for
 * overflow pairs, which are negative); the hash is read back from the pair. Linear probing with
 * backward-shift deletion, load at most 0.75. Iterating the slots enumerates the worker's blocks,
 * which is what `clearWorker` and the dump use.
 */
import type { NodeStore, PairRef } from './node-store.js';

export function hashKey(lo: number, hi: number): number {
  let h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 16;
  return Math.imul(h, 0xc2b2ae35) ^ (h >>> 13);
}

const encode = (ref: number): number => (ref >= 0 ? ref + 1 : ref);
const decode = (v: number): PairRef => (v > 0 ? v - 1 : v) as PairRef;

export class WorkerTable {
  slots: Int32Array;
  private mask: number;
  count = 0;

  constructor(private readonly nodes: NodeStore) {
    this.slots = new Int32Array(16);
    this.mask = 15;
  }

  get bytes(): number {
    return this.slots.byteLength;
  }

  // Keys are compared as int32 (`x | 0`): a uint32 half above 2^31 is not a small integer in
  // V8, so passing or returning it through a call that is not inlined allocates a heap number.
  // That was ~36 MB of garbage per replay of the conversation workload in a shard thread, whose
  // scavenges (up to 5 ms) then ran inside write sections while lookups waited for the lock.
  private keyLo(v: number): number {
    return (v > 0 ? this.nodes.h0Lo[v - 1]! : this.nodes.pLo[~v]!) | 0;
  }

  private keyHi(v: number): number {
    return (v > 0 ? this.nodes.h0Hi[v - 1]! : this.nodes.pHi[~v]!) | 0;
  }

  /** The slot index holding the hash (halves as int32: `x | 0`), or -1. */
  findSlot(lo: number, hi: number): number {
    const slots = this.slots;
    const mask = this.mask;
    let i = hashKey(lo, hi) & mask;
    for (;;) {
      const v = slots[i]!;
      if (v === 0) return -1;
      if (this.keyLo(v) === lo && this.keyHi(v) === hi) return i;
      i = (i + 1) & mask;
    }
  }

  /** The worker's pair holding this external hash, or null. */
  find(lo: number, hi: number): PairRef | null {
    const s = this.findSlot(lo, hi);
    return s < 0 ? null : decode(this.slots[s]!);
  }

  /** The pair stored at a slot (for iteration: slots with value 0 are empty). */
  refAt(slot: number): PairRef {
    return decode(this.slots[slot]!);
  }

  /** Adds a pair whose hash is not in the table yet (its key is already in the pair arrays). */
  insert(ref: PairRef): void {
    if ((this.count + 1) * 4 > this.slots.length * 3) this.resize(this.slots.length * 2);
    this.place(encode(ref));
    this.count++;
  }

  /** Points the entry of an existing hash at another pair (the pair moved storage). */
  repoint(lo: number, hi: number, ref: PairRef): void {
    const s = this.findSlot(lo, hi);
    if (s >= 0) this.slots[s] = encode(ref);
  }

  /** Removes the hash; returns false when it was absent. */
  remove(lo: number, hi: number): boolean {
    let i = this.findSlot(lo, hi);
    if (i < 0) return false;
    const slots = this.slots;
    const mask = this.mask;
    this.count--;
    for (;;) {
      slots[i] = 0;
      let j = i;
      for (;;) {
        j = (j + 1) & mask;
        const v = slots[j]!;
        if (v === 0) return true;
        const home = hashKey(this.keyLo(v), this.keyHi(v)) & mask;
        if (i <= j ? home <= i || home > j : home <= i && home > j) {
          slots[i] = v;
          i = j;
          break;
        }
      }
    }
  }

  private place(v: number): void {
    const mask = this.mask;
    let i = hashKey(this.keyLo(v), this.keyHi(v)) & mask;
    while (this.slots[i] !== 0) i = (i + 1) & mask;
    this.slots[i] = v;
  }

  private resize(capacity: number): void {
    const old = this.slots;
    this.slots = new Int32Array(capacity);
    this.mask = capacity - 1;
    for (let i = 0; i < old.length; i++) {
      const v = old[i]!;
      if (v !== 0) this.place(v);
    }
  }
}
