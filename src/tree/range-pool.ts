/**
 * Allocation of contiguous ranges in a pool of array positions (the member sets of
 * member-sets.ts: one range per node held by two or more workers). The owner keeps the arrays;
 * the pool only hands out positions and tells the owner when its arrays must grow.
 *
 * Small ranges (under `SMALL` positions: almost every set on real traces, 2 to 5 workers) go to
 * a free list per exact size: a node that goes 1 -> 2 -> 1 workers again and again reuses the
 * same range, in O(1). Larger ranges go to free ranges kept sorted by start, merged when they
 * touch and taken first fit: sets that thousands of workers join one after another (a shared
 * prompt) grow in lockstep, each freeing a range of a size the others no longer need, and per
 * size lists kept every outgrown generation (the pool held 2.2x its members at 4,096 workers,
 * docs/layout.md). A range that ends the pool, or is followed by free positions, grows in place.
 */

/** Ranges under this many positions are kept on per-size free lists. */
const SMALL = 64;

export class RangePool {
  /** Positions below this have been handed out (live or free). */
  top = 0;
  private readonly small: number[][] = [];
  private readonly freeStart: number[] = [];
  private readonly freeEnd: number[] = [];

  /** `grow(atLeast)` must make the owner's arrays hold at least `atLeast` positions. */
  constructor(private readonly grow: (atLeast: number) => void) {
    for (let i = 0; i < SMALL; i++) this.small.push([]);
  }

  /** Positions on the free lists and free ranges (not yet handed out again). */
  get freePositions(): number {
    let n = 0;
    for (let i = 0; i < SMALL; i++) n += this.small[i]!.length * i;
    for (let i = 0; i < this.freeStart.length; i++) n += this.freeEnd[i]! - this.freeStart[i]!;
    return n;
  }

  /** A range of `n` positions; returns its start. */
  alloc(n: number): number {
    if (n < SMALL) {
      const list = this.small[n]!;
      if (list.length > 0) return list.pop()!;
      return this.takeTop(n);
    }
    const fs = this.freeStart;
    const fe = this.freeEnd;
    for (let i = 0; i < fs.length; i++) {
      const start = fs[i]!;
      if (fe[i]! - start < n) continue;
      fs[i] = start + n;
      if (fs[i] === fe[i]) {
        fs.splice(i, 1);
        fe.splice(i, 1);
      }
      return start;
    }
    return this.takeTop(n);
  }

  /** Forgets every free range: positions [0, top) are handed out (the owner compacted them). */
  reset(top: number): void {
    for (let i = 0; i < SMALL; i++) this.small[i]!.length = 0;
    this.freeStart.length = 0;
    this.freeEnd.length = 0;
    this.top = top;
  }

  /** Gives back the range [start, start + n). */
  free(start: number, n: number): void {
    if (n < SMALL) {
      this.small[n]!.push(start);
      return;
    }
    const end = start + n;
    const fs = this.freeStart;
    const fe = this.freeEnd;
    let lo = 0;
    let hi = fs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (fs[mid]! < start) lo = mid + 1;
      else hi = mid;
    }
    const before = lo > 0 && fe[lo - 1] === start;
    const after = lo < fs.length && fs[lo] === end;
    if (before && after) {
      fe[lo - 1] = fe[lo]!;
      fs.splice(lo, 1);
      fe.splice(lo, 1);
    } else if (before) {
      fe[lo - 1] = end;
    } else if (after) {
      fs[lo] = start;
    } else {
      fs.splice(lo, 0, start);
      fe.splice(lo, 0, end);
    }
    const last = fs.length - 1;
    if (fe[last] === this.top) {
      this.top = fs[last]!;
      fs.pop();
      fe.pop();
    }
  }

  /**
   * Takes the `n` positions from `at` on if they are free ranges or past the pool's end (a range
   * ending at `at` then grows in place); returns whether it did. Small free lists are not
   * searched: their ranges are not merged.
   */
  extend(at: number, n: number): boolean {
    if (at === this.top) {
      this.takeTop(n);
      return true;
    }
    const fs = this.freeStart;
    const i = fs.indexOf(at);
    if (i < 0) return false;
    const fe = this.freeEnd;
    if (fe[i]! - at < n) return false;
    fs[i] = at + n;
    if (fs[i] === fe[i]) {
      fs.splice(i, 1);
      fe.splice(i, 1);
    }
    return true;
  }

  private takeTop(n: number): number {
    const start = this.top;
    this.top += n;
    this.grow(this.top);
    return start;
  }
}
