/**
 * Storage of the radix tree's nodes and (worker, node) pairs in parallel typed arrays.
 *
 * Every live node except the root holds at least one worker, or is hollow: it lost its last
 * worker and is kept for the blocks workers hold below it (radix-tree.ts `detach`, rare: only
 * after a worker removed a block and kept its children). On real traces about 97% of nodes
 * hold exactly one worker (conversation workload: 63,603 nodes for 65,536 pairs). So a node
 * with one worker stores that pair inline (worker slot and external hash), and a node with two
 * or more keeps all of them in a member set (member-sets.ts: one contiguous array per node),
 * named by the same `w0` word. A node costs 29 bytes of arrays (docs/layout.md has the split of
 * a pair's bytes).
 *
 * Children without sibling links: a node's first child is in its record, every other child in
 * the edge table (edge-table.ts); when the first child goes and others stay, nothing takes its
 * place. The first-child word also holds a 2-bit class of the child count (none, one, two or
 * more), so a lookup that misses the first child probes only if there can be another; the exact
 * count is the writer's (child-counts.ts). Dropping the links saved 7 bytes a node net; dropping
 * the first-child word too cost lookup p99 +20 % (an edge probe per conversation turn):
 * docs/layout.md.
 *
 * `w0` (word 3 of a node's record, below): >= 0 the single worker's slot; -1 (NONE) no pairs
 * (root, hollow node, free node); <= -2 the node's member set, `-w0 - 2`.
 *
 * Pair references (`PairRef`) name a pair without an object, together with the worker's slot
 * (a worker's lookup knows its own): a value >= 0 is the inline pair of that node id, a value < 0
 * the worker's member in the set of node `~ref` (member-sets.ts `find`). A member's position in
 * its set's array moves (removals, set growth) without any lookup being told.
 */

import { LOCAL_STORE, MAX_NODE_RECORD_BYTES, nextCapacity, type ArrayStore } from './array-store.js';
import { ChildCounts } from './child-counts.js';
import { MemberSets } from './member-sets.js';

/** Integer id of a node; 0 is the root. */
export type NodeId = number & { readonly __brand: 'NodeId' };
/** Integer id of a worker slot inside one tree. */
export type WorkerSlot = number & { readonly __brand: 'WorkerSlot' };
/** A (worker, node) pair: >= 0 inline pair of that node, < 0 the worker's member of node `~ref`'s set. */
export type PairRef = number & { readonly __brand: 'PairRef' };

export const ROOT = 0 as NodeId;
export const NONE = -1;

/**
 * Records. The node fields a lookup reads at every step are packed into one record of `node`,
 * `NODE_WORDS` words: [0] tokens hash low half, [1] high half (both as int32), [2] child word
 * (`ID_MASK` bits: the first child's id; bits 28-29: the child class, `KIDS_SHIFT`), [3] worker
 * set word (`w0`). A member set's worker count and fingerprint halves are one record of
 * `members.sets` (member-sets.ts `SET_WORDS`). A step of the walk reads one record instead of
 * four arrays (and three):
 * on the conversation workload a lookup reads 12.3 distinct 4 KiB pages of a tree instead of
 * 20.2 (counted over its lookups), and after 10 ms of idle time each page costs 0.4-1.2 us to
 * reach again on the 2-core dev VM.
 *
 * The offsets are written as literals (`id * 4 + 3`) where they are used: V8 (Node 20) does
 * not fold a named module constant into the code, and loading it measured 10 % of a hot lookup
 * (in-thread findMatchesInto p50 0.51 -> 0.46 us with literals) and 1.2-2x of a dump.
 */
export const NODE_WORDS = 4;

/**
 * The child word (record word 2): the first child's id in the low 28 bits, `ID_MASK` there for
 * none; the node's child class in bits 28-29 (`KIDS_SHIFT`): 0 no child, 1 one, 2 two or more
 * (with class 1 and no first child, the one child is in the edge table). A free node's word is
 * -1. Node ids stay below 2^28 (`MAX_NODES`): 4 GiB of records.
 */
export const ID_MASK = 0x0fffffff;
export const KIDS_SHIFT = 28;
/** Node capacity limit: ids must fit the child word, with `ID_MASK` itself kept for none. */
export const MAX_NODES = ID_MASK;
const KIDS_BITS = 3 << KIDS_SHIFT;

const MIN_CAPACITY = 1024;
/** The smallest in-place growth of the node arrays: 16,384 nodes, 464 KiB of them. */
const MIN_STEP = 16_384;
/** How far past its parent's id a new node's id is sought before next-fit (see `freeBits`). */
const NEAR_WORDS = 8;

