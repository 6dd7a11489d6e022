/**
 * Open-addressing table of the tree's edges: (parent node, tokens hash) -> child node, for every
 * child that is not its parent's first child (the node record's child word reaches that one,
 * and every lookup step compares it before probing: `findChild`, node-store.ts). On the
 * conversation workload 526 of 63,603 nodes are not first children: the table holds 1 % of the
 * edges it held when it had them all, and a pair costs 8 bytes less (65 -> 57 bytes of arrays).
 *
 * Slots hold only `child + 1` (0 = empty) and, in bits 28-30, a 3-bit tag of the edge's hash
 * (`EDGE_ID`); the key is read back from the child's `parent` and the tokens hash in its node
 * record, so an edge costs 4 bytes per slot instead of 16. The tag skips the records of 7 in 8
 * other entries a probe passes (each a read of a random record). Linear
 * probing with backward-shift deletion (no tombstones, so lookups never slow down with churn).
 * Load stays at or below 0.75.
 *
 * Shared (a shard's tree, read by lookups on another thread): the table lives in one of two
 * growable SharedArrayBuffers. Rebuilding a table costs ~90 ns per edge (1M edges ~90 ms), so
 * it must never happen while readers are locked out: `reserve` builds the larger table in the
 * inactive buffer before the writer takes the lock, and `commit`, under the lock, only switches
 * buffers and publishes which one is active.
 */
import { MAX_SHARED_BYTES } from './array-store.js';
import type { NodeId, NodeStore } from './node-store.js';
import type { UnitLog } from './unit-log.js';

/**
 * Node ids in slots (`child + 1` fits 28 bits: node-store.ts `MAX_NODES`); the 3 bits above
 * hold the top 3 bits of the edge's hash (`edgeHash(..) >>> 29`), bit 31 stays 0.
 */
export const EDGE_ID = 0x0fffffff;

/** The slot value of an edge to `child` whose hash is `h`. */
function slotValue(child: number, h: number): number {
  return (child + 1) | ((h >>> 29) << 28);
}

export function edgeHash(parent: number, lo: number, hi: number): number {
  let h = Math.imul(lo ^ Math.imul(parent, 0x9e3779b1), 0x85ebca6b) ^ Math.imul(hi, 0xc2b2ae35);
  h ^= h >>> 15;
  return Math.imul(h, 0x27d4eb2f) ^ (h >>> 13);
}

/**
 * The child of `parent` keyed by the tokens hash (lo, hi) in an edge table's slots, or -1. The
 * one probe loop of the tree's writer and of lookups reading a shard's tree from shared memory.
 */
export function findEdge(
  slots: Int32Array, mask: number, par: Int32Array, node: Int32Array,
  parent: number, lo: number, hi: number,
): number {
  // Halves hashed and compared as int32, the form of the node records (callers may pass either
  // form; see worker-table.ts on why int32): hashed as given, edgeHash saw int32 from the
  // records and uint32 from lookups' words, and applying the conversation workload measured
  // ~8 % slower.
  const lo32 = lo | 0;
  const hi32 = hi | 0;
  const h = edgeHash(parent, lo32, hi32);
  const tag = h >>> 29;
  let i = h & mask;
  for (;;) {
    const v = slots[i]!;
    if (v === 0) return -1;
    if (v >>> 28 === tag) {
      const c = (v & 0x0fffffff) - 1;
      const r = c * 4; // node records (node-store.ts), offsets as literals
      if (node[r] === lo32 && node[r + 1] === hi32 && par[c] === parent) return c;
    }
    i = (i + 1) & mask;
  }
}

/**
 * The child of `cur` keyed by the tokens hash (lo, hi, as int32), or -1: its first child if it
 * has that key, else the edge table unless `cur`'s child class (node-store.ts `ID_MASK`) proves
 * there is no other child: none, or one and it is the first. The tree's writer and the walk's
 * first step (walk.ts) use it; the walk inlines the same.
 */
export function findChild(slots: Int32Array, mask: number, par: Int32Array, node: Int32Array, cur: number, lo: number, hi: number): number {
  const cw = node[cur * 4 + 2]!;
  const c = cw & 0x0fffffff;
  if (c !== 0x0fffffff && node[c * 4] === lo && node[c * 4 + 1] === hi) return c;
  const kids = cw >>> 28;
  if (kids === 0 || (kids === 1 && c !== 0x0fffffff)) return -1;
  return findEdge(slots, mask, par, node, cur, lo, hi);
}

