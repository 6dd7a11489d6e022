/**
 * The radix tree of cached blocks with a per-worker reverse lookup, as in Dynamo's KV router
 * (reference section 3), kept in typed arrays: nodes and pairs live in `NodeStore`, edges in
 * `EdgeTable`, each worker's external-hash lookup in a `WorkerTable`. No object, Map or bigint
 * exists per block; bigints appear only at the API edge.
 *
 * Deliberate differences from Dynamo:
 * - a Stored block whose external hash the worker already holds elsewhere (including on the
 *   path itself) is `invalid_block_sequence` and nothing of the event is applied;
 * - Removed processes every hash and reports `block_not_found` if any was unknown;
 * - a worker scores the blocks of the path it holds up to its first gap (walk.ts `enter`; what
 *   Dynamo's 2026 active-set walk computes, where its earlier walk counted every held node);
 * - a node that loses its last worker stays, hollow, while it has children, and is freed with
 *   its hollow ancestors when it has none (`detach`); Dynamo keeps every emptied node (a leak)
 *   and clears its children, dropping the blocks other workers hold below it;
 * - a worker that stores a block it already holds at the same place under another external
 *   hash takes the new hash and the old one leaves its lookup (Dynamo keeps both entries).
 */
import { createSnapshotWriter } from '../protocol/snapshot-writer.js';
import { assertRouterEvent } from '../protocol/validate.js';
import type {
  ApplyStatus,
  OverlapScores,
  RouterEvent,
  SnapshotEncoding,
} from '../protocol/types.js';
import { SharedStore } from './array-store.js';
import { dumpTree, EventCollector, type DumpSink } from './dump.js';
import { EdgeTable, findChild } from './edge-table.js';
import { MatchResult } from './match-result.js';
import { NodeStore, NONE, ROOT, type NodeId, type PairRef, type WorkerSlot } from './node-store.js';
import { PairBudget } from './pair-budget.js';
import { UnitLog } from './unit-log.js';
import type { Recency } from './recency.js';
import { ScratchSet } from './scratch-set.js';
import { U64Scratch } from './u64-scratch.js';
import { createUseTracker, type UseTracker } from './use-tracker.js';
import { H, HEADER_WORDS, type SharedTreeLayout } from './shared-layout.js';
import { WalkScratch, emptyLookupArrays, firstBlockUnheld, rootMisses, type LookupArrays } from './walk.js';
import { TableSlab, WorkerTable } from './worker-table.js';
import { walkWithTrail, type TrailTree } from './trail-walk.js';

export interface RadixTreeOptions {
  /** Window for the `frequencies` trail of `findMatches`, in the unit of `now` (ms). */
  expirationMs?: number;
  /** Clock for `expirationMs`; defaults to `performance.now()`. */
  now?: () => number;
  /**
   * Hard memory budget in (worker, block) pairs: after a Stored event takes the tree over it,
   * the least recently stored leaf blocks are evicted, each as if its workers had removed it,
   * down to `lowWaterRatio` of it. `size` never exceeds it after an event. A hollow node (kept
   * without workers for the blocks below it) counts as a pair. Default: no budget.
   */
  maxPairs?: number;
  /** Fraction of `maxPairs` an eviction leaves (default 0.9). */
  lowWaterRatio?: number;
  /**
   * @internal Keep what lookups read in shared memory (a shard's tree, read by lookups on the
   * calling thread: shared-layout.ts).
   */
  shared?: boolean;
  /** @internal Initial node and edge capacity (tests force growth with tiny ones). */
  initialCapacity?: number;
}

const OK: ApplyStatus = 'ok';
const PARENT_NOT_FOUND: ApplyStatus = 'parent_block_not_found';
const BLOCK_NOT_FOUND: ApplyStatus = 'block_not_found';
const INVALID: ApplyStatus = 'invalid_block_sequence';
/** Node 20's largest typed array in bytes (`buffer.constants.MAX_LENGTH`): a dump writer's size cap. */
const MAX_DUMP_BYTES = 2 ** 32;
/** A resolved Removed hash the worker does not hold: pair ref 0 would be the root's, which holds none. */
const NOT_HELD = 0;


export class RadixTree {
  /** @internal */ readonly nodes: NodeStore;
  /** @internal */ readonly edges: EdgeTable;
  private readonly slotOf = new Map<bigint, WorkerSlot>();
  /** @internal slot -> worker id, or null for a free slot. */ readonly slotIds: (bigint | null)[] = [];
  /** @internal slot -> the worker's lookup, or null for a free slot. */ readonly tables: (WorkerTable | null)[] = [];
  /** @internal slot -> worker id halves (the node store keeps them: lookups copy them into results). */
  get slotLo(): Uint32Array {
    return this.nodes.slotLo;
  }
  /** @internal */
  get slotHi(): Uint32Array {
    return this.nodes.slotHi;
  }
  /** The growable memory of the arrays a lookup reads (shard trees: readers' too). */
  private readonly store: SharedStore;
  /** The writer's own growable arrays (external hashes), never read by another thread. */
  private readonly own = new SharedStore();
  /** @internal The slots of the small worker tables (worker-table.ts `TableSlab`). */
  readonly tableSlab: TableSlab;
  /** Shared mode: the header words of shared-layout.ts; null in-thread. */
  private readonly header: Int32Array | null;
  /** Shared mode: the unit log that lookups read past a descheduled writer by (unit-log.ts). */
  private readonly units: UnitLog | null;
  private readonly freeSlots: number[] = [];
  private pairs = 0;
  /**
   * Hollow nodes (no workers, kept for the blocks below them: `detach`). They count in the
   * `maxPairs` budget as pairs do: a worker that removes all but the last block of each chain
   * it stores would otherwise hold a node per removed block outside the budget.
   */
  private hollow = 0;
  /** Lookup sizes asked by `reserveWorker` for workers not in the tree yet (a bulk load). */
  private presized: Map<bigint, number> | null = null;

