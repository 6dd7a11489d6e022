/**
 * The KV cache of one simulated worker: at most `capacity` blocks, each identified by its
 * sequence hash (u32 halves), kept prefix-closed. It is the ground truth a replay checks the
 * indexer against.
 *
 * Eviction is LRU over leaf blocks only (a block with a cached child is never evicted), as in
 * the shared workloads' generator, so a worker's `findMatches` score is exactly its cached-prefix
 * length. Every touch takes a fresh stamp from a per-cache clock, in root-to-leaf order, so a
 * parent is always older than its children and becomes the next candidate once they are gone.
 * The blocks a request matched are stamped before eviction: they are then newer than every
 * other block and are reached last (and the guard below asserts they never are).
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { LeafHeap } from '../tree/leaf-heap.js';
import { U64SlotMap } from './u64-slot-map.js';

const NO_PARENT = -1;
const FREE = -1;

export class WorkerCache {
  readonly capacity: number;
  private readonly table: U64SlotMap;
  private readonly seqLo: Uint32Array;
  private readonly seqHi: Uint32Array;
  private readonly parent: Int32Array;
  private readonly children: Int32Array;
  /** Last-use stamp of a live slot, FREE for a free one. */
  private readonly stamp: Float64Array;
  /** Request epoch that protects the slot (the matched prefix of the request being served). */
  private readonly guard: Float64Array;
  private readonly freeSlots: Int32Array;
  private freeCount: number;
  private readonly heap: LeafHeap;
  private clock = 0;
  private epoch = 0;
  /** Slots of the prefix matched by the last `match` call. */
  private hitSlots = new Int32Array(256);

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new KvIndexError(ErrorCode.InvalidOption, `capacity: expected a positive integer, got ${String(capacity)}`);
    this.capacity = capacity;
    this.table = new U64SlotMap(capacity);
    this.seqLo = new Uint32Array(capacity);
    this.seqHi = new Uint32Array(capacity);
    this.parent = new Int32Array(capacity);
    this.children = new Int32Array(capacity);
    this.stamp = new Float64Array(capacity).fill(FREE);
    this.guard = new Float64Array(capacity);
    this.freeSlots = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.freeSlots[i] = capacity - 1 - i;
    this.freeCount = capacity;
    this.heap = new LeafHeap(capacity * 2);
  }

  /** Blocks held. */
  get size(): number {
    return this.capacity - this.freeCount;
  }

  /** Whether the block with sequence hash (lo, hi) is held. */
  has(lo: number, hi: number): boolean {
    return this.table.get(lo, hi) >= 0;
  }

  /**
   * Number of leading blocks of `seq` (n sequence hashes as (lo, hi) words) held; remembers
   * their slots for a following `serve`.
   */
  match(seq: Uint32Array, n: number): number {
    if (this.hitSlots.length < n) this.hitSlots = new Int32Array(Math.max(n, this.hitSlots.length * 2));
    const table = this.table;
    const slots = this.hitSlots;
    let i = 0;
    for (; i < n; i++) {
      const s = table.get(seq[2 * i]!, seq[2 * i + 1]!);
      if (s < 0) break;
      slots[i] = s;
    }
    return i;
  }

  /**
   * Serves a request whose first `hit` blocks are held (the result of `match` on the same
   * `seq`, called just before): stamps them, evicts leaf-first LRU blocks until blocks
   * `hit .. stored-1` fit, and inserts those. Evicted sequence hashes are appended to
   * `evicted` as (lo, hi), leaf first. `stored` must be at most `capacity`.
   */
  serve(seq: Uint32Array, hit: number, stored: number, evicted: number[]): void {
    if (stored > this.capacity) throw new KvIndexError(ErrorCode.InvalidOption, `stored ${stored} exceeds the capacity ${this.capacity}`);
    const epoch = ++this.epoch;
    const slots = this.hitSlots;
    for (let i = 0; i < hit; i++) {
      const s = slots[i]!;
      this.stamp[s] = ++this.clock;
      this.guard[s] = epoch;
    }
    if (hit > 0 && this.children[slots[hit - 1]!] === 0) this.heap.push(this.stamp[slots[hit - 1]!]!, slots[hit - 1]!);
    const fresh = stored - hit;
    if (fresh <= 0) return;
    for (let need = fresh - this.freeCount; need > 0; need--) this.evictOne(epoch, evicted);
    let parent = hit > 0 ? slots[hit - 1]! : NO_PARENT;
    for (let i = hit; i < stored; i++) {
      const s = this.freeSlots[--this.freeCount]!;
      const lo = seq[2 * i]!;
      const hi = seq[2 * i + 1]!;
      this.seqLo[s] = lo;
      this.seqHi[s] = hi;
      this.parent[s] = parent;
      this.children[s] = 0;
      this.stamp[s] = ++this.clock;
      if (parent !== NO_PARENT) this.children[parent]!++;
      this.table.set(lo, hi, s);
      parent = s;
    }
    this.heap.push(this.stamp[parent]!, parent);
    this.compactHeap();
  }

  /** Drops every block (an engine restart). */
  clear(): void {
    this.table.clear();
    this.stamp.fill(FREE);
    for (let i = 0; i < this.capacity; i++) this.freeSlots[i] = this.capacity - 1 - i;
    this.freeCount = this.capacity;
    this.heap.clear();
  }

  /**
   * Every held block as (lo, hi, parentLo, parentHi, hasParent) through `visit`, in slot
   * order. For tests and checks, not for hot paths.
   */
  forEach(visit: (lo: number, hi: number, parent: { lo: number; hi: number } | null) => void): void {
    for (let s = 0; s < this.capacity; s++) {
      if (this.stamp[s] === FREE) continue;
      const p = this.parent[s]!;
      visit(this.seqLo[s]!, this.seqHi[s]!, p === NO_PARENT ? null : { lo: this.seqLo[p]!, hi: this.seqHi[p]! });
    }
  }

  private evictOne(epoch: number, evicted: number[]): void {
    const heap = this.heap;
    for (;;) {
      if (heap.size === 0) throw new Error('internal: no evictable block in a full worker cache');
      const s = heap.topSlot();
      const st = heap.topStamp();
      heap.pop();
      // Lazy deletion: skip entries of freed slots, of blocks touched since (newer stamp) and of
      // blocks that gained a child since.
      if (this.stamp[s] !== st || this.children[s] !== 0) continue;
      if (this.guard[s] === epoch) throw new Error('internal: LRU reached a block of the request being served');
      const lo = this.seqLo[s]!;
      const hi = this.seqHi[s]!;
      evicted.push(lo, hi);
      this.table.delete(lo, hi);
      this.stamp[s] = FREE;
      this.freeSlots[this.freeCount++] = s;
      const p = this.parent[s]!;
      if (p !== NO_PARENT && --this.children[p]! === 0) heap.push(this.stamp[p]!, p);
      return;
    }
  }

  /** Rebuilds the heap from the live leaves when stale entries dominate it. */
  private compactHeap(): void {
    const heap = this.heap;
    if (heap.size < 4 * this.capacity + 64) return;
    heap.clear();
    for (let s = 0; s < this.capacity; s++) {
      if (this.stamp[s] !== FREE && this.children[s] === 0) heap.push(this.stamp[s]!, s);
    }
  }
}