export class NodeStore {
  // Node arrays, indexed by NodeId.
  parent: Int32Array;
  /**
   * Per node, `NODE_WORDS` words: tokens hash halves (int32), child word (first child and child
   * class, see `ID_MASK`), and the worker set word (`w0`: the single worker's slot, NONE, or the
   * encoded member set, see above). Read through the accessors below outside the
   * lookup walk.
   */
  node: Int32Array;
  /** Exact child counts (child-counts.ts), private to the writer. */
  private readonly kids: ChildCounts;
  h0Lo: Uint32Array;
  h0Hi: Uint32Array;
  private nodeCap: number;
  /** Ids below this have been handed out (live or free); 0 is the root. */
  nodeTop = 1;
  /**
   * Free node ids below `nodeTop`, one bit each (1 = free). Where a node goes decides how many
   * pages and cache lines a lookup reads: a path whose nodes sit side by side reads one record
   * after another. `allocUnlinked` takes the id right after the parent's when it is free (a
   * stored event's blocks then line up, each after the previous one), else a free id within the
   * next 256 (the same 4 KiB of records), else the next free id from where the last search
   * ended (next-fit: a run of freed ids is refilled in order), else a new id.
   * Measured on the conversation trace's sweep script (4 workers, 16,384-block caches: stores
   * evict), trees built each way in one process, their lookups interleaved, 3 runs: a lookup's
   * path reads 0.057 distinct 4 KiB pages of records per node instead of 0.109 with the free
   * list this replaced (last freed, first reused); in-thread `findMatchesInto` with the caches
   * thrashed before each lookup: p50 1.28-1.54 us instead of 1.95-2.20, p99 23-30 instead of
   * 40-52; back to back: p99 7.4-10.1 instead of 9.3-12.8. Next to the parent alone gave p99
   * 27-33 (cold). A tree rebuilt from its dump (each path in order: 0.031 pages per node)
   * measured p99 11-15 cold, 5.3-7.6 hot: what moving nodes later could still win. On the
   * conversation workload (the lookup bench's tree), same method, 2 runs: 0.088 pages per node
   * instead of 0.138, p99 9.5-12.6 us instead of 22.5-24.5 cold, 3.6-3.9 instead of 4.1-4.7 hot.
   */
  private freeBits: Uint32Array;
  private freeCount = 0;
  /** Next-fit cursor: the bitmap word where the last search for a free id ended. */
  private freeCursor = 0;
  liveNodes = 1;

  /** Random 64-bit key per worker slot (the fingerprints' terms), as halves. */
  keyLo: Uint32Array;
  keyHi: Uint32Array;
  /** Worker id per slot, as halves (lookups write them into results). */
  slotLo: Uint32Array;
  slotHi: Uint32Array;
  private keySeed = 0x9e3779b9;
  /** The workers of nodes held by two or more (member-sets.ts). */
  readonly members: MemberSets;

  /**
   * `store` holds the arrays a lookup reads (parent, node records, worker sets); `own` the
   * writer's private ones (external hashes, child counts, free ids), growable memory too in
   * trees (array-store.ts): at 16.4M nodes, copying the 1-byte counts and the bitmap at each
   * 1/16 step would write ~280 MB of fresh pages. `capacity`: initial nodes (tests force
   * growth with tiny ones).
   */
  constructor(private readonly store: ArrayStore = LOCAL_STORE, capacity = MIN_CAPACITY, private readonly own: ArrayStore = LOCAL_STORE) {
    const cap = Math.max(2, capacity);
    this.nodeCap = cap;
    // One bit per id: a capacity past 1,024 ids needs more than 32 words, or ids past them
    // could never be freed and found again.
    this.freeBits = own.uint32(Math.max(32, Math.ceil(cap / 32)));
    this.parent = store.int32(cap, NONE);
    // Every word NONE: a free node's tokens hash is never read, its child and worker word are.
    this.node = store.int32(cap * NODE_WORDS, NONE, MAX_NODE_RECORD_BYTES);
    this.node[2] = ID_MASK; // the root: no child yet
    this.kids = new ChildCounts(cap, own);
    this.h0Lo = own.uint32(cap);
    this.h0Hi = own.uint32(cap);
    this.keyLo = store.uint32(16);
    this.keyHi = store.uint32(16);
    this.slotLo = store.uint32(16);
    this.slotHi = store.uint32(16);
    this.members = new MemberSets(store, this, own);
  }