  // Scratch, reused across calls.
  private path = new Int32Array(256);
  /** Where the event `checkStored` accepted starts (its parent's node, or the root). */
  private storeAt = 0;
  /**
   * The Removed event between `resolveRemoved` and `forgetResolved`: each hash's pair (NOT_HELD
   * for none), the worker's slot, the hashes.
   */
  private resolved = new Int32Array(64);
  private readonly removal: { slot: number; words: Uint32Array; off: number; n: number } = { slot: 0, words: new Uint32Array(0), off: 0, n: 0 };
  /**
   * The event between `prepareStore` and `commitStore`: worker slot, blocks, existing prefix,
   * and the node its first new node links to.
   */
  private readonly pending: { slot: number; words: Uint32Array; off: number; existing: number; linkTo: number } = { slot: 0, words: new Uint32Array(0), off: 0, existing: 0, linkTo: 0 };
  private readonly scratch = new U64Scratch();
  private scoreBySlot = new Int32Array(16);
  private readonly walker = new WalkScratch();
  private readonly touched: number[] = [];
  private readonly seen = new ScratchSet();

  /** Frequency trail of lookups (Dynamo's `recent_uses`); a no-op unless `expirationMs`. */
  private readonly uses: UseTracker;
  /** The pair budget (`maxPairs`) and the stores' recency it evicts by. */
  private readonly budget: PairBudget;
  private readonly recency: Recency;

  constructor(options: RadixTreeOptions = {}) {
    const capacity = options.initialCapacity ?? 1024;
    if (options.shared === true) {
      const header = new Int32Array(new SharedArrayBuffer(HEADER_WORDS * 4));
      this.header = header;
      this.units = new UnitLog(header);
      this.store = new SharedStore(() => Atomics.add(header, H.GEN, 1));
      this.nodes = new NodeStore(this.store, capacity, this.own);
      this.edges = new EdgeTable(this.nodes, capacity, (active, mask) => {
        Atomics.store(header, H.EDGE_ACTIVE, active);
        Atomics.store(header, H.EDGE_MASK, mask);
        Atomics.add(header, H.GEN, 1);
      });
    } else {
      this.header = null;
      this.units = null;
      // Growable memory in-thread too (array-store.ts): in place, so in small steps.
      this.store = this.own;
      this.nodes = new NodeStore(this.own, capacity, this.own);
      this.edges = new EdgeTable(this.nodes, capacity);
    }
    this.tableSlab = new TableSlab(this.own);
    // A member's node, for renumbering sets (member-sets.ts `compact`): its worker's entry is `~node`.
    this.nodes.members.nodeOfMember = (slot, lo, hi) => ~(this.tables[slot]!.find(lo, hi) as number);
    this.uses = createUseTracker(options.expirationMs, options.now);
    this.trailTree = { nodes: this.nodes, uses: this.uses, slotIds: this.slotIds, childOf: (cur, lo, hi) => this.childOf(cur, lo, hi) };
    this.budget = new PairBudget(options.maxPairs, options.lowWaterRatio);
    this.recency = this.budget.recency;
    this.findWords = options.expirationMs === undefined ? this.findWordsActive.bind(this) : this.findWordsTrail.bind(this);
  }

  /**
   * @internal The shared memory that lookups on another thread read (shared-layout.ts); null
   * for an in-thread tree.
   */
  get layout(): SharedTreeLayout | null {
    if (this.header === null) return null;
    const n = this.nodes;
    const sab = (a: Int32Array | Uint32Array): SharedArrayBuffer => a.buffer as SharedArrayBuffer;
    const [edgesA, edgesB] = this.edges.buffers!;
    return {
      header: sab(this.header), parent: sab(n.parent), node: sab(n.node),
      sets: sab(n.members.sets), mSlot: sab(n.members.mSlot), keyLo: sab(n.keyLo), keyHi: sab(n.keyHi),
      edgesA, edgesB, slotLo: sab(n.slotLo), slotHi: sab(n.slotHi),
      mIds: sab(n.members.mIds), roots: this.edges.rootCounts.buffer as SharedArrayBuffer,
    };
  }

  /**
   * @internal Makes room, before a write section, for the Stored event `checkStored` just
   * accepted (`n` blocks): node arrays grow and a shared edge table is rebuilt here, outside
   * the readers' lock; `commitEdges` switches to the rebuilt table inside it. Returns whether a
   * rebuilt table waits for that switch.
   *
   * Sized by what the event adds, not by its length: only its blocks missing from the tree
   * (`path` from `checkStored`) become nodes, and of those only the first can be an edge of the
   * table (every later one is the first child of a node of the same event, reached through its
   * parent's record: `prepareStore`). Reserving `n` of each made a shard's conversation tree
   * 54.1 typed bytes a pair where the same tree in-thread is 38.3: a conversation's next turn
   * resends its history, so an event of a few hundred blocks near the arrays' end grew them by a
   * whole step (16,384 nodes, half again at 32k nodes a shard) for the few nodes it added, and
   * doubled both edge buffers.
   */
  reserveStore(n: number): boolean {
    const m = this.heldPrefix(n);
    if (m === n) return false;
    this.nodes.reserve(n - m);
    return this.edges.reserve(1);
  }

