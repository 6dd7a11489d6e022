/**
 * Open-addressing index of a tree's overflow pairs: (node, worker slot) -> pair. It makes
 * "does this worker already hold this node?" O(1) where it was a walk of the node's worker list,
 * which made storing a block that thousands of workers share cost O(workers) (fleet shapes:
 * 7.3 us per pair at 4,096 workers, 2.1 us at 1,024). Slots hold `pair + 1` (0 = empty); the key
 * is read back from the pair arrays. Linear probing with backward-shift deletion, load <= 0.75,
 * the same scheme as the edge table (edge-table.ts).
 */

function pairHash(node: number, slot: number): number {
  let h = Math.imul(node ^ Math.imul(slot, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 15;
  return Math.imul(h, 0x27d4eb2f) ^ (h >>> 13);
}

/** The pair arrays the index reads keys from (the node store's, replaced when they grow). */
export interface PairKeys {
  pNode: Int32Array;
  pWorker: Int32Array;
}

export class PairIndex {
  private slots = new Int32Array(64);
  private mask = 63;
  private count = 0;

  constructor(private readonly keys: PairKeys) {}

  get bytes(): number {
    return this.slots.byteLength;
  }

  /** The overflow pair of `slot` on `node`, or -1. */
  find(node: number, slot: number): number {
    const s = this.slots;
    const { pNode, pWorker } = this.keys;
    let i = pairHash(node, slot) & this.mask;
    for (;;) {
      const v = s[i]!;
      if (v === 0) return -1;
      const p = v - 1;
      if (pNode[p] === node && pWorker[p] === slot) return p;
      i = (i + 1) & this.mask;
    }
  }

  /** Adds pair `p` (its node and worker already written). */
  insert(p: number): void {
    if ((this.count + 1) * 4 > this.slots.length * 3) this.resize(this.slots.length * 2);
    this.place(this.slots, this.mask, p);
    this.count++;
  }

  /** Removes pair `p` (before its node and worker are overwritten). */
  remove(p: number): void {
    const s = this.slots;
    const mask = this.mask;
    const { pNode, pWorker } = this.keys;
    let i = pairHash(pNode[p]!, pWorker[p]!) & mask;
    while (s[i] !== p + 1) i = (i + 1) & mask;
    this.count--;
    for (;;) {
      s[i] = 0;
      let j = i;
      for (;;) {
        j = (j + 1) & mask;
        const v = s[j]!;
        if (v === 0) return;
        const q = v - 1;
        const home = pairHash(pNode[q]!, pWorker[q]!) & mask;
        // The entry at j may move to i unless its home lies cyclically in (i, j].
        if (i <= j ? home <= i || home > j : home <= i && home > j) {
          s[i] = v;
          i = j;
          break;
        }
      }
    }
  }

  private place(s: Int32Array, mask: number, p: number): void {
    let i = pairHash(this.keys.pNode[p]!, this.keys.pWorker[p]!) & mask;
    while (s[i] !== 0) i = (i + 1) & mask;
    s[i] = p + 1;
  }

  private resize(capacity: number): void {
    const old = this.slots;
    const next = new Int32Array(capacity);
    const mask = capacity - 1;
    for (let i = 0; i < old.length; i++) if (old[i] !== 0) this.place(next, mask, old[i]! - 1);
    this.slots = next;
    this.mask = mask;
  }
}