  /**
   * Gives a worker slot its id (as halves) and draws its random key (xorshift32; any fixed
   * sequence of distinct draws does).
   */
  setSlot(slot: number, idLo: number, idHi: number): void {
    if (slot >= this.keyLo.length) {
      const cap = Math.max(slot + 1, this.keyLo.length * 2);
      this.keyLo = this.store.growUint32(this.keyLo, cap);
      this.keyHi = this.store.growUint32(this.keyHi, cap);
      this.slotLo = this.store.growUint32(this.slotLo, cap);
      this.slotHi = this.store.growUint32(this.slotHi, cap);
    }
    this.keyLo[slot] = this.draw();
    this.keyHi[slot] = this.draw();
    this.slotLo[slot] = idLo;
    this.slotHi[slot] = idHi;
  }

  /** The single worker's slot, NONE, or the encoded member set of `id` (see above). */
  w0(id: number): number {
    return this.node[id * 4 + 3]!;
  }

  setW0(id: number, w: number): void {
    this.node[id * 4 + 3] = w;
  }

  /** The parent of a node; NONE for the root and a free node. */
  parentOf(id: number): number {
    return this.parent[id]!;
  }

  /** The first child of `id`, or NONE (no child, or the first one went and others stayed). */
  firstChild(id: number): number {
    const c = this.node[id * 4 + 2]! & ID_MASK;
    return c === ID_MASK ? NONE : c;
  }

  /** How many children `id` has. */
  childCount(id: number): number {
    return this.kids.get(id);
  }

  hasChildren(id: number): boolean {
    return this.kids.has(id);
  }

  /** Nodes whose child count is 255 or more (the rest fit the count byte). */
  get manyKidsCount(): number {
    return this.kids.manyCount;
  }

  /** Tokens hash halves of `id`, as int32. */
  tokLo(id: number): number {
    return this.node[id * 4]!;
  }

  tokHi(id: number): number {
    return this.node[id * 4 + 1]!;
  }

  private draw(): number {
    let x = this.keySeed;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.keySeed = x >>> 0;
    return this.keySeed;
  }

  /** Bytes held by the typed arrays (capacity, not just live entries). */
  get bytes(): number {
    return this.nodeCap * 29 + this.freeBits.byteLength + this.keyLo.length * 16 + this.members.bytes;
  }

  /**
   * A fresh node under `parent` keyed by the tokens hash, linked (the edge table is the
   * caller's business: radix-tree.ts `linkChild`).
   */
  allocNode(parent: NodeId, lo: number, hi: number, worker: WorkerSlot, hLo: number, hHi: number): NodeId {
    const id = this.allocUnlinked(parent, lo, hi, worker, hLo, hHi);
    this.link(id);
    return id;
  }

  /**
   * A fresh node with its fields set but not yet its parent's child (`link` does it):
   * unreachable from the root until then, so a shard writes it outside the readers' lock.
   */
  allocUnlinked(parent: NodeId, lo: number, hi: number, worker: WorkerSlot, hLo: number, hHi: number): NodeId {
    let id: number;
    const bits = this.freeBits;
    const hint = parent + 1;
    if (this.freeCount === 0) {
      if (this.nodeTop === this.nodeCap) this.growNodes();
      id = this.nodeTop++;
    } else if (hint < this.nodeTop && (bits[hint >>> 5]! & (1 << (hint & 31))) !== 0) {
      id = hint;
      bits[hint >>> 5]! &= ~(1 << (hint & 31));
      this.freeCount--;
    } else {
      id = this.takeNear(hint);
    }
    this.liveNodes++;
    this.parent[id] = parent;
    const r = id * 4;
    const node = this.node;
    node[r] = lo;
    node[r + 1] = hi;
    node[r + 2] = ID_MASK; // no child
    node[r + 3] = worker;
    this.kids.reset(id);
    this.h0Lo[id] = hLo;
    this.h0Hi[id] = hHi;
    return id as NodeId;
  }

  /**
   * Links a node `allocUnlinked` made as its parent's first child and counts it; a first child
   * it replaces must already be in the edge table (radix-tree.ts `linkChild`).
   */
  link(id: NodeId): void {
    const parent = this.parent[id]!;
    const r = parent * 4 + 2;
    this.node[r] = id | (this.node[r]! & KIDS_BITS);
    const k = this.kids.add(parent);
    if (k <= 2) this.setKidsClass(parent, k);
  }

  /**
   * Unlinks `id` from its parent `up` and uncounts it: returns whether it was the first child
   * (then `up` has no first child any more, its other children stay in the edge table); if not,
   * its edge is the caller's business. `freeNodeId` then clears its record.
   */
  unlink(id: NodeId, up: number): boolean {
    const r = up * 4 + 2;
    const first = (this.node[r]! & ID_MASK) === id;
    if (first) this.node[r] = ID_MASK | (this.node[r]! & KIDS_BITS);
    const k = this.kids.remove(up);
    if (k < 2) this.setKidsClass(up, k);
    return first;
  }