  /**
   * @internal Sizes the worker's lookup for `blocks` more pairs in one rehash (a bulk load
   * that counted them: bulk-load.ts); for a worker not in the tree yet, when it comes.
   */
  reserveWorker(workerId: bigint, blocks: number): void {
    const slot = this.slotOf.get(workerId);
    if (slot !== undefined) this.tables[slot]!.reserve(blocks);
    else (this.presized ??= new Map()).set(workerId, blocks);
  }

  /** @internal Switches to the edge table `reserve` rebuilt (under the readers' lock). */
  commitEdges(): void {
    this.edges.commit();
  }

  /** Total (worker, block) pairs held. */
  get size(): number {
    return this.pairs;
  }

  /** Pairs evicted by the `maxPairs` budget since construction. */
  get evicted(): number {
    return this.budget.evicted;
  }

  /** Live nodes, the root included. */
  get nodeCount(): number {
    return this.nodes.liveNodes;
  }

  /**
   * Of `bytes`, those in SharedArrayBuffers (growable memory, array-store.ts), which
   * `process.memoryUsage()` does not count: memory figures add them to its heap and buffers.
   */
  get sharedBytes(): number {
    let b = this.store === this.own ? this.own.bytes : this.store.bytes + this.own.bytes;
    for (const t of this.tables) if (t !== null) b += t.sharedBytes;
    return b;
  }

  /** Bytes held by the tree's typed arrays (capacities). */
  get bytes(): number {
    let b = this.nodes.bytes + this.edges.bytes + this.scoreBySlot.byteLength + this.tableSlab.bytes;
    for (const t of this.tables) if (t !== null) b += t.bytes;
    return b;
  }

  /**
   * Applies one event and reports Dynamo's status label. Never throws on engine inconsistencies;
   * throws `EventParseError` only for a structurally malformed event object.
   */
  applyEvent(event: RouterEvent): ApplyStatus {
    assertRouterEvent(event);
    const data = event.event.data;
    switch (data.type) {
      case 'stored': {
        const n = data.blocks.length;
        const words = this.scratch.blockWords(data.blocks);
        const p = data.parentHash;
        if (p === null) return this.applyStored(event.workerId, false, 0, 0, words, 0, n);
        return this.applyStored(event.workerId, true, Number(p & 0xffffffffn), Number(p >> 32n), words, 0, n);
      }
      case 'removed':
        return this.applyRemoved(event.workerId, this.scratch.hashWords(data.blockHashes, false), 0, data.blockHashes.length);
      case 'cleared':
        this.clearWorker(event.workerId);
        return OK;
    }
  }

  /**
   * Stored, on raw words: `n` blocks at `words[off + 4i ..]` as (blockLo, blockHi, tokLo, tokHi).
   * The binary path of the sharded indexer calls this directly.
   */
  applyStored(
    workerId: bigint, hasParent: boolean, parentLo: number, parentHi: number,
    words: Uint32Array, off: number, n: number,
  ): ApplyStatus {
    const status = this.checkStored(workerId, hasParent, parentLo, parentHi, words, off, n);
    if (status === null) {
      this.commitStore(0, this.prepareStore(workerId, words, off, n));
      this.enforceBudget();
    }
    return status ?? OK;
  }

  /**
   * @internal Phase 1 of Stored: finds each block's place and returns the status of an event
   * it rejects (changing nothing), or null when `storeRange` may apply it. A shard checks a
   * large event whole, then stores it in ranges, one write section each: a stored prefix of the
   * event is a valid state for readers in between.
   */
  checkStored(
    workerId: bigint, hasParent: boolean, parentLo: number, parentHi: number,
    words: Uint32Array, off: number, n: number,
  ): ApplyStatus | null {
    const slot0 = this.slotOf.get(workerId);
    const table0 = slot0 === undefined ? null : this.tables[slot0]!;
    const nodes = this.nodes;
    let start: number = ROOT;
    if (hasParent) {
      const ref = table0 === null ? null : table0.find(parentLo | 0, parentHi | 0);
      if (ref === null) return PARENT_NOT_FOUND;
      start = nodes.nodeOfRef(ref);
    }
    this.storeAt = start;
    if (n === 0) return OK;

    if (this.path.length < n) this.path = new Int32Array(Math.max(n, this.path.length * 2));
    const path = this.path;
    const seen = this.seen;
    seen.reset(n);
    let cur = start;
    for (let i = 0; i < n; i++) {
      const k = off + 4 * i;
      // Halves read as int32: they cross calls (see worker-table.ts).
      const bLo = words[k]! | 0;
      const bHi = words[k + 1]! | 0;
      const tLo = words[k + 2]! | 0;
      const tHi = words[k + 3]! | 0;
      const child = cur < 0 ? NONE : this.childOf(cur, tLo, tHi);
      if (table0 !== null) {
        const held = table0.find(bLo, bHi);
        if (held !== null && nodes.nodeOfRef(held) !== child) return INVALID;
      }
      if (!seen.add(bLo, bHi)) return INVALID;
      path[i] = child;
      cur = child;
    }
    return null;
  }