/**
 * Root keys: a counting filter of the root's children, `ROOT_SLOTS` counts indexed by the low
 * bits of a child's tokens hash (its low half as int32, `& ROOT_MASK`). A count of 0 proves no
 * root child has a key with those bits, so a lookup whose first block misses the root's first
 * child and finds a 0 there stops without probing the edge table (walk.ts). Why: most lookups
 * of a router can match nothing (70 % of the synthetic workload's), and the probe of a large
 * table is a cache and TLB miss or two: the synthetic tree's in-thread no-match lookups
 * measured p50 0.26-0.81 us across runs and hours, where the counts (8 KiB for ~210 root
 * children) stay cached. Counts go up before the edge is placed and down after it is removed,
 * so at every moment they cover the table: a reader (in shared memory, even one reading past
 * a descheduled writer) never sees 0 for a child the table holds.
 */
export const ROOT_SLOTS = 2048;
export const ROOT_MASK = ROOT_SLOTS - 1;

/** The edge hash of `child` (its parent and tokens hash, from the node arrays). */
function childHash(nodes: NodeStore, child: number): number {
  const r = child * 4;
  return edgeHash(nodes.parent[child]!, nodes.node[r]!, nodes.node[r + 1]!);
}

/** Where a shared table publishes a switch: the active buffer (0 or 1) and its mask. */
export type EdgePublish = (active: number, mask: number) => void;

export class EdgeTable {
  private slots: Int32Array;
  private mask: number;
  private count = 0;
  /** Shared mode: the two buffers, which is active, and a table built aside, not yet active. */
  readonly buffers: [SharedArrayBuffer, SharedArrayBuffer] | null;
  private active = 0;
  private built: Int32Array | null = null;
  /** The slot where `listMoves` last found a child's edge (-1: none), for `remove`. */
  private foundChild = -1;
  private foundSlot = 0;
  /** Root keys (see `ROOT_SLOTS`); in shared memory for a shared table. */
  readonly rootCounts: Int32Array;

  constructor(private readonly nodes: NodeStore, capacity = 1024, private readonly publish: EdgePublish | null = null) {
    const cap = Math.max(4, 1 << Math.ceil(Math.log2(capacity)));
    if (publish === null) {
      this.buffers = null;
      this.slots = new Int32Array(cap);
    } else {
      this.buffers = [
        new SharedArrayBuffer(cap * 4, { maxByteLength: MAX_SHARED_BYTES }),
        new SharedArrayBuffer(4, { maxByteLength: MAX_SHARED_BYTES }),
      ];
      this.slots = new Int32Array(this.buffers[0], 0, cap); // fixed length: length-tracking views read slower
      publish(0, cap - 1);
    }
    this.mask = cap - 1;
    this.rootCounts = new Int32Array(publish === null ? new ArrayBuffer(ROOT_SLOTS * 4) : new SharedArrayBuffer(ROOT_SLOTS * 4));
  }

  get bytes(): number {
    const edges = this.buffers === null ? this.slots.byteLength : this.buffers[0].byteLength + this.buffers[1].byteLength;
    return edges + this.rootCounts.byteLength;
  }

  /** The active slots and their mask (for the lookup walk). */
  get slotsView(): Int32Array {
    return this.slots;
  }

  get maskValue(): number {
    return this.mask;
  }

  /** The child of `parent` keyed by the tokens hash (lo, hi), or -1. */
  find(parent: number, lo: number, hi: number): number {
    const n = this.nodes;
    return findEdge(this.slots, this.mask, n.parent, n.node, parent, lo, hi);
  }

  /**
   * Makes room for `extra` more edges without rebuilding inside a write section: a shared
   * table too small for them is rebuilt now, in its inactive buffer, and switched to by the
   * next `commit`. The caller must not change the edges between the two. No-op otherwise.
   * Returns whether it built one.
   */
  reserve(extra: number): boolean {
    if (this.buffers === null || !this.tooSmall(this.count + extra)) return false;
    let cap = this.slots.length * 2;
    while ((this.count + extra) * 4 > cap * 3) cap *= 2;
    const sab = this.buffers[1 - this.active]!;
    if (sab.byteLength < cap * 4) sab.grow(cap * 4);
    const next = new Int32Array(sab, 0, cap);
    next.fill(0);
    this.rehashInto(next);
    this.built = next;
    return true;
  }

