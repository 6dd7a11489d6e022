/**
 * The tree's hard memory budget in (worker, block) pairs (`maxPairs`): after a Stored event
 * takes the tree over it, the least recently stored leaf blocks are evicted, each as if its
 * workers had removed it, down to `lowWaterRatio` of it (a leaf's parent becomes a candidate
 * when it turns into a leaf). A scan of the nodes builds the heap, O(nodes), once per eviction;
 * an eviction frees `1 - lowWaterRatio` of the budget, so that is O(1 / (1 - ratio)) per
 * stored pair. Measured (640k blocks stored as 20k events of 32 blocks by 8 workers, second of
 * two runs): 352 ns per block without a budget, 331 with `maxPairs` 100k (370k evictions), 323
 * with 20k (538k): the scans cost less than the growth they avoid.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { LeafHeap } from './leaf-heap.js';
import { NONE, ROOT, type NodeStore } from './node-store.js';
import { createRecency, type Recency } from './recency.js';

export class PairBudget {
  /** The budget (Infinity: none) and the size an eviction leaves. */
  readonly max: number;
  private readonly lowWater: number;
  /** When each node was last stored (a no-op without a budget). */
  readonly recency: Recency;
  /** Pairs evicted since construction. */
  evicted = 0;
  private heap: LeafHeap | null = null;

  /** Throws `InvalidOption` for a budget that is not a positive integer or a ratio outside (0, 1]. */
  constructor(maxPairs: number | undefined, lowWaterRatio = 0.9) {
    if (maxPairs !== undefined && !(Number.isSafeInteger(maxPairs) && maxPairs >= 1)) {
      throw new KvIndexError(ErrorCode.InvalidOption, `maxPairs: expected a positive integer, got ${String(maxPairs)}`);
    }
    if (!(typeof lowWaterRatio === 'number' && lowWaterRatio > 0 && lowWaterRatio <= 1)) {
      throw new KvIndexError(ErrorCode.InvalidOption, `lowWaterRatio: expected a number in (0, 1], got ${String(lowWaterRatio)}`);
    }
    this.max = maxPairs ?? Infinity;
    this.lowWater = maxPairs === undefined ? Infinity : Math.floor(maxPairs * lowWaterRatio);
    this.recency = createRecency(maxPairs !== undefined);
  }

  /**
   * Evicts while `pairs()` exceeds the low-water mark, if it exceeds the budget: `dropOne(node)`
   * drops one pair of a leaf (one at a time: dropping from a list of two turns the survivor
   * inline), until the node holds none.
   */
  enforce(nodes: NodeStore, pairs: () => number, dropOne: (node: number) => void): void {
    if (pairs() <= this.max) return;
    const heap = (this.heap ??= new LeafHeap(1024));
    heap.clear();
    for (let id = 1; id < nodes.nodeTop; id++) {
      if (nodes.w0(id) !== NONE && !nodes.hasChildren(id)) heap.push(this.recency.stamp(id), id);
    }
    while (pairs() > this.lowWater && heap.size > 0) {
      const id = heap.topSlot();
      heap.pop();
      const parent = nodes.parentOf(id);
      while (nodes.w0(id) !== NONE) {
        dropOne(id);
        this.evicted++;
      }
      if (parent !== ROOT && nodes.w0(parent) !== NONE && !nodes.hasChildren(parent)) {
        heap.push(this.recency.stamp(parent), parent);
      }
    }
  }
}