  /**
   * @internal Phase 2 of Stored, the part readers cannot see, so a shard runs it outside the
   * readers' lock (this thread is the tree's only writer): allocates the event's new nodes, each
   * linked below the one before except the first (each is its new parent's first child: no
   * edge), and records every block in
   * the worker's lookup and the recency. `commitStore` then publishes it in `units` steps: one per
   * block already in the tree (the worker joins that node), then one that links the first new
   * node, making the whole new chain visible at once. New blocks were 95 % of the blocks stored
   * in the offered-load sweep, and stores about half of the time a shard held the lock.
   * Returns the number of units.
   */
  prepareStore(workerId: bigint, words: Uint32Array, off: number, n: number): number {
    const nodes = this.nodes;
    const slot = this.slotOf.get(workerId) ?? this.addWorker(workerId);
    const table = this.tables[slot]!;
    // A worker's first event: each of its n blocks (distinct: checkStored) is a new pair, so the
    // lookup is sized once (4,096 workers storing a 48-block prompt: 4 rehashes a worker, 9 % of
    // the build, and 4x its table in freed arrays).
    if (table.count === 0) table.reserveSteps(n);
    const path = this.path;
    const m = this.heldPrefix(n);
    let cur = m === 0 ? this.storeAt : path[m - 1]!;
    this.pending.linkTo = cur;
    for (let i = m; i < n; i++) {
      const k = off + 4 * i;
      const child = nodes.allocUnlinked(cur as NodeId, words[k + 2]! | 0, words[k + 3]! | 0, slot, words[k]! | 0, words[k + 1]! | 0);
      if (i > m) this.nodes.link(child); // its parent is new: it becomes a first child, no edge
      table.insert(child as number as PairRef, words[k]! | 0, words[k + 1]! | 0);
      this.pairs++;
      path[i] = child;
      cur = child;
    }
    for (let i = 0; i < n; i++) this.recency.touch(path[i]!);
    this.pending.slot = slot;
    this.pending.words = words;
    this.pending.off = off;
    this.pending.existing = m;
    return m < n ? m + 1 : m;
  }

  /** How many of the `n` blocks `checkStored` placed lead the event already held (`path`). */
  private heldPrefix(n: number): number {
    const path = this.path;
    let m = 0;
    while (m < n && path[m]! >= 0) m++;
    return m;
  }

  /**
   * @internal Publishes units [from, to) of the event `prepareStore` prepared last (a shard
   * does it under the readers' lock): puts the worker on the nodes the event found in the tree,
   * then links the first new node. Every prefix of the units is a valid state for readers: the
   * worker holds a prefix of the event's blocks.
   */
  commitStore(from: number, to: number): void {
    const p = this.pending;
    const table = this.tables[p.slot]!;
    const path = this.path;
    for (let u = from; u < to; u++) {
      const node = path[u]! as NodeId;
      if (u < p.existing) {
        const k = p.off + 4 * u;
        this.addPair(node, p.slot as WorkerSlot, table, p.words[k]! | 0, p.words[k + 1]! | 0);
      } else {
        const u = this.units;
        if (u !== null) {
          u.open();
          u.add(p.linkTo); // its children change; the chain is new
          u.begin();
        }
        this.linkChild(node);
        u?.end();
      }
    }
  }

  /**
   * @internal Evicts down to the low-water mark if a Stored event took the tree over its
   * `maxPairs` (pair-budget.ts). `applyStored` calls it; a shard storing an event in steps
   * calls it after the last.
   */
  enforceBudget(): void {
    if (this.pairs + this.hollow <= this.budget.max) return;
    const nodes = this.nodes;
    this.budget.enforce(nodes, () => this.pairs + this.hollow, (id) => {
      const w = nodes.w0(id);
      if (w >= 0) {
        this.dropPair(id as PairRef, this.tables[w]!);
      } else {
        const off = nodes.members.offset(-w - 2);
        this.dropPair(~id as PairRef, this.tables[nodes.members.mSlot[off]!]!);
      }
    });
  }

  /** Removed, on raw words: `n` hashes at `words[off + 2i ..]` as (lo, hi). */
  applyRemoved(workerId: bigint, words: Uint32Array, off: number, n: number): ApplyStatus {
    const resolved = this.resolveRemoved(workerId, words, off, n);
    if (resolved < 0) return n > 0 ? BLOCK_NOT_FOUND : OK;
    const missing = this.dropResolved(0, resolved);
    this.forgetResolved();
    return missing > 0 ? BLOCK_NOT_FOUND : OK;
  }

  /**
   * @internal Phase 1 of Removed, which only reads (a shard runs it outside the readers' lock):
   * finds the worker's pair of each of the `n` hashes, for `dropResolved`. Returns `n`, or -1
   * for a worker the tree does not know (then it holds none of them).
   */
  resolveRemoved(workerId: bigint, words: Uint32Array, off: number, n: number): number {
    const slot = this.slotOf.get(workerId);
    if (slot === undefined) return -1;
    const table = this.tables[slot]!;
    if (this.resolved.length < n) this.resolved = new Int32Array(Math.max(n, this.resolved.length * 2));
    const out = this.resolved;
    for (let i = 0; i < n; i++) out[i] = table.find(words[off + 2 * i]! | 0, words[off + 2 * i + 1]! | 0) ?? NOT_HELD;
    this.removal.slot = slot;
    this.removal.words = words;
    this.removal.off = off;
    this.removal.n = n;
    return n;
  }

