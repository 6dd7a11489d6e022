/**
 * A plain, Map-based reference model of kvindex's radix tree: one object per node, `Map`s for
 * children, workers and the per-worker lookup. It implements the same semantics as the fast
 * typed-array `RadixTree` (Dynamo's, section 3 of the Dynamo reference, with kvindex's
 * decisions: stores are validated before any mutation, a node left without workers is kept
 * while it has children and detached when it has none, and a worker scores its leading run of
 * blocks only) and is written to be obviously correct rather than
 * fast. Property tests run the same random event streams through both and compare; benchmarks
 * use it as the "Map-based reference tree" baseline.
 *
 * Invariant kept by every operation: `lookup[w][h] === node` exactly when
 * `node.workers[w] === h` and `node` is attached to the tree. Nothing walks the tree
 * recursively: chains of 65,536 blocks are real, so every traversal uses an explicit stack or
 * queue.
 */

import { KvIndexError, ErrorCode } from '../../src/errors.js';
import type { ApplyStatus, OverlapScores, RouterEvent, StoredBlock } from '../../src/protocol/types.js';

interface MapNode {
  /** Tokens hash under which the parent holds this node (0n for the root, never read). */
  tokensHash: bigint;
  parent: MapNode | null;
  children: Map<bigint, MapNode>;
  /** worker id -> that worker's external hash for this block. */
  workers: Map<bigint, bigint>;
  /** Times (of the injected clock) of recent `findMatches` visits, oldest first. */
  recentUses: number[];
}

function newNode(tokensHash: bigint, parent: MapNode | null): MapNode {
  return { tokensHash, parent, children: new Map(), workers: new Map(), recentUses: [] };
}

/** Options of `MapRadixTree`; `expirationMs` turns on the frequency trail of `findMatches`. */
export interface MapRadixTreeOptions {
  /** Window of the frequency trail, in the units of `now` (milliseconds by default). */
  expirationMs?: number;
  /** Clock read once per `findMatches`; defaults to `performance.now()`. */
  now?: () => number;
}

interface Internals {
  root: MapNode;
  lookup: Map<bigint, Map<bigint, MapNode>>;
}

// Filled in by MapRadixTree's static block: lets the module-level dumps below read the
// private state without widening the class's public API.
let internalsOf: (tree: MapRadixTree) => Internals;

/**
 * Map-based radix tree of KV blocks, reference model of `RadixTree` (same public API).
 * Routine inconsistencies are returned as `ApplyStatus` values, never thrown.
 */
export class MapRadixTree {
  readonly #root: MapNode = newNode(0n, null);
  /** worker id -> (external hash -> node). */
  readonly #lookup = new Map<bigint, Map<bigint, MapNode>>();
  readonly #expirationMs: number | null;
  readonly #now: () => number;
  #size = 0;
  #nodes = 1;

