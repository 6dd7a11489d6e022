/**
 * Open-addressing table of the tree's edges: (parent node, tokens hash) -> child node.
 *
 * Slots hold only `child + 1` (0 = empty); the key is read back from the node arrays of the
 * child (`parent`, `tokLo`, `tokHi`), so an edge costs 4 bytes per slot instead of 16. Linear
 * probing with backward-shift deletion (no tombstones, so lookups never slow down with churn).
 * Load stays at or below 0.75.
 */
import type { NodeId, NodeStore } from './node-store.js';

export function edgeHash(parent: number, lo: number, hi: number): number {
  let h = Math.imul(lo ^ Math.imul(parent, 0x9e3779b1), 0x85ebca6b) ^ Math.imul(hi, 0xc2b2ae35);
  h ^= h >>> 15;
  return Math.imul(h, 0x27d4eb2f) ^ (h >>> 13);
}

export class EdgeTable {
  private slots: Int32Array;
  private mask: number;
  private count = 0;

  constructor(private readonly nodes: NodeStore, capacity = 1024) {
    this.slots = new Int32Array(capacity);
    this.mask = capacity - 1;
  }

  get bytes(): number {
    return this.slots.byteLength;
  }

  /** The child of `parent` keyed by the tokens hash (lo, hi), or -1. */
  find(parent: number, lo: number, hi: number): number {
    const slots = this.slots;
    const mask = this.mask;
    const nodes = this.nodes;
    const par = nodes.parent;
    const tl = nodes.tokLo;
    const th = nodes.tokHi;
    let i = edgeHash(parent, lo, hi) & mask;
    for (;;) {
      const v = slots[i]!;
      if (v === 0) return -1;
      const c = v - 1;
      if (tl[c] === lo && th[c] === hi && par[c] === parent) return c;
      i = (i + 1) & mask;
    }
  }

  /** Adds the edge of a freshly allocated child (its key is already in the node arrays). */
  insert(child: NodeId): void {
    if ((this.count + 1) * 4 > this.slots.length * 3) this.resize(this.slots.length * 2);
    this.place(child);
    this.count++;
  }

  /** Removes the edge leading to `child`. */
  remove(child: NodeId): void {
    const slots = this.slots;
    const mask = this.mask;
    const nodes = this.nodes;
    let i = edgeHash(nodes.parent[child]!, nodes.tokLo[child]!, nodes.tokHi[child]!) & mask;
    while (slots[i] !== child + 1) i = (i + 1) & mask;
    this.count--;
    // Backward-shift: move later entries of the cluster into the hole when their home allows.
    for (;;) {
      slots[i] = 0;
      let j = i;
      for (;;) {
        j = (j + 1) & mask;
        const v = slots[j]!;
        if (v === 0) return;
        const c = v - 1;
        const home = edgeHash(nodes.parent[c]!, nodes.tokLo[c]!, nodes.tokHi[c]!) & mask;
        // The entry at j may move to i unless its home lies cyclically in (i, j].
        if (i <= j ? home <= i || home > j : home <= i && home > j) {
          slots[i] = v;
          i = j;
          break;
        }
      }
    }
  }

  private place(child: number): void {
    const nodes = this.nodes;
    const mask = this.mask;
    let i = edgeHash(nodes.parent[child]!, nodes.tokLo[child]!, nodes.tokHi[child]!) & mask;
    while (this.slots[i] !== 0) i = (i + 1) & mask;
    this.slots[i] = child + 1;
  }

  private resize(capacity: number): void {
    const old = this.slots;
    this.slots = new Int32Array(capacity);
    this.mask = capacity - 1;
    for (let i = 0; i < old.length; i++) {
      const v = old[i]!;
      if (v !== 0) this.place(v - 1);
    }
  }
}