  /**
   * @internal Phase 2 of Removed (under the readers' lock): drops the pairs `resolveRemoved`
   * found for its hashes [from, to) that the worker still holds (an
   * earlier drop may have taken one: the same hash twice); returns
   * how many it did not drop. Their entries stay in the worker's lookup until `forgetResolved`.
   */
  dropResolved(from: number, to: number): number {
    const slot = this.removal.slot;
    const table = this.tables[slot]!;
    let missing = 0;
    for (let i = from; i < to; i++) {
      const ref = this.resolved[i]! as PairRef;
      if (ref === NOT_HELD || !this.holds(ref, slot)) missing++;
      else this.dropPair(ref, table, true);
    }
    return missing;
  }

  /**
   * @internal Phase 3 of Removed (private to the shard thread, so outside the lock): the
   * dropped hashes leave the worker's lookup. Finding them there was ~25 % of a shard's removal
   * time under the lock (offered-load sweep); forgetting them is a probe of the same table.
   */
  forgetResolved(): void {
    const r = this.removal;
    const table = this.tables[r.slot];
    if (table == null) return;
    for (let i = 0; i < r.n; i++) {
      const ref = this.resolved[i]!;
      if (ref !== NOT_HELD) table.removeRef(r.words[r.off + 2 * i]! | 0, r.words[r.off + 2 * i + 1]! | 0, ref as PairRef);
    }
  }

  /** Whether pair `ref` is live and the worker's in `slot` (no pair is allocated while removing). */
  private holds(ref: PairRef, slot: number): boolean {
    const nodes = this.nodes;
    return ref >= 0 ? nodes.w0(ref) === slot : nodes.memberPos(~ref, slot) >= 0;
  }

  /**
   * Per-worker overlap: walk `hashes` (LocalBlockHash sequence) from the root; a worker scores
   * the visited nodes it holds up to its first gap; stop at the first missing block, or with
   * `earlyExit` after a node held by exactly one worker.
   */
  findMatches(hashes: BigUint64Array | readonly bigint[], earlyExit = false): OverlapScores {
    const n = hashes.length;
    let words: Uint32Array;
    if (hashes instanceof BigUint64Array) {
      // Little-endian halves of the caller's buffer, no copy (Node runs little-endian only).
      words = new Uint32Array(hashes.buffer, hashes.byteOffset, n * 2);
    } else {
      words = this.scratch.hashWords(hashes, true);
    }
    return this.findMatchesWords(words, 0, n, earlyExit);
  }

  /** findMatches on raw words: `n` hashes at `words[off + 2i ..]` as (lo, hi). */
  findMatchesWords(words: Uint32Array, off: number, n: number, earlyExit = false): OverlapScores {
    return this.findWords(words, off, n, earlyExit);
  }

  /**
   * findMatchesWords, chosen at construction: without a frequency window, the active-set walk
   * (walk.ts: O(1) per node that holds the same workers as its parent); with one, the per-node
   * walk that records each visited node's use.
   */
  private readonly findWords: (words: Uint32Array, off: number, n: number, earlyExit: boolean) => OverlapScores;

  /** The active-set walk, as a Map of every matching worker. */
  private findWordsActive(words: Uint32Array, off: number, n: number, earlyExit: boolean): OverlapScores {
    const walker = this.walker;
    walker.ensure(this.slotIds.length);
    const k = walker.walk(this.lookupArrays(), words, off, n, earlyExit);
    const scores = new Map<bigint, number>();
    if (walker.bulkOff !== NONE) {
      // The bulk members, then the visited workers (which overwrite those of them that
      // followed a few-worker branch with their own scores).
      const mSlot = this.nodes.members.mSlot;
      for (let i = 0; i < walker.bulkCount; i++) scores.set(this.slotIds[mSlot[walker.bulkMembers + i]!]!, walker.bulkScore);
    }
    const touched = walker.touched;
    const score = walker.score;
    for (let i = 0; i < k; i++) scores.set(this.slotIds[touched[i]!]!, score[touched[i]!]!);
    return { scores, frequencies: [] };
  }

  /** The per-node walk, recording the frequency trail (trail-walk.ts). */
  private findWordsTrail(words: Uint32Array, off: number, n: number, earlyExit: boolean): OverlapScores {
    return walkWithTrail(this.trailTree, this.scoreBySlot, this.touched, words, off, n, earlyExit);
  }

  /** This tree as the trail walk reads it (built once in the constructor). */
  private readonly trailTree: TrailTree;