  /** Switches to a table `reserve` built (call under the readers' lock). */
  commit(): void {
    const next = this.built;
    if (next === null) return;
    this.built = null;
    this.slots = next;
    this.mask = next.length - 1;
    this.active = 1 - this.active;
    this.publish!(this.active, this.mask);
  }

  /** Adds the edge of a freshly allocated child (its key is already in the node arrays). */
  insert(child: NodeId): void {
    if (this.tooSmall(this.count + 1)) {
      if (this.buffers === null) {
        this.resize(this.slots.length * 2);
      } else {
        // Not reserved ahead (a caller that does not batch): rebuild and switch at once.
        this.reserve(1);
        this.commit();
      }
    }
    this.countRoot(child, 1); // before the edge is placed: see ROOT_SLOTS
    this.place(this.slots, this.mask, child);
    this.count++;
  }

  /** Removes the edge leading to `child`. */
  remove(child: NodeId): void {
    const slots = this.slots;
    const mask = this.mask;
    const nodes = this.nodes;
    let i: number;
    const h = childHash(nodes, child);
    const v = slotValue(child, h);
    if (child === this.foundChild && slots[this.foundSlot] === v) {
      i = this.foundSlot; // found by `listMoves` just before (a detach's first removal)
    } else {
      i = h & mask;
      while (slots[i] !== v) i = (i + 1) & mask;
    }
    this.foundChild = -1;
    this.count--;
    this.shiftBack(slots, mask, i);
    this.countRoot(child, -1); // after the edge left the table: see ROOT_SLOTS
  }

  /** Adds `d` to the root keys' count of `child` if it is a root child. */
  private countRoot(child: number, d: number): void {
    const n = this.nodes;
    if (n.parentOf(child) !== 0) return;
    const k = n.node[child * 4]! & ROOT_MASK;
    this.rootCounts[k] = this.rootCounts[k]! + d;
  }

  /** Empties slot `i` and moves later entries of its cluster into the hole when their home allows. */
  private shiftBack(slots: Int32Array, mask: number, i: number): void {
    const nodes = this.nodes;
    for (;;) {
      slots[i] = 0;
      let j = i;
      for (;;) {
        j = (j + 1) & mask;
        const v = slots[j]!;
        if (v === 0) return;
        const home = childHash(nodes, (v & 0x0fffffff) - 1) & mask;
        // The entry at j may move to i unless its home lies cyclically in (i, j].
        if (i <= j ? home <= i || home > j : home <= i && home > j) {
          slots[i] = v;
          i = j;
          break;
        }
      }
    }
  }

  /**
   * Lists, for the unit log, the parents of the entries that removing `child`'s edge may move:
   * the rest of its cluster (backward shift moves entries only towards their home, inside the
   * cluster, so removals of several edges move only entries of their clusters as they were).
   */
  listMoves(child: NodeId, u: UnitLog): void {
    const slots = this.slots;
    const mask = this.mask;
    const par = this.nodes.parent;
    const h = childHash(this.nodes, child);
    const want = slotValue(child, h);
    let i = h & mask;
    while (slots[i] !== want) i = (i + 1) & mask;
    this.foundChild = child; // `remove` of this child, next, starts here
    this.foundSlot = i;
    for (;;) {
      i = (i + 1) & mask;
      const v = slots[i]!;
      if (v === 0 || u.full) return;
      u.add(par[(v & 0x0fffffff) - 1]!);
    }
  }

  private tooSmall(edges: number): boolean {
    return edges * 4 > this.slots.length * 3;
  }

  private place(slots: Int32Array, mask: number, child: number): void {
    const h = childHash(this.nodes, child);
    let i = h & mask;
    while (slots[i] !== 0) i = (i + 1) & mask;
    slots[i] = slotValue(child, h);
  }

  private rehashInto(next: Int32Array): void {
    const old = this.slots;
    const mask = next.length - 1;
    for (let i = 0; i < old.length; i++) {
      const v = old[i]!;
      if (v !== 0) this.place(next, mask, (v & 0x0fffffff) - 1);
    }
  }

  private resize(capacity: number): void {
    const next = new Int32Array(capacity);
    this.rehashInto(next);
    this.slots = next;
    this.mask = capacity - 1;
  }
}