  /** Writes the child class (0, 1, 2: two or more) into a node's child word. */
  private setKidsClass(id: number, cls: number): void {
    const r = id * 4 + 2;
    this.node[r] = (this.node[r]! & ~KIDS_BITS) | (Math.min(cls, 2) << KIDS_SHIFT);
  }

  /** Returns a detached node (no pairs left, no children, unlinked) to the free list. */
  freeNodeId(id: NodeId): void {
    this.setW0(id, NONE);
    this.node[id * 4 + 2] = NONE;
    this.parent[id] = NONE;
    this.freeBits[id >>> 5]! |= 1 << (id & 31);
    this.freeCount++;
    this.liveNodes--;
  }

  /**
   * A free id within `NEAR_WORDS` bitmap words (256 ids, 4 KiB of node records) from `hint` on,
   * else `takeFree()`; freeCount > 0.
   */
  private takeNear(hint: number): number {
    const bits = this.freeBits;
    const end = Math.min((this.nodeTop + 31) >>> 5, (hint >>> 5) + NEAR_WORDS);
    for (let w = hint >>> 5; w < end; w++) if (bits[w] !== 0) return this.takeLowest(w);
    return this.takeFree();
  }

  /** The next free id at or after the cursor, wrapping (next-fit); freeCount > 0. */
  private takeFree(): number {
    const bits = this.freeBits;
    const words = (this.nodeTop + 31) >>> 5;
    let w = this.freeCursor < words ? this.freeCursor : 0;
    while (bits[w] === 0) w = w + 1 === words ? 0 : w + 1;
    this.freeCursor = w;
    return this.takeLowest(w);
  }

  /** Takes the lowest free id of bitmap word `w` (non-zero). */
  private takeLowest(w: number): number {
    const word = this.freeBits[w]!;
    this.freeBits[w] = word & (word - 1);
    this.freeCount--;
    return w * 32 + 31 - Math.clz32(word & -word);
  }

  /** The node's member set, or NONE when it holds a single inline pair (or none). */
  setOf(node: number): number {
    const w = this.w0(node);
    return w < NONE ? -w - 2 : NONE;
  }

  /** The position of worker `slot` in node `node`'s member set, or -1 (not a member). */
  memberPos(node: number, slot: number): number {
    const w = this.w0(node);
    return w < NONE ? this.members.find(-w - 2, slot) : -1;
  }

  /** The node of pair `ref`. */
  nodeOfRef(ref: PairRef): number {
    return ref >= 0 ? ref : ~ref;
  }

  /**
   * Grows now, if needed, so that `nodes` more nodes fit without growing: a shard grows before
   * it takes the readers' lock, since filling fresh pages costs ~3 ms per MB on the dev VM.
   * (Member sets grow as workers join, under the lock, as the overflow records did before them.)
   */
  reserve(nodes: number): void {
    // One step to the size asked (at least the usual one): a bulk load that knows its size
    // (bulk-load.ts) then fills fresh pages once instead of ~5x over in 1.25x steps.
    // Freed ids are taken before the top grows (`allocUnlinked`), so they count as room.
    const top = this.nodeTop + Math.max(0, nodes - this.freeCount);
    if (top > this.nodeCap) this.growNodes(top);
  }

  private growNodes(atLeast = 0): void {
    // Node arrays are most of the memory: a 2x step left up to half of them unused (73 -> 55
    // bytes per pair on the conversation workload's final tree), then 1.25x by copy; in place,
    // 1/16 (array-store.ts `nextCapacity`).
    const cap = Math.min(MAX_NODES, nextCapacity(this.store, this.nodeCap, atLeast, MIN_STEP));
    if (cap === this.nodeCap) throw new RangeError(`radix tree: more than ${MAX_NODES - 1} nodes`);
    const s = this.store;
    this.parent = s.growInt32(this.parent, cap, NONE);
    this.node = s.growInt32(this.node, cap * NODE_WORDS, NONE);
    this.kids.grow(cap);
    this.h0Lo = this.own.growUint32(this.h0Lo, cap);
    this.h0Hi = this.own.growUint32(this.h0Hi, cap);
    if (this.freeBits.length * 32 < cap) this.freeBits = this.own.growUint32(this.freeBits, Math.ceil(cap / 32));
    this.nodeCap = cap;
  }
}