  /**
   * The allocation-free lookup: the same walk and scores as `findMatches`, written into a
   * caller-owned result (`createMatchResult()`): fills `result.workerIds` / `result.scores` at
   * 0..n-1 and returns n, the number of matching workers. No frequency trail: with
   * `expirationMs`, `findMatches` reports and records it.
   */
  findMatchesInto(hashes: BigUint64Array | readonly bigint[], result: MatchResult, earlyExit = false): number {
    const n = hashes.length;
    let words: Uint32Array;
    if (hashes instanceof BigUint64Array) {
      // The walk's first step on the first hash alone, before copying the rest (u64-scratch.ts
      // firstWords): on the synthetic workload's no-match lookups (70 % of its lookups) p50
      // 0.12 -> 0.09 us and p99 0.44 -> 0.30 us in-thread; matching lookups unchanged.
      if (n > 1) {
        const w = this.scratch.firstWords(hashes);
        if (rootMisses(this.lookupArrays(), w[0]! | 0, w[1]! | 0)) return 0;
      }
      words = this.scratch.copyWords(hashes);
    } else {
      words = this.scratch.hashWords(hashes, true);
    }
    return this.findMatchesWordsInto(words, 0, n, earlyExit, result);
  }

  /**
   * Whether no worker holds the root's child with tokens hash `first[0]` (there is none, or it
   * is hollow): then no lookup that starts with it can score. The walk's own first step
   * (walk.ts `firstBlockUnheld`), nothing recorded, nothing allocated.
   */
  firstBlockMisses(first: BigUint64Array): boolean {
    const w = this.scratch.firstWords(first);
    return firstBlockUnheld(this.lookupArrays(), w[0]! | 0, w[1]! | 0);
  }

  /** findMatchesInto on raw words: `n` hashes at `words[off + 2i ..]` as (lo, hi). */
  findMatchesWordsInto(words: Uint32Array, off: number, n: number, earlyExit: boolean, result: MatchResult): number {
    const walker = this.walker;
    walker.ensure(this.slotIds.length);
    const a = this.lookupArrays();
    return walker.emit(a, walker.walk(a, words, off, n, earlyExit), result, 0);
  }

  private readonly arrays: LookupArrays = emptyLookupArrays();

  /** The current arrays for the walk (walk.ts) (one object, refreshed in place: no allocation). */
  private lookupArrays(): LookupArrays {
    const a = this.arrays;
    const n = this.nodes;
      a.parent = n.parent;
    a.node = n.node;
    a.sets = n.members.sets;
    a.mSlot = n.members.mSlot;
    a.keyLo = n.keyLo;
    a.keyHi = n.keyHi;
    a.edges = this.edges.slotsView;
    a.edgeMask = this.edges.maskValue;
    a.roots = this.edges.rootCounts;
    a.mIds = n.members.mIds;
    a.slotLo = n.slotLo;
    a.slotHi = n.slotHi;
    return a;
  }

  /** Drops all blocks of the worker; it stays known (Dynamo's `clear_all_blocks`). */
  clearWorker(workerId: bigint): void {
    const slot = this.slotOf.get(workerId);
    if (slot === undefined) return;
    const table = this.tables[slot]!;
    if (table.count === 0) return;
    // Collect the hashes first: dropping pairs while iterating the table that loses them
    // would skip or repeat entries.
    const hashes: number[] = [];
    const nodes = this.nodes;
    for (let i = 0, cap = table.capacity; i < cap; i++) {
      if (table.isEmptyAt(i)) continue;
      const ref = table.refAt(i);
      if (ref >= 0) hashes.push(nodes.h0Lo[ref]!, nodes.h0Hi[ref]!);
      else {
        const p = nodes.memberPos(~ref, slot);
        hashes.push(nodes.members.mLo[p]!, nodes.members.mHi[p]!);
      }
    }
    for (let i = 0; i < hashes.length; i += 2) {
      const ref = table.find(hashes[i]! | 0, hashes[i + 1]! | 0);
      if (ref !== null) this.dropPair(ref, table);
    }
  }

  /** Drops all blocks of the worker and forgets it. Unknown worker: no-op. */
  removeWorker(workerId: bigint): void {
    const slot = this.slotOf.get(workerId);
    if (slot === undefined) return;
    this.clearWorker(workerId);
    this.tables[slot]!.dispose();
    this.slotOf.delete(workerId);
    this.slotIds[slot] = null;
    this.tables[slot] = null;
    this.freeSlots.push(slot);
  }

