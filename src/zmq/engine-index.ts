/**
 * The index of one (model, tenant) fed by engine events: one RadixTree per (storage tier,
 * data-parallel rank). A worker's DP ranks are separate holders of blocks, and this is the
 * adapter-layer way to say so without touching the core: the core keys blocks by a u64
 * worker id, every u64 is a possible real worker id, so (worker, rank) cannot be folded into
 * one id without collisions. A fleet that only uses rank 0 has exactly one device tree, fed
 * exactly the events it would get through `RadixTree.applyEvent`, so its scores are the same
 * as today's. A lookup walks each rank's device tree (DP degrees are 1 to 16); lower tiers
 * never count in device scores and are reported per tier.
 *
 * A (worker, rank) can be excluded from scores (an engine gap that could not be replayed left
 * it incomplete) until it is whole again.
 */

import { computeBlockHashes, type BlockHashOptions } from '../hash/block-hash.js';
import { FIRST_UNHELD, TokensCut, type CutProbes } from '../indexer/tokens-cut.js';
import type { ApplyStatus, KvCacheEventData, RouterEvent } from '../protocol/types.js';
import { createMatchResult, type MatchResult } from '../tree/match-result.js';
import { RadixTree } from '../tree/radix-tree.js';
import { loadBincode, type BulkLoadReport } from '../tree/bulk-load.js';
import type { DumpSink } from '../tree/dump.js';
import { u64FromHalves } from '../protocol/u64-text.js';
import { StorageTier } from './convert.js';

/** worker id -> dp rank -> value. */
export type RankMap = Map<bigint, Map<number, number>>;

/** A lookup's result. Scores are in blocks; the HTTP API multiplies them by the block size. */
export interface EngineScores {
  /** Device tier: worker -> rank -> matched blocks (zeros absent). */
  readonly scores: RankMap;
  /** The frequency trail of rank 0's device tree (empty unless `expirationMs`). */
  readonly frequencies: number[];
  /** Device tier: worker -> rank -> blocks held, for every worker with a score. */
  readonly treeSizes: RankMap;
  /** Lower tiers: tier -> worker -> rank -> matched blocks (tiers without a match absent). */
  readonly lowerTiers: Map<StorageTier, RankMap>;
}

export interface EngineIndexOptions {
  /** Tokens per block of this index (u32 >= 1). */
  blockSize: number;
  /** Frequency window of the device trees (see RadixTree). */
  expirationMs?: number;
}

