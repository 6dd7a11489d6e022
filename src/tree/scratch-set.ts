/**
 * A reusable set of u64 values (as u32 halves) for one operation at a time, cleared in O(1) by
 * bumping a generation stamp. The tree uses it to catch an external hash that appears twice in
 * one Stored event (which would put one block at two places).
 */
import { hashKey } from './worker-table.js';

export class ScratchSet {
  private lo = new Uint32Array(256);
  private hi = new Uint32Array(256);
  private gen = new Uint32Array(256);
  private mask = 255;
  private current = 1;

  /** Empties the set, sized for up to `expected` insertions. */
  reset(expected: number): void {
    if (expected * 2 > this.gen.length) {
      let cap = this.gen.length;
      while (expected * 2 > cap) cap *= 2;
      this.lo = new Uint32Array(cap);
      this.hi = new Uint32Array(cap);
      this.gen = new Uint32Array(cap);
      this.mask = cap - 1;
      this.current = 0;
    }
    this.current++;
    if (this.current === 0xffffffff) {
      this.gen.fill(0);
      this.current = 1;
    }
  }

  /** Adds the value; returns false when it was already present. */
  add(lo: number, hi: number): boolean {
    const mask = this.mask;
    let i = hashKey(lo, hi) & mask;
    const lo32 = lo | 0;
    const hi32 = hi | 0;
    for (;;) {
      if (this.gen[i] !== this.current) {
        this.gen[i] = this.current;
        this.lo[i] = lo;
        this.hi[i] = hi;
        return true;
      }
      if ((this.lo[i]! | 0) === lo32 && (this.hi[i]! | 0) === hi32) return false;
      i = (i + 1) & mask;
    }
  }
}