  /** Every worker holding at least one block, ascending. */
  workers(): bigint[] {
    const out: bigint[] = [];
    for (let s = 0; s < this.tables.length; s++) {
      const t = this.tables[s];
      if (t != null && t.count > 0) out.push(this.slotIds[s]!);
    }
    return out.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** Number of blocks the worker holds. */
  blockCount(workerId: bigint): number {
    const slot = this.slotOf.get(workerId);
    return slot === undefined ? 0 : this.tables[slot]!.count;
  }

  /**
   * The tree as Stored events that rebuild it: per worker, maximal chains as one multi-block
   * event, parents before children, each parent hash the worker's own; event ids from 0.
   */
  dumpEvents(): RouterEvent[] {
    const sink = new EventCollector();
    this.dumpTo(sink);
    return sink.events;
  }

  /** The same dump written straight into snapshot bytes (no event objects). */
  dumpSnapshot(encoding: SnapshotEncoding = 'bincode'): Uint8Array {
    // Size the buffer for the worst case (every pair its own event: 53 bytes in bincode; JSON
    // lines grows past 80 only for dumps of very short chains): pages never written are never
    // faulted in, while regrowing copies into fresh memory, which costs ~3 ms per MB of page
    // faults on the 2-core dev VM. A tighter 20 bytes a pair looked faster on a million pairs,
    // but only because allocations under glibc's 32 MB mmap threshold reuse the freed buffer of
    // the previous dump; past it the time jumped 3.5x from 1M to 2M pairs (bench/snapshot-scaling).
    // The writer is private to this call, so its buffer is handed out without `finish()`'s copy.
    const writer = createSnapshotWriter(encoding, this.dumpBound(encoding));
    this.dumpTo(writer);
    return writer.finishShared();
  }

  /**
   * Worst-case bytes of this tree's dump in `encoding`: a writer this large never regrows. At
   * most `MAX_DUMP_BYTES`: past 75.3M pairs the bincode bound (57 bytes a pair) is more than
   * Node 20's largest typed array, while a real dump is ~16.3 bytes a pair (the 65.5M-pair fleet:
   * 1,068 MB); the writer grows in the rare dump that outgrows it.
   */
  dumpBound(encoding: SnapshotEncoding): number {
    return Math.min(MAX_DUMP_BYTES, 64 + this.pairs * (encoding === 'jsonl' ? 80 : 57));
  }

  /** Writes the dump into any sink (the snapshot writer, an event collector). */
  dumpTo(sink: DumpSink): void {
    dumpTree(this, sink);
  }

  // ---- internals ----

  /** The child of `cur` keyed by the tokens hash, or -1. */
  private childOf(cur: number, lo: number, hi: number): number {
    const n = this.nodes;
    return findChild(this.edges.slotsView, this.edges.maskValue, n.parent, n.node, cur, lo | 0, hi | 0);
  }

  /**
   * Links a node as its parent's first child. The edge table holds only children that are not
   * first (edge-table.ts): the previous first child goes into it, before the new one takes its
   * place, so a reader finds it one way or the other at every moment. (The newest child first,
   * as with sibling links: a dump then follows the same chains, and measured no slower.)
   */
  private linkChild(id: NodeId): void {
    const nodes = this.nodes;
    const head = nodes.firstChild(nodes.parent[id]!);
    if (head !== NONE) this.edges.insert(head as NodeId);
    nodes.link(id);
  }

  /**
   * Unlinks a node from its parent (`freeNodeId` then clears its record). A first child leaves
   * its parent without one: its siblings stay where they are, in the table.
   */
  private unlinkChild(id: NodeId, up: number): void {
    if (this.nodes.firstChild(up) !== id) this.edges.remove(id);
    this.nodes.unlink(id, up);
  }

  private addWorker(workerId: bigint): WorkerSlot {
    const slot = (this.freeSlots.pop() ?? this.slotIds.length) as WorkerSlot;
    this.slotIds[slot] = workerId;
    this.nodes.setSlot(slot, Number(workerId & 0xffffffffn), Number(workerId >> 32n));
    if (this.header !== null && slot >= this.header[H.SLOTS]!) Atomics.store(this.header, H.SLOTS, slot + 1);
    this.tables[slot] = new WorkerTable(this.nodes, slot, this.tableSlab);
    const ahead = this.presized?.get(workerId);
    if (ahead !== undefined) {
      this.tables[slot]!.reserve(ahead);
      this.presized!.delete(workerId);
    }
    this.slotOf.set(workerId, slot);
    if (slot >= this.scoreBySlot.length) {
      const next = new Int32Array(this.scoreBySlot.length * 2);
      next.set(this.scoreBySlot);
      this.scoreBySlot = next;
    }
    return slot;
  }

  /** Puts the worker on an existing node with this external hash (idempotent, or a rehash). */
  private addPair(node: NodeId, slot: WorkerSlot, table: WorkerTable, lo: number, hi: number): void {
    const u = this.units;
    if (u === null) {
      this.joinNode(node, slot, table, lo, hi);
      return;
    }
    u.open();
    u.add(node);
    u.begin();
    this.joinNode(node, slot, table, lo, hi);
    u.end();
  }

  /** `addPair`'s work, one unit (unit-log.ts): only `node`'s worker set changes. */
  private joinNode(node: NodeId, slot: WorkerSlot, table: WorkerTable, lo: number, hi: number): void {
    const nodes = this.nodes;
    const w = nodes.w0(node);
    if (w === slot) {
      if ((nodes.h0Lo[node]! | 0) === (lo | 0) && (nodes.h0Hi[node]! | 0) === (hi | 0)) return;
      table.remove(nodes.h0Lo[node]! | 0, nodes.h0Hi[node]! | 0);
      nodes.h0Lo[node] = lo;
      nodes.h0Hi[node] = hi;
      table.insert(node as number as PairRef, lo, hi);
      return;
    }
    if (w === NONE) {
      // A hollow node (no workers, kept for the blocks below it: `detach`): the pair goes inline.
      nodes.h0Lo[node] = lo;
      nodes.h0Hi[node] = hi;
      nodes.setW0(node, slot);
      table.insert(node as number as PairRef, lo, hi);
      this.pairs++;
      this.hollow--;
      return;
    }
    const m = nodes.members;
    let set: number;
    if (w >= 0) {
      // A second worker: the inline pair and the new one make a member set (member-sets.ts);
      // the inline worker's lookup is repointed at its member.
      const hLo = nodes.h0Lo[node]!;
      const hHi = nodes.h0Hi[node]!;
      set = m.create();
      m.append(set, w, hLo, hHi);
      nodes.setW0(node, -set - 2);
      this.tables[w]!.move(hLo | 0, hHi | 0, node as number as PairRef, ~node as PairRef);
    } else {
      // O(1) membership in large sets (their member tables): walking the list made a block
      // shared by thousands of workers cost O(workers) per store.
      set = -w - 2;
      const p = m.find(set, slot);
      if (p !== NONE) {
        if ((m.mLo[p]! | 0) === (lo | 0) && (m.mHi[p]! | 0) === (hi | 0)) return;
        table.remove(m.mLo[p]! | 0, m.mHi[p]! | 0);
        m.mLo[p] = lo;
        m.mHi[p] = hi;
        table.insert(~node as PairRef, lo, hi);
        return;
      }
    }
    m.append(set, slot, lo, hi, w >= 0 ? -1 : m.hole);
    table.insert(~node as PairRef, lo, hi);
    this.pairs++;
  }

  /**
   * Removes one pair; a node left without workers goes to `detach`. With
   * `forgetLater` its entry stays in the worker's lookup (`forgetResolved` removes it).
   */
  private dropPair(ref: PairRef, table: WorkerTable, forgetLater = false): void {
    const u = this.units;
    if (u === null) {
      this.leaveNode(ref, table, forgetLater);
      return;
    }
    u.open();
    if (ref >= 0) this.listDetach(ref as number as NodeId, u);
    else u.add(~ref);
    u.begin();
    this.leaveNode(ref, table, forgetLater);
    u.end();
  }

  /**
   * Lists what dropping the last pair of `top` changes (`leaveNode` of an inline pair): the node
   * itself, and if it has no children (`detach`), for it and each hollow ancestor detached with
   * it, the parent (its first child) and the parents of every edge-table entry that the removal
   * of its edge may move (edge-table.ts `listMoves`).
   */
  private listDetach(top: NodeId, u: UnitLog): void {
    const nodes = this.nodes;
    u.add(top);
    if (nodes.hasChildren(top)) return; // it stays, hollow: only its worker set changes
    for (let id = top; ; ) {
      const up = nodes.parentOf(id) as NodeId;
      u.add(up);
      if (nodes.firstChild(up) !== id) this.edges.listMoves(id, u);
      if (!this.goesWith(up)) return;
      id = up;
    }
  }

  /** Whether `up`, the parent of `id` being detached, is detached too: hollow with no other child. */
  private goesWith(up: NodeId): boolean {
    const nodes = this.nodes;
    return up !== ROOT && nodes.w0(up) === NONE && nodes.childCount(up) === 1;
  }

  /** `dropPair`'s work, one unit (unit-log.ts). */
  private leaveNode(ref: PairRef, table: WorkerTable, forgetLater: boolean): void {
    const nodes = this.nodes;
    this.pairs--;
    if (ref >= 0) {
      const node = ref as number as NodeId;
      if (!forgetLater) table.removeRef(nodes.h0Lo[node]! | 0, nodes.h0Hi[node]! | 0, ref);
      nodes.setW0(node, NONE);
      this.detach(node);
      return;
    }
    const node = ~ref;
    const m = nodes.members;
    const set = -nodes.w0(node) - 2;
    const p = m.find(set, table.slot);
    // Out of the worker's lookup now even with `forgetLater`: once the worker leaves the set
    // its entry has no hash to read back.
    table.removeRef(m.mLo[p]! | 0, m.mHi[p]! | 0, ref);
    if (m.remove(set, p) === 1) {
      // One worker left: store it inline again and repoint its lookup.
      const off = m.offset(set);
      const w = m.mSlot[off]!;
      const hLo = m.mLo[off]!;
      const hHi = m.mHi[off]!;
      nodes.h0Lo[node] = hLo;
      nodes.h0Hi[node] = hHi;
      nodes.setW0(node, w);
      // Repointed before the set goes: `dissolve` may compact the sets, which reads lookups.
      this.tables[w]!.move(hLo | 0, hHi | 0, ~node as PairRef, node as PairRef);
      m.dissolve(set);
    }
  }

  /**
   * A node that lost its last worker. With children it stays, hollow (no workers): the blocks
   * below it that workers still hold keep their place, so a worker that stores this block again
   * holds its whole run at once. Without children it is detached and freed, and so is each
   * hollow ancestor left without children.
   *
   * Why not detach the subtree, as before (and as Dynamo clears an emptied node's children):
   * which node empties depends on which workers share the tree, so a worker's blocks below a
   * block it removed survived in one tree and vanished in a shard's, and the same events scored
   * differently through 0, 2 or 3 shards (3.3 % of the lookups of the random streams of
   * test/support/event-gen.ts, once scores stopped at a gap; 10.7 % before). Kept, a worker's
   * blocks depend on its own events only: no pair is ever dropped but by its worker's event, a
   * worker removal or the budget.
   */
  private detach(top: NodeId): void {
    const nodes = this.nodes;
    if (nodes.hasChildren(top)) {
      this.hollow++;
      return;
    }
    for (let id = top; ; ) {
      const up = nodes.parentOf(id) as NodeId;
      const more = this.goesWith(up);
      this.unlinkChild(id, up);
      this.uses.forget(id);
      nodes.freeNodeId(id);
      if (!more) return;
      this.hollow--; // `up`, freed next
      id = up;
    }
  }
}
