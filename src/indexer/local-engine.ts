/**
 * The local engine (`shards: 0`): one RadixTree on the calling thread. Every call runs to
 * completion when it is made, so the ordering contract holds trivially; the promise-returning
 * calls only wrap a result computed at call time.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { parseRouterEvent } from '../protocol/json-parse.js';
import { createSnapshotWriter, type SnapshotWriter } from '../protocol/snapshot-writer.js';
import type { OverlapScores, RouterEvent, SnapshotEncoding } from '../protocol/types.js';
import { emptyCounts, type StatusCounts } from '../shard/wire/event-batch.js';
import type { ShardStats } from '../shard/wire/messages.js';
import type { MatchResult } from '../tree/match-result.js';
import { reserveLoad, workerTriples } from '../tree/bulk-load.js';
import { RadixTree } from '../tree/radix-tree.js';
import { FirstBlock, type Engine } from './indexer.js';

export class LocalEngine implements Engine {
  readonly needsDrain = false;
  readonly liveThreads = 0;
  readonly threadIds: number[] = [];
  readonly readsPastWriter = { answered: 0, waited: 0 };
  readonly #tree: RadixTree;
  readonly #counts: StatusCounts = emptyCounts();
  /** Whether the tree records a frequency trail (`expirationMs`): see `firstBlock`. */
  readonly #expiring: boolean;
  #writer: SnapshotWriter | null = null;
  #closed = false;

  /** Every call applies at once: idle whenever open. */
  get idle(): boolean {
    return !this.#closed;
  }

  constructor(expirationMs: number | undefined, maxPairs?: number, expectedPairs?: number) {
    this.#expiring = expirationMs !== undefined;
    this.#tree = new RadixTree({
      ...(expirationMs === undefined ? {} : { expirationMs }),
      ...(maxPairs === undefined ? {} : { maxPairs }),
    });
    // The capacity hint (options.ts `expectedPairs`): node arrays sized once, now.
    if (expectedPairs !== undefined && expectedPairs > 0) this.#tree.nodes.reserve(expectedPairs);
  }

  applyEvent(event: RouterEvent): void {
    this.#check();
    this.#counts[this.#tree.applyEvent(event)]++; // validates the event itself
  }

  applyStoredWords(workerId: bigint, _wLo: number, _wHi: number, hasParent: boolean, pLo: number, pHi: number, words: Uint32Array, n: number): void {
    this.#check();
    this.#counts[this.#tree.applyStored(workerId, hasParent, pLo, pHi, words, 0, n)]++;
  }

  /** Sizes the tree once for a bulk restore (src/tree/bulk-load.ts `reserveLoad`). */
  reserve(blocks: number, perWorker: Map<bigint, number>): void {
    reserveLoad(this.#tree, blocks, workerTriples(perWorker));
  }

  applyEventJson(text: Uint8Array): void {
    this.applyEvent(parseRouterEvent(text));
  }

  applyEventJsonOnCaller(text: Uint8Array): void {
    this.applyEvent(parseRouterEvent(text));
  }

  async findMatches(hashes: BigUint64Array | readonly bigint[]): Promise<OverlapScores> {
    this.#check();
    return this.#tree.findMatches(hashes);
  }

  findMatchesInto(hashes: BigUint64Array | readonly bigint[], result: MatchResult, earlyExit = false): number {
    this.#check();
    return this.#tree.findMatchesInto(hashes, result, earlyExit);
  }

  findMatchesSync(hashes: BigUint64Array | readonly bigint[]): OverlapScores {
    this.#check();
    return this.#tree.findMatches(hashes);
  }

  firstBlock(first: BigUint64Array, _wait: boolean): FirstBlock {
    this.#check();
    if (this.#expiring) return FirstBlock.Unknown;
    return this.#tree.firstBlockMisses(first) ? FirstBlock.Unheld : FirstBlock.Held;
  }

  findMatchesNow(hashes: BigUint64Array, _wait: boolean): OverlapScores | null {
    this.#check();
    return this.#expiring ? null : this.#tree.findMatches(hashes);
  }

  async removeWorker(workerId: bigint): Promise<void> {
    this.#check();
    this.#tree.removeWorker(workerId);
  }

  /**
   * Dumps into a writer kept between dumps, then copies the bytes out: the same memory policy
   * as the shards'. A fresh worst-size buffer per dump (what `RadixTree.dumpSnapshot` does)
   * measured 262 ms against 43 ms this way on a 1M-pair tree in a router-sized heap, on the
   * 2-core dev VM (bench/shard.bench.ts, the dump table).
   */
  async dumpSnapshot(encoding: SnapshotEncoding): Promise<Uint8Array> {
    this.#check();
    const bound = this.#tree.dumpBound(encoding);
    let w = this.#writer;
    if (w === null || w.encoding !== encoding || w.capacity < bound) w = this.#writer = createSnapshotWriter(encoding, bound);
    this.#tree.dumpTo(w);
    return w.finish();
  }

  async dumpEvents(): Promise<RouterEvent[]> {
    this.#check();
    return this.#tree.dumpEvents();
  }

  async stats(): Promise<ShardStats[]> {
    this.#check();
    const t = this.#tree;
    return [{ workers: t.workers().length, pairs: t.size, nodes: t.nodeCount, events: { ...this.#counts }, malformed: 0, bytes: t.bytes, sharedBytes: t.sharedBytes, heapBytes: null, evicted: t.evicted, applyMs: null, ringBatches: null, transferredBatches: null }];
  }

  async flush(): Promise<void> {
    this.#check();
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  #check(): void {
    if (this.#closed) throw new KvIndexError(ErrorCode.Closed, 'indexer is closed');
  }
}