  static {
    internalsOf = (tree) => ({ root: tree.#root, lookup: tree.#lookup });
  }

  /** @throws KvIndexError `KVX_INVALID_OPTION` if `expirationMs` is negative or not finite. */
  constructor(options: MapRadixTreeOptions = {}) {
    const { expirationMs } = options;
    if (expirationMs !== undefined && !(Number.isFinite(expirationMs) && expirationMs >= 0)) {
      throw new KvIndexError(
        ErrorCode.InvalidOption,
        `expirationMs must be a finite number >= 0, got ${String(expirationMs)}`,
      );
    }
    this.#expirationMs = expirationMs ?? null;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Total number of (worker, node) pairs. */
  get size(): number {
    return this.#size;
  }

  /** Attached nodes, the root included (hollow ones too: no workers, kept for their children). */
  get nodeCount(): number {
    return this.#nodes;
  }

  /** Workers holding at least one block, ascending. */
  workers(): bigint[] {
    const out: bigint[] = [];
    for (const [w, m] of this.#lookup) if (m.size > 0) out.push(w);
    return out.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** Number of blocks held by `workerId` (0 for an unknown worker). */
  blockCount(workerId: bigint): number {
    return this.#lookup.get(workerId)?.size ?? 0;
  }

  /** Applies one event of one worker; see the module comment for the rules. */
  applyEvent(ev: RouterEvent): ApplyStatus {
    const data = ev.event.data;
    switch (data.type) {
      case 'stored':
        return this.#store(ev.workerId, data.parentHash, data.blocks);
      case 'removed':
        return this.#remove(ev.workerId, data.blockHashes);
      case 'cleared':
        this.clearWorker(ev.workerId);
        return 'ok';
    }
  }

  #store(w: bigint, parentHash: bigint | null, blocks: readonly StoredBlock[]): ApplyStatus {
    const lookup = this.#lookup.get(w);
    let start: MapNode;
    if (parentHash === null) {
      start = this.#root;
    } else {
      const p = lookup?.get(parentHash);
      if (p === undefined) return 'parent_block_not_found';
      start = p;
    }
    if (blocks.length === 0) return 'ok';

    // Pass 1: resolve targets (null = a node that does not exist yet) and validate.
    const targets: (MapNode | null)[] = [];
    const seen = new Set<bigint>();
    let cur: MapNode | null = start;
    for (const b of blocks) {
      if (seen.has(b.blockHash)) return 'invalid_block_sequence';
      seen.add(b.blockHash);
      const target: MapNode | null = cur === null ? null : (cur.children.get(b.tokensHash) ?? null);
      const held = lookup?.get(b.blockHash);
      if (held !== undefined && held !== target) return 'invalid_block_sequence';
      targets.push(target);
      cur = target;
    }

    // Pass 2: apply.
    let wl = lookup;
    if (wl === undefined) {
      wl = new Map();
      this.#lookup.set(w, wl);
    }
    let node = start;
    for (let i = 0; i < blocks.length; i++) {
      const b = blocks[i]!;
      let target = targets[i] ?? null;
      if (target === null) {
        target = newNode(b.tokensHash, node);
        node.children.set(b.tokensHash, target);
        this.#nodes++;
      }
      const old = target.workers.get(w);
      if (old === undefined) {
        this.#size++;
      } else if (old !== b.blockHash) {
        wl.delete(old);
      }
      target.workers.set(w, b.blockHash);
      wl.set(b.blockHash, target);
      node = target;
    }
    return 'ok';
  }

  #remove(w: bigint, hashes: readonly bigint[]): ApplyStatus {
    let status: ApplyStatus = 'ok';
    for (const h of hashes) {
      const node = this.#lookup.get(w)?.get(h);
      if (node === undefined) {
        status = 'block_not_found';
        continue;
      }
      this.#dropPair(w, h, node);
    }
    return status;
  }

  /** Removes worker `w` (external hash `h`) from `node`; detaches the node if left empty. */
  #dropPair(w: bigint, h: bigint, node: MapNode): void {
    node.workers.delete(w);
    this.#lookup.get(w)?.delete(h);
    this.#size--;
    if (node.workers.size === 0) this.#detach(node);
  }

  /**
   * A node left without workers: kept (hollow) while it has children, so the blocks workers
   * hold below it keep their place; else unlinked, with every hollow ancestor left childless.
   */
  #detach(node: MapNode): void {
    for (let n: MapNode = node; n.children.size === 0 && n.workers.size === 0 && n !== this.#root; ) {
      const up = n.parent!;
      up.children.delete(n.tokensHash);
      n.parent = null;
      this.#nodes--;
      n = up;
    }
  }

  /** Drops every block of `workerId`, keeping it known; unknown worker: no-op. */
  clearWorker(workerId: bigint): void {
    const wl = this.#lookup.get(workerId);
    if (wl === undefined) return;
    // Snapshot first: entries leave the map while it is walked.
    for (const [h, node] of [...wl]) {
      if (wl.get(h) === node) this.#dropPair(workerId, h, node);
    }
  }

  /** Drops every block of `workerId` and forgets the worker; unknown worker: no-op. */
  removeWorker(workerId: bigint): void {
    this.clearWorker(workerId);
    this.#lookup.delete(workerId);
  }

  /**
   * Walks the tree from the root along `hashes` (tokens hashes); a worker scores the number of
   * leading nodes of the path it holds without a gap (a block past a gap is no use to a prefix
   * cache). Stops at the first missing child, or with `earlyExit` after a node with exactly
   * one worker. Frequencies are recorded only when constructed with `expirationMs`.
   */
  findMatches(hashes: readonly bigint[] | BigUint64Array, earlyExit = false): OverlapScores {
    const scores = new Map<bigint, number>();
    const frequencies: number[] = [];
    const exp = this.#expirationMs;
    const now = exp === null ? 0 : this.#now();
    let cur = this.#root;
    for (let i = 0; i < hashes.length; i++) {
      const child = cur.children.get(hashes[i]!);
      if (child === undefined) break;
      // Only a worker that held every node before this one scores it: its leading run.
      for (const w of child.workers.keys()) if ((scores.get(w) ?? 0) === i) scores.set(w, i + 1);
      if (exp !== null) {
        const uses = child.recentUses;
        while (uses.length > 0 && now - uses[0]! > exp) uses.shift();
        if (uses.length > 0) frequencies.push(uses.length);
        uses.push(now);
      }
      if (earlyExit && child.workers.size === 1) break;
      cur = child;
    }
    return { scores, frequencies };
  }

  /**
   * The tree as Stored events that rebuild it: per worker (ascending), one event per maximal
   * chain of nodes holding the worker. A chain starting at a root child, or at a node whose
   * parent does not hold the worker (an orphan, re-rooted like Dynamo does), has
   * `parentHash: null`; a chain branching off another one names the worker's hash on the
   * branching node. Parents' events come first; event ids count from 0.
   */
  dumpEvents(): RouterEvent[] {
    const out: RouterEvent[] = [];
    let eventId = 0n;
    for (const w of this.workers()) {
      const wl = this.#lookup.get(w)!;
      const queue: { start: MapNode; parentHash: bigint | null }[] = [];
      for (const node of wl.values()) {
        const p = node.parent;
        if (p === this.#root || p === null || !p.workers.has(w)) {
          queue.push({ start: node, parentHash: null });
        }
      }
      for (let qi = 0; qi < queue.length; qi++) {
        const { start, parentHash } = queue[qi]!;
        const blocks: StoredBlock[] = [];
        let node: MapNode | null = start;
        while (node !== null) {
          const h = node.workers.get(w)!;
          blocks.push({ blockHash: h, tokensHash: node.tokensHash });
          let next: MapNode | null = null;
          for (const c of node.children.values()) {
            if (!c.workers.has(w)) continue;
            if (next === null) next = c;
            else queue.push({ start: c, parentHash: h });
          }
          node = next;
        }
        out.push({
          workerId: w,
          event: { eventId: eventId++, data: { type: 'stored', parentHash, blocks } },
        });
      }
    }
    return out;
  }
}

/**
 * A JavaScript port of the algorithm of Dynamo's dump before its PR #3370, on this Map tree,
 * kept as a quadratic benchmark baseline (it is not Dynamo's Rust code and not its speed): BFS
 * over the tree, one single-block Stored per (node, worker), each external hash found by
 * scanning the worker's whole lookup map for the node. The parent hash is the worker's own hash on the tree parent
 * (found by the same scan when the parent was visited), else null. O(pairs x blocks per worker).
 */
export function dumpByScanning(tree: MapRadixTree): RouterEvent[] {
  const { root, lookup } = internalsOf(tree);
  const out: RouterEvent[] = [];
  let eventId = 0n;
  const queue: { node: MapNode; parentHashes: Map<bigint, bigint> }[] = [];
  for (const c of root.children.values()) queue.push({ node: c, parentHashes: new Map() });
  for (let qi = 0; qi < queue.length; qi++) {
    const { node, parentHashes } = queue[qi]!;
    const mine = new Map<bigint, bigint>();
    for (const w of node.workers.keys()) {
      let found: bigint | null = null;
      for (const [h, n] of lookup.get(w) ?? []) {
        if (n === node) {
          found = h;
          break;
        }
      }
      if (found === null) continue;
      mine.set(w, found);
      out.push({
        workerId: w,
        event: {
          eventId: eventId++,
          data: {
            type: 'stored',
            parentHash: parentHashes.get(w) ?? null,
            blocks: [{ blockHash: found, tokensHash: node.tokensHash }],
          },
        },
      });
    }
    for (const c of node.children.values()) queue.push({ node: c, parentHashes: mine });
  }
  return out;
}

/**
 * Number of (worker, node) pairs whose node is not a root child and whose tree parent does not
 * hold the worker ("orphans", left by partial removes). A dump re-roots them, so replaying it
 * rebuilds the tree exactly only when this is 0. Test helper.
 */
export function countOrphans(tree: MapRadixTree): number {
  const { root, lookup } = internalsOf(tree);
  let n = 0;
  for (const [w, wl] of lookup) {
    for (const node of wl.values()) {
      const p = node.parent;
      if (p !== root && p !== null && !p.workers.has(w)) n++;
    }
  }
  return n;
}

/**
 * A JavaScript port of the algorithm of Dynamo's dump after its PR #3370, on this Map tree (not
 * Dynamo's Rust code, which dumps several times faster): BFS, one single-block Stored event per
 * (node, worker), the external hash read from the node's own worker map and the parent hash
 * from a per-child copy of the parent's worker map. The baseline of the tree bench's dump.
 */
export function dumpPerPair(tree: MapRadixTree): RouterEvent[] {
  const { root } = internalsOf(tree);
  const out: RouterEvent[] = [];
  let eventId = 0n;
  const queue: { node: MapNode; parentHashes: Map<bigint, bigint> }[] = [];
  for (const c of root.children.values()) queue.push({ node: c, parentHashes: new Map() });
  for (let qi = 0; qi < queue.length; qi++) {
    const { node, parentHashes } = queue[qi]!;
    for (const [w, hash] of node.workers) {
      out.push({
        workerId: w,
        event: {
          eventId: eventId++,
          data: { type: 'stored', parentHash: parentHashes.get(w) ?? null, blocks: [{ blockHash: hash, tokensHash: node.tokensHash }] },
        },
      });
    }
    for (const c of node.children.values()) queue.push({ node: c, parentHashes: new Map(node.workers) });
  }
  return out;
}
