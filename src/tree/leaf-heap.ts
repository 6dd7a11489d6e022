/**
 * A binary min-heap of (stamp, slot) entries in typed arrays: the LRU order of evictable leaves
 * (a simulated worker cache's blocks, src/trace/worker-cache.ts; the tree's nodes under a pair
 * budget, radix-tree.ts). Entries are never updated in place; a cache pushes a
 * fresh entry when a block becomes a leaf or a leaf is touched, and validates what it pops
 * (lazy deletion), which keeps every operation O(log n) without a position index.
 */
export class LeafHeap {
  private stamps: Float64Array;
  private slots: Int32Array;
  private n = 0;

  constructor(capacity: number) {
    const cap = Math.max(16, capacity);
    this.stamps = new Float64Array(cap);
    this.slots = new Int32Array(cap);
  }

  get size(): number {
    return this.n;
  }

  get bytes(): number {
    return this.stamps.length * 12;
  }

  push(stamp: number, slot: number): void {
    if (this.n === this.stamps.length) this.grow();
    const stamps = this.stamps;
    const slots = this.slots;
    let i = this.n++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const ps = stamps[p]!;
      if (ps <= stamp) break;
      stamps[i] = ps;
      slots[i] = slots[p]!;
      i = p;
    }
    stamps[i] = stamp;
    slots[i] = slot;
  }

  /** Stamp of the minimum entry (the heap must not be empty). */
  topStamp(): number {
    return this.stamps[0]!;
  }

  /** Slot of the minimum entry (the heap must not be empty). */
  topSlot(): number {
    return this.slots[0]!;
  }

  /** Removes the minimum entry (the heap must not be empty). */
  pop(): void {
    const stamps = this.stamps;
    const slots = this.slots;
    const n = --this.n;
    if (n === 0) return;
    const stamp = stamps[n]!;
    const slot = slots[n]!;
    let i = 0;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && stamps[c + 1]! < stamps[c]!) c++;
      if (stamps[c]! >= stamp) break;
      stamps[i] = stamps[c]!;
      slots[i] = slots[c]!;
      i = c;
    }
    stamps[i] = stamp;
    slots[i] = slot;
  }

  clear(): void {
    this.n = 0;
  }

  private grow(): void {
    const stamps = new Float64Array(this.stamps.length * 2);
    stamps.set(this.stamps);
    const slots = new Int32Array(this.slots.length * 2);
    slots.set(this.slots);
    this.stamps = stamps;
    this.slots = slots;
  }
}
