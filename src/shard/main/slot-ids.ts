/**
 * One shard's worker ids as bigints, by slot, for the Map-returning lookups on the calling
 * thread: the in-thread tree keeps one bigint per slot, and so does each shard's reader. An entry
 * is trusted only while the slot's id words (read from shared memory under the shard's lock)
 * equal the words it was made from, so a slot the shard reuses for another worker after
 * `removeWorker` is a miss, never a wrong id. Entries are made after the lock is released
 * (score-list.ts), so a lookup never allocates while it holds a shard's lock.
 */
import { u64FromHalves } from '../../protocol/u64-text.js';

export class SlotIds {
  private ids: Array<bigint | undefined> = [];
  private lo = new Uint32Array(16);
  private hi = new Uint32Array(16);

  /** The id of `slot` if the cache holds it for the words (lo, hi); undefined otherwise. */
  cached(slot: number, lo: number, hi: number): bigint | undefined {
    const id = this.ids[slot];
    return id !== undefined && this.lo[slot] === lo && this.hi[slot] === hi ? id : undefined;
  }

  /** Makes the id of the words (lo, hi) and keeps it for `slot`. */
  make(slot: number, lo: number, hi: number): bigint {
    if (slot >= this.lo.length) {
      const cap = Math.max(slot + 1, this.lo.length * 2);
      const nlo = new Uint32Array(cap);
      const nhi = new Uint32Array(cap);
      nlo.set(this.lo);
      nhi.set(this.hi);
      this.lo = nlo;
      this.hi = nhi;
    }
    while (this.ids.length <= slot) this.ids.push(undefined);
    const id = u64FromHalves(hi, lo);
    this.ids[slot] = id;
    this.lo[slot] = lo;
    this.hi[slot] = hi;
    return id;
  }
}
