/**
 * The KV pool of one simulated engine (engine-model.ts): `capacity` blocks shared by the prefix
 * cache and the running requests. Unlike `WorkerCache` (the instant replay's cache, which holds
 * only finished prompts), blocks here are reference-counted: a running request pins its
 * prompt's cached blocks, and owns private blocks (its uncomputed prompt, partial last block and
 * output) that count against the capacity but are not in the cache. A request's computed prompt
 * blocks enter the cache when its prefill completes (the engine's Stored event); they stay when
 * it ends, unpinned, and are evicted LRU, leaf first, when an admission needs room (Removed).
 *
 * Blocks are keyed by sequence hash as (lo, hi) u32 words; the cache is prefix-closed (a block's
 * parent is always cached), so "leading blocks cached" is a plain walk.
 */
import { LeafHeap } from '../tree/leaf-heap.js';
import { U64SlotMap } from './u64-slot-map.js';

const NO_PARENT = -1;
const FREE = -1;

/** A sink for evicted blocks' sequence hashes, as (lo, hi) words, leaf first. */
export type EvictedWords = number[];

export class EngineKv {
  readonly capacity: number;
  readonly #table: U64SlotMap;
  readonly #lo: Uint32Array;
  readonly #hi: Uint32Array;
  readonly #parent: Int32Array;
  readonly #children: Int32Array;
  readonly #refs: Int32Array;
  /** Last-use stamp of a live slot, FREE for a free one. */
  readonly #stamp: Float64Array;
  readonly #freeSlots: Int32Array;
  #freeSlotCount: number;
  readonly #heap: LeafHeap;
  #clock = 0;
  /** Blocks owned by running requests outside the cache. */
  #private = 0;
  /** Cached blocks no request pins. */
  #evictable = 0;

  constructor(capacity: number) {
    this.capacity = capacity;
    this.#table = new U64SlotMap(capacity);
    this.#lo = new Uint32Array(capacity);
    this.#hi = new Uint32Array(capacity);
    this.#parent = new Int32Array(capacity);
    this.#children = new Int32Array(capacity);
    this.#refs = new Int32Array(capacity);
    this.#stamp = new Float64Array(capacity).fill(FREE);
    this.#freeSlots = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.#freeSlots[i] = capacity - 1 - i;
    this.#freeSlotCount = capacity;
    this.#heap = new LeafHeap(capacity * 2);
  }

  /** Blocks in the cache (pinned or not). */
  get cached(): number {
    return this.capacity - this.#freeSlotCount;
  }

  /** Blocks in use: cached plus private. */
  get used(): number {
    return this.cached + this.#private;
  }

  /** Blocks pinned or owned by running requests (what cannot be evicted). */
  get busy(): number {
    return this.cached - this.#evictable + this.#private;
  }

  /** Leading blocks of `seq` ((lo, hi) words, n blocks) in the cache. */
  match(seq: Uint32Array, n: number): number {
    let i = 0;
    while (i < n && this.#table.get(seq[2 * i]!, seq[2 * i + 1]!) >= 0) i++;
    return i;
  }

  /**
   * Whether a request whose first `hit` blocks are cached (`match`) and that needs
   * `privateBlocks` more fits: pinning its unpinned cached blocks takes them out of the
   * evictable set, so they count too.
   */
  fits(seq: Uint32Array, hit: number, privateBlocks: number): boolean {
    let unpinned = 0;
    for (let i = 0; i < hit; i++) if (this.#refs[this.#table.get(seq[2 * i]!, seq[2 * i + 1]!)] === 0) unpinned++;
    return this.busy + unpinned + privateBlocks <= this.capacity;
  }

  /**
   * Admits a request: pins its first `hit` blocks (cached: `match` said so) into `slots`, takes
   * `privateBlocks` private blocks, and evicts what that needs (appended to `evicted`). The
   * caller checked `fits` first.
   */
  admit(seq: Uint32Array, hit: number, privateBlocks: number, slots: Int32Array, evicted: EvictedWords): void {
    for (let i = 0; i < hit; i++) {
      const s = this.#table.get(seq[2 * i]!, seq[2 * i + 1]!);
      slots[i] = s;
      this.#pin(s);
    }
    this.#private += privateBlocks;
    while (this.used > this.capacity) this.#evictOne(evicted);
  }

  /**
   * Moves blocks `from .. n-1` of a request whose prefill completed from its private blocks into
   * the cache, pinned by it (a block another request stored meanwhile is pinned instead, and the
   * private copy freed). Returns the index of the first block new to the cache (n if none).
   */
  store(seq: Uint32Array, from: number, n: number, slots: Int32Array): number {
    let parent = from > 0 ? slots[from - 1]! : NO_PARENT;
    let firstNew = n;
    for (let i = from; i < n; i++) {
      const lo = seq[2 * i]!;
      const hi = seq[2 * i + 1]!;
      let s = this.#table.get(lo, hi);
      this.#private--;
      if (s >= 0) {
        this.#pin(s);
      } else {
        if (firstNew === n) firstNew = i;
        s = this.#freeSlots[--this.#freeSlotCount]!;
        this.#lo[s] = lo;
        this.#hi[s] = hi;
        this.#parent[s] = parent;
        this.#children[s] = 0;
        this.#refs[s] = 1;
        this.#stamp[s] = ++this.#clock;
        if (parent !== NO_PARENT) this.#children[parent]!++;
        this.#table.set(lo, hi, s);
      }
      slots[i] = s;
      parent = s;
    }
    return firstNew;
  }

  /** Ends a request: unpins its `pinned` cached blocks (root to leaf) and frees `privateBlocks`. */
  release(slots: Int32Array, pinned: number, privateBlocks: number): void {
    for (let i = 0; i < pinned; i++) {
      const s = slots[i]!;
      this.#stamp[s] = ++this.#clock;
      if (--this.#refs[s]! === 0) {
        this.#evictable++;
        if (this.#children[s] === 0) this.#heap.push(this.#stamp[s]!, s);
      }
    }
    this.#private -= privateBlocks;
  }

  #pin(s: number): void {
    if (this.#refs[s]!++ === 0) this.#evictable--;
    this.#stamp[s] = ++this.#clock;
  }

  #evictOne(evicted: EvictedWords): void {
    const heap = this.#heap;
    for (;;) {
      if (heap.size === 0) throw new Error('internal: engine KV pool over capacity with nothing evictable');
      const s = heap.topSlot();
      const st = heap.topStamp();
      heap.pop();
      // Lazy deletion: skip freed slots, blocks touched since, pinned ones and non-leaves.
      if (this.#stamp[s] !== st || this.#refs[s] !== 0 || this.#children[s] !== 0) continue;
      const lo = this.#lo[s]!;
      const hi = this.#hi[s]!;
      evicted.push(lo, hi);
      this.#table.delete(lo, hi);
      this.#stamp[s] = FREE;
      this.#evictable--;
      this.#freeSlots[this.#freeSlotCount++] = s;
      const p = this.#parent[s]!;
      if (p !== NO_PARENT && --this.#children[p]! === 0 && this.#refs[p] === 0) heap.push(this.#stamp[p]!, p);
      return;
    }
  }
}