export class EngineIndex {
  readonly blockSize: number;
  readonly #expirationMs: number | undefined;
  /** tier -> rank -> tree. */
  readonly #trees = new Map<StorageTier, Map<number, RadixTree>>();
  /** rank -> workers kept out of scores. */
  readonly #excluded = new Map<number, Set<bigint>>();
  // Scratch of findMatchesInto (reused).
  readonly #scratch = createMatchResult();
  readonly #best = new Map<bigint, number>();
  /** `queryTokens`' cuts, asked of every tier and rank. */
  readonly #cut = new TokensCut();
  readonly #probes: CutProbes<EngineScores> = {
    firstUnheld: (first) => this.#firstBlockUnheld(first),
    prefix: (hashes) => this.query(hashes),
    deepest: (found) => {
      let best = deepest(found.scores);
      for (const m of found.lowerTiers.values()) best = Math.max(best, deepest(m));
      return best;
    },
  };

  constructor(options: EngineIndexOptions) {
    this.blockSize = options.blockSize;
    this.#expirationMs = options.expirationMs;
  }

  #tree(tier: StorageTier, rank: number): RadixTree {
    let ranks = this.#trees.get(tier);
    if (ranks === undefined) this.#trees.set(tier, (ranks = new Map()));
    let tree = ranks.get(rank);
    if (tree === undefined) {
      tree = new RadixTree(tier === StorageTier.Device && this.#expirationMs !== undefined ? { expirationMs: this.#expirationMs } : {});
      ranks.set(rank, tree);
    }
    return tree;
  }

  /**
   * Applies one event of (worker, rank) to its tier's tree. `cleared` clears the (worker,
   * rank) in every tier (an engine's AllBlocksCleared empties all its caches).
   */
  apply(workerId: bigint, rank: number, tier: StorageTier, data: KvCacheEventData, eventId: bigint): ApplyStatus {
    if (data.type === 'cleared') {
      this.clear(workerId, rank);
      return 'ok';
    }
    const event: RouterEvent = { workerId, event: { eventId, data, ...(rank === 0 ? {} : { dpRank: rank }) } };
    return this.#tree(tier, rank).applyEvent(event);
  }

  /**
   * Drops every block of (worker, rank) in every tier. A tree left empty goes: every rank an
   * engine ever used kept one (~68 KB each, walked by every lookup), so registering and
   * unregistering under new ranks grew memory without bound (found by fuzzing).
   */
  clear(workerId: bigint, rank: number): void {
    for (const [tier, ranks] of this.#trees) {
      const tree = ranks.get(rank);
      if (tree === undefined) continue;
      tree.clearWorker(workerId);
      this.#dropIfEmpty(tier, ranks, rank, tree);
    }
  }

  /** Drops every block of every rank of the worker, and forgets its exclusions. */
  removeWorker(workerId: bigint): void {
    for (const [tier, ranks] of this.#trees) {
      for (const [rank, tree] of [...ranks]) {
        tree.removeWorker(workerId);
        this.#dropIfEmpty(tier, ranks, rank, tree);
      }
    }
    for (const rank of [...this.#excluded.keys()]) this.exclude(workerId, rank, false);
  }

  #dropIfEmpty(tier: StorageTier, ranks: Map<number, RadixTree>, rank: number, tree: RadixTree): void {
    if (tree.size !== 0) return;
    ranks.delete(rank);
    if (ranks.size === 0) this.#trees.delete(tier);
  }

  /** Keeps (worker, rank) out of scores (`on`) or lets it back in. */
  exclude(workerId: bigint, rank: number, on: boolean): void {
    let set = this.#excluded.get(rank);
    if (on) {
      if (set === undefined) this.#excluded.set(rank, (set = new Set()));
      set.add(workerId);
    } else if (set !== undefined) {
      set.delete(workerId);
      if (set.size === 0) this.#excluded.delete(rank);
    }
  }

  /** Trees held, one per (tier, rank) with blocks (what a lookup walks). */
  get treeCount(): number {
    let n = 0;
    for (const ranks of this.#trees.values()) n += ranks.size;
    return n;
  }

  isExcluded(workerId: bigint, rank: number): boolean {
    return this.#excluded.get(rank)?.has(workerId) === true;
  }

  /** Blocks (worker, rank) holds in a tier. */
  blockCount(workerId: bigint, rank: number, tier: StorageTier = StorageTier.Device): number {
    return this.#trees.get(tier)?.get(rank)?.blockCount(workerId) ?? 0;
  }

  /** Prefix-match scores per (worker, rank) for a request's tokens hashes (u64 each). */
  query(hashes: BigUint64Array): EngineScores {
    const scores: RankMap = new Map();
    const treeSizes: RankMap = new Map();
    let frequencies: number[] = [];
    const lowerTiers = new Map<StorageTier, RankMap>();
    for (const [tier, ranks] of this.#trees) {
      const into = tier === StorageTier.Device ? scores : new Map<bigint, Map<number, number>>();
      for (const [rank, tree] of ranks) {
        const r = tree.findMatches(hashes);
        if (tier === StorageTier.Device && rank === 0) frequencies = r.frequencies;
        const excluded = this.#excluded.get(rank);
        for (const [worker, blocks] of r.scores) {
          if (excluded?.has(worker) === true) continue;
          put(into, worker, rank, blocks);
          if (tier === StorageTier.Device) put(treeSizes, worker, rank, tree.blockCount(worker));
        }
      }
      if (tier !== StorageTier.Device && into.size > 0) lowerTiers.set(tier, into);
    }
    return { scores, frequencies, treeSizes, lowerTiers };
  }

  /**
   * `query` for a request's tokens, hashed with `options` (its block identity). A `Uint32Array`
   * of `CUT_MIN_TOKENS` or more may stop before hashing every block, as the indexer's tokens
   * lookups do (the same two cuts, src/indexer/tokens-cut.ts, with the measurements): its first
   * block hashed alone, answering nothing when no tree of any tier or rank holds it at the start
   * of a sequence; then its first `PREFIX_BLOCKS` blocks queried, answering that when every
   * score of every tier and rank is below `PREFIX_BLOCKS` (a score is a run of leading blocks,
   * so it is the whole prompt's; the tree sizes are the workers'). Not with `expirationMs`: the
   * lookup records the frequency trail.
   */
  queryTokens(tokens: Uint32Array, options: BlockHashOptions): EngineScores {
    if (this.#expirationMs !== undefined) return this.query(computeBlockHashes(tokens, this.blockSize, options));
    const found = this.#cut.lookup(tokens, this.blockSize, options, this.#probes);
    if (found === FIRST_UNHELD) return { scores: new Map(), frequencies: [], treeSizes: new Map(), lowerTiers: new Map() };
    return found instanceof BigUint64Array ? this.query(found) : found;
  }

  /**
   * `queryTokens` answers given before every block was hashed: after the first block alone (no
   * tree held it), or from the first `PREFIX_BLOCKS` blocks (every score below that).
   */
  get cutShort(): number {
    return this.#cut.firstBlockMisses + this.#cut.prefixAnswers;
  }

  /** Whether no tree (any tier, any rank) holds `first[0]` as a sequence's first block. */
  #firstBlockUnheld(first: BigUint64Array): boolean {
    for (const ranks of this.#trees.values()) {
      for (const tree of ranks.values()) if (!tree.firstBlockMisses(first)) return false;
    }
    return true;
  }

  /**
   * The device tier as a router's index (`KvRouter`, src/router/): matching workers and their
   * best score over their ranks (the router prices per worker id, so a worker's DP ranks share
   * it; a fleet without DP is exact), excluded (worker, rank)s left out.
   */
  findMatchesInto(hashes: BigUint64Array, result: MatchResult, earlyExit = false): number {
    const best = this.#best;
    best.clear();
    for (const [rank, tree] of this.#trees.get(StorageTier.Device) ?? []) {
      const n = tree.findMatchesInto(hashes, this.#scratch, earlyExit);
      const excluded = this.#excluded.get(rank);
      for (let i = 0; i < n; i++) {
        const w = this.#scratch.workerIds[i]!;
        if (excluded?.has(w) === true) continue;
        const s = this.#scratch.scores[i]!;
        if (s > (best.get(w) ?? 0)) best.set(w, s);
      }
    }
    result.reserve(best.size, 0);
    let k = 0;
    for (const [w, s] of best) {
      result.workerIds[k] = w;
      result.scores[k++] = s;
    }
    return k;
  }

  /** A router's write (approximate mode): the event on its rank's device tree. */
  applyEvent(event: RouterEvent): ApplyStatus {
    return this.apply(event.workerId, event.event.dpRank ?? 0, StorageTier.Device, event.event.data, event.event.eventId);
  }

  /**
   * The device tier as events that rebuild it, rank by rank, each event carrying its rank. An
   * excluded (worker, rank) is left out, as lookups leave it out: its blocks are known to be
   * incomplete (an unreplayable gap), and a peer that starts from this dump would otherwise
   * score what this index does not.
   */
  dumpEvents(): RouterEvent[] {
    const out: RouterEvent[] = [];
    const ranks = this.#trees.get(StorageTier.Device);
    if (ranks === undefined) return out;
    for (const rank of [...ranks.keys()].sort((a, b) => a - b)) {
      const excluded = this.#excluded.get(rank);
      for (const ev of ranks.get(rank)!.dumpEvents()) {
        if (excluded?.has(ev.workerId) === true) continue;
        out.push(rank === 0 ? ev : { workerId: ev.workerId, event: { ...ev.event, dpRank: rank } });
      }
    }
    return out;
  }

  /** Ranks with a device tree, ascending (the trees `dumpRankTo` writes). */
  deviceRanks(): number[] {
    return [...(this.#trees.get(StorageTier.Device)?.keys() ?? [])].sort((a, b) => a - b);
  }

  /** Pairs in rank `rank`'s device tree (excluded workers included). */
  blockCountOfRank(rank: number): number {
    return this.#trees.get(StorageTier.Device)?.get(rank)?.size ?? 0;
  }

  /**
   * Rank `rank`'s device tree into `sink` (a snapshot writer), as `dumpEvents` gives it: an
   * excluded (worker, rank) is left out. The binary peer dump's path (src/http/dump-binary.ts).
   */
  dumpRankTo(rank: number, sink: DumpSink): void {
    const tree = this.#trees.get(StorageTier.Device)?.get(rank);
    if (tree === undefined) return;
    const excluded = this.#excluded.get(rank);
    tree.dumpTo(excluded === undefined ? sink : new SkipWorkers(sink, excluded));
  }

  /**
   * Applies a bincode snapshot of rank `rank`'s device tree without event objects
   * (src/tree/bulk-load.ts). Throws `SnapshotDecodeError` for malformed bytes, before the tree
   * changes.
   */
  loadRankBincode(rank: number, bytes: Uint8Array, label = ''): BulkLoadReport {
    const tree = this.#tree(StorageTier.Device, rank);
    try {
      return loadBincode(tree, bytes, false, label);
    } finally {
      this.#dropIfEmpty(StorageTier.Device, this.#trees.get(StorageTier.Device)!, rank, tree);
    }
  }
}

/** A dump sink that drops the Stored events of some workers. */
class SkipWorkers implements DumpSink {
  #skip = false;
  constructor(readonly sink: DumpSink, readonly workers: ReadonlySet<bigint>) {}
  beginStored(workerLo: number, workerHi: number, hasParent: boolean, parentLo: number, parentHi: number): void {
    this.#skip = this.workers.has(u64FromHalves(workerHi, workerLo));
    if (!this.#skip) this.sink.beginStored(workerLo, workerHi, hasParent, parentLo, parentHi);
  }
  block(blockLo: number, blockHi: number, tokensLo: number, tokensHi: number): void {
    if (!this.#skip) this.sink.block(blockLo, blockHi, tokensLo, tokensHi);
  }
  endStored(): void {
    if (!this.#skip) this.sink.endStored();
  }
}

/** The largest score in a worker -> rank -> score map (0 when empty). */
function deepest(m: RankMap): number {
  let best = 0;
  for (const ranks of m.values()) for (const v of ranks.values()) if (v > best) best = v;
  return best;
}

function put(m: RankMap, worker: bigint, rank: number, value: number): void {
  let ranks = m.get(worker);
  if (ranks === undefined) m.set(worker, (ranks = new Map()));
  ranks.set(rank, value);
}
