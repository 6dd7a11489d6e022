/**
 * Dumping the tree as Stored events, linear in its size thanks to the reverse lookup.
 *
 * Every (worker, node) pair whose node's parent is the root or does not hold the worker starts a
 * chain; the chain follows one child that holds the worker, and every other
 * such child starts a new chain whose parent hash is the worker's own hash on the branching node.
 * One multi-block Stored event per chain, so a prefix-closed cache of k blocks costs one event
 * per branch instead of Dynamo's one event per (node, worker). Chains of a parent are always
 * written before chains that hang below them, so replaying the dump in order rebuilds the tree.
 *
 * A worker on a node whose parent it does not hold (possible after it removed the parent but not
 * the child) has no hash of its own for that parent: like Dynamo, such a chain is written with
 * `parent_hash: null` and is re-rooted on replay. It is the only inexact case.
 */
import type { RouterEvent, StoredBlock } from '../protocol/types.js';
import { u64FromHalves } from '../protocol/u64-text.js';
import { NONE, ROOT } from './node-store.js';
import type { RadixTree } from './radix-tree.js';

/** Receives a dump: Stored events as begin / blocks / end, u64 values as u32 halves. */
export interface DumpSink {
  beginStored(workerLo: number, workerHi: number, hasParent: boolean, parentLo: number, parentHi: number): void;
  block(blockLo: number, blockHi: number, tokensLo: number, tokensHi: number): void;
  endStored(): void;
}

/** The u64 of (lo, hi) halves (the shared typed-array split of u64-text.ts: ~7 ns, no shifts). */
const u64 = (lo: number, hi: number): bigint => u64FromHalves(hi, lo);

/** A sink that builds `RouterEvent` objects (for `dumpEvents`; snapshots use the byte writer). */
export class EventCollector implements DumpSink {
  readonly events: RouterEvent[] = [];
  private workerId = 0n;
  private parent: bigint | null = null;
  private blocks: StoredBlock[] = [];

  beginStored(workerLo: number, workerHi: number, hasParent: boolean, parentLo: number, parentHi: number): void {
    this.workerId = u64(workerLo, workerHi);
    this.parent = hasParent ? u64(parentLo, parentHi) : null;
    this.blocks = [];
  }

  block(blockLo: number, blockHi: number, tokensLo: number, tokensHi: number): void {
    this.blocks.push({ blockHash: u64(blockLo, blockHi), tokensHash: u64(tokensLo, tokensHi) });
  }

  endStored(): void {
    this.events.push({
      workerId: this.workerId,
      event: {
        eventId: BigInt(this.events.length),
        data: { type: 'stored', parentHash: this.parent, blocks: this.blocks },
      },
    });
  }
}

/**
 * The children that are not first children (the edge table's, 1 % of the nodes on the
 * conversation tree), sorted by parent: the edges of parent p are `kids[i]` for the i where
 * `kidParent[i] === p` (`firstEdge`). Not a counting sort over node ids: an array of 4 bytes a
 * node is fresh memory to fault in, 7 % of a 1M-pair dump. A function of its own, so that
 * `dumpTree`'s locals stay out of the comparator's closure (V8 keeps captured locals in a
 * context object, and the scan reads `parent` a million times).
 */
function edgesByParent(slots: Int32Array, parent: Int32Array): { kids: Int32Array; kidParent: Int32Array } {
  let n = 0;
  for (let i = 0; i < slots.length; i++) if (slots[i] !== 0) n++;
  const kids = new Int32Array(n);
  for (let i = 0, k = 0; i < slots.length; i++) {
    const v = slots[i]!;
    if (v !== 0) kids[k++] = (v & 0x0fffffff) - 1; // slots: child + 1 and a tag (edge-table.ts EDGE_ID)
  }
  const kidParent = new Int32Array(n);
  if (n >= 1 << 24) {
    kids.sort((a, b) => parent[a]! - parent[b]!);
  } else {
    // Sorted as doubles `parent * 2^24 + index` (exact below 2^53) without a comparator: a
    // JS comparator measured 1.5-4 ms for the 8,431 edges of a 1M-pair tree, 2-4 % of its dump.
    const keys = new Float64Array(n);
    for (let i = 0; i < n; i++) keys[i] = parent[kids[i]!]! * 16777216 + i;
    keys.sort();
    const byIndex = kids.slice();
    for (let i = 0; i < n; i++) kids[i] = byIndex[keys[i]! % 16777216]!;
  }
  for (let i = 0; i < n; i++) kidParent[i] = parent[kids[i]!]!;
  return { kids, kidParent };
}

/**
 * Members of a node's set scanned before asking the set (member-sets.ts `find`: a longer scan, or
 * its member table, O(1)) instead.
 * Each worker's chain down a prompt that k workers share checks the worker on every node of it,
 * so scanning whole worker lists made a dump O(k^2) per shared node: k workers on one 64-block
 * prompt, in-thread, 1,000 -> 4,000 workers took 404 -> 4,746 ms (11.7x for 4x the pairs;
 * measured on the linked lists before the member sets), and the 65.5M-pair fleet (4,000
 * engines on shared system prompts) dumped in 144-202 s. Most sets are small (two or three
 * workers), where a contiguous scan is cheaper than a hash probe.
 */
const SET_STEPS = 8;

/**
 * Edges past which a node's children are grouped by worker for the dump (`branchFan`): below
 * it each worker's chain checks every child, as before. Checking them all made a dump O(k x
 * children) at a node that k engines' sessions continue (k workers on a 16-block prompt, 8
 * sessions each: 1,000 -> 2,000 workers 114 -> 659 ms).
 */
const FAN_EDGES = 64;

/** The first i with `kidParent[i] >= p` (binary search). */
function firstEdge(kidParent: Int32Array, p: number): number {
  let lo = 0;
  let hi = kidParent.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (kidParent[mid]! < p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Writes every (worker, node) pair of the tree into the sink exactly once. */
export function dumpTree(tree: RadixTree, sink: DumpSink): void {
  const nodes = tree.nodes;
  const { parent, h0Lo, h0Hi } = nodes;
  // Member sets (member-sets.ts): a set's record (5 words, `SET_WORDS`, written as a literal as
  // the node records' offsets are) gives its members' range in the pool: [3] offset, [0] count.
  const { sets, mSlot, mLo, mHi } = nodes.members;
  const members = nodes.members;
  const rec = nodes.node;
  // Children have no list (node-store.ts): a node's children are its first child, if any, and
  // its edges (`edgesByParent`).
  const { kids, kidParent } = edgesByParent(tree.edges.slotsView, parent);
  const edgeCount = kids.length;
  // Node record fields read inline with literal offsets (node-store.ts): through small arrow
  // functions, or with named constants, a dump of the conversation tree measured 1.3-2x slower.
  // The worker's hash on a node is returned through these two, to avoid an allocation per pair.
  let hashLo = 0;
  let hashHi = 0;
  const holds = (node: number, slot: number): boolean => {
    const w = rec[node * 4 + 3]!;
    if (w === slot) {
      hashLo = h0Lo[node]!;
      hashHi = h0Hi[node]!;
      return true;
    }
    if (w >= NONE) return false;
    const set = -w - 2;
    const r = set * 5;
    const start = sets[r + 3]!;
    const n = sets[r]!;
    let p = -1;
    if (n <= SET_STEPS) {
      for (let q = start, end = start + n; q < end; q++) {
        if (mSlot[q] === slot) {
          p = q;
          break;
        }
      }
    } else {
      p = members.find(set, slot);
    }
    if (p < 0) return false;
    hashLo = mLo[p]!;
    hashHi = mHi[p]!;
    return true;
  };

  // `holds` without reading the hash: the scan below only asks whether a parent holds the
  // worker, and by then the chains have pulled that parent's hash arrays through the cache
  // long ago; skipping them keeps the scan to two streams (node records, parent).
  const has = (node: number, slot: number): boolean => {
    const w = rec[node * 4 + 3]!;
    if (w === slot) return true;
    if (w >= NONE) return false;
    const set = -w - 2;
    const r = set * 5;
    const n = sets[r]!;
    if (n > SET_STEPS) return members.find(set, slot) >= 0;
    for (let q = sets[r + 3]!, end = q + n; q < end; q++) if (mSlot[q] === slot) return true;
    return false;
  };

  const slotLo: number[] = [];
  const slotHi: number[] = [];
  for (let s = 0; s < tree.slotIds.length; s++) {
    const id = tree.slotIds[s] ?? 0n;
    slotLo.push(Number(id & 0xffffffffn));
    slotHi.push(Number(id >> 32n));
  }

  // Pending chain starts: (node, hasParent, parentLo, parentHi, hashLo, hashHi) sextuples; a
  // node's own hash travels with it, found when its parent's children were checked, so no pair
  // is looked up twice.
  const stack: number[] = [];
  // `branch`'s choice of the child that continues the chain, and its hash.
  let branchLo = 0;
  let branchHi = 0;
  /**
   * The children of `node` (its first child `first`, or none, and its edges) that the worker
   * holds: the first continues the chain (returned, its hash in branchLo/Hi), every other one
   * starts a chain of its own, pushed on the stack with the worker's hash on `node` (lo, hi).
   */
  const branch = (node: number, first: number, slot: number, lo: number, hi: number): number => {
    const j0 = firstEdge(kidParent, node);
    if (j0 + FAN_EDGES < edgeCount && kidParent[j0 + FAN_EDGES] === node) return branchFan(node, first, slot, lo, hi, j0);
    let next = NONE;
    let c = first;
    for (let j = j0 - 1; ; ) {
      if (c !== 0x0fffffff && holds(c, slot)) {
        if (next === NONE) {
          next = c;
          branchLo = hashLo;
          branchHi = hashHi;
        } else {
          stack.push(c, 1, lo, hi, hashLo, hashHi);
        }
      }
      if (++j >= edgeCount || kidParent[j] !== node) return next;
      c = kids[j]!;
    }
  };
  // A node with many children (the end of a system prompt that thousands of engines' sessions
  // continue): its children are grouped by worker once (`fan`, for the last such node), so
  // that each worker's chain through it visits only its own children, not all of them.
  let fanNode = NONE;
  let fanStart = new Int32Array(0); // per slot: its entries are fanStart[s]..fanStart[s + 1]
  let fanKid = new Int32Array(0);
  let fanLo = new Int32Array(0);
  let fanHi = new Int32Array(0);
  const groupFan = (node: number, first: number, j0: number): void => {
    const slots = slotLo.length;
    const start = new Int32Array(slots + 1);
    // Two passes over the children's workers, in the order `branch` visits them (first child,
    // then the edges): count per slot, then place, so each slot's children keep that order.
    const visit = (place: boolean): void => {
      let c = first;
      for (let j = j0 - 1; ; ) {
        if (c !== 0x0fffffff) {
          const w = rec[c * 4 + 3]!;
          if (w >= 0) {
            if (place) put(w, c, h0Lo[c]!, h0Hi[c]!);
            else start[w + 1]!++;
          } else if (w < NONE) {
            const r = (-w - 2) * 5;
            for (let p = sets[r + 3]!, end = p + sets[r]!; p < end; p++) {
              if (place) put(mSlot[p]!, c, mLo[p]!, mHi[p]!);
              else start[mSlot[p]! + 1]!++;
            }
          }
        }
        if (++j >= edgeCount || kidParent[j] !== node) return;
        c = kids[j]!;
      }
    };
    const at = new Int32Array(slots);
    const put = (s: number, c: number, lo: number, hi: number): void => {
      const k = at[s]!++;
      fanKid[k] = c;
      fanLo[k] = lo;
      fanHi[k] = hi;
    };
    visit(false);
    for (let s = 0; s < slots; s++) start[s + 1] = start[s + 1]! + start[s]!;
    const n = start[slots]!;
    fanKid = new Int32Array(n);
    fanLo = new Int32Array(n);
    fanHi = new Int32Array(n);
    at.set(start.subarray(0, slots));
    visit(true);
    fanStart = start;
    fanNode = node;
  };
  const branchFan = (node: number, first: number, slot: number, lo: number, hi: number, j0: number): number => {
    if (fanNode !== node) groupFan(node, first, j0);
    let next = NONE;
    for (let k = fanStart[slot]!, end = fanStart[slot + 1]!; k < end; k++) {
      if (next === NONE) {
        next = fanKid[k]!;
        branchLo = fanLo[k]! >>> 0;
        branchHi = fanHi[k]! >>> 0;
      } else {
        stack.push(fanKid[k]!, 1, lo, hi, fanLo[k]! >>> 0, fanHi[k]! >>> 0);
      }
    }
    return next;
  };
  const chain = (head: number, slot: number, headLo: number, headHi: number): void => {
    const wLo = slotLo[slot]!;
    const wHi = slotHi[slot]!;
    stack.push(head, 0, 0, 0, headLo, headHi);
    while (stack.length > 0) {
      let hi = stack.pop()!;
      let lo = stack.pop()!;
      const pHiV = stack.pop()!;
      const pLoV = stack.pop()!;
      const hasParent = stack.pop()! === 1;
      let node = stack.pop()!;
      sink.beginStored(wLo, wHi, hasParent, pLoV, pHiV);
      for (;;) {
        sink.block(lo, hi, rec[node * 4]! >>> 0, rec[node * 4 + 1]! >>> 0);
        let next = NONE;
        let nextLo = 0;
        let nextHi = 0;
        // One child, the first (99.9 % of nodes here: node-store.ts's child class), read
        // inline; a node with more goes to `branch`, a leaf to neither.
        const cw = rec[node * 4 + 2]!;
        if (cw >>> 28 === 1 && (cw & 0x0fffffff) !== 0x0fffffff) {
          if (holds(cw & 0x0fffffff, slot)) {
            next = cw & 0x0fffffff;
            nextLo = hashLo;
            nextHi = hashHi;
          }
        } else if (cw >>> 28 !== 0) {
          next = branch(node, cw & 0x0fffffff, slot, lo, hi);
          nextLo = branchLo;
          nextHi = branchHi;
        }
        if (next === NONE) break;
        node = next;
        lo = nextLo;
        hi = nextHi;
      }
      sink.endStored();
    }
  };

  // Chain heads are found by scanning the node arrays in id order, which reads memory
  // sequentially (stores allocate a chain's nodes in order, so a parent is usually the previous
  // id); walking each worker's hash table instead visited nodes in random order and measured
  // ~2x slower on a tree of a million pairs. Event order across workers does not matter:
  // only a worker's own parent chain must come first, and `chain` writes branches after it.
  // For a node with several workers the parent's workers are stamped once (`parentMark`), so
  // finding the node's chain heads costs O(workers), not O(workers^2) list walks.
  const parentMark = new Int32Array(slotLo.length).fill(-1);
  const top = nodes.nodeTop;
  for (let node = 1; node < top; node++) {
    const w = rec[node * 4 + 3]!;
    if (w === NONE) continue; // free id
    const up = parent[node]!;
    if (w >= 0) {
      if (up === ROOT || !has(up, w)) chain(node, w, h0Lo[node]!, h0Hi[node]!);
      continue;
    }
    if (up !== ROOT) {
      const uw = rec[up * 4 + 3]!;
      if (uw >= 0) parentMark[uw] = node;
      else if (uw < NONE) {
        const ru = (-uw - 2) * 5;
        for (let p = sets[ru + 3]!, end = p + sets[ru]!; p < end; p++) parentMark[mSlot[p]!] = node;
      }
    }
    const r = (-w - 2) * 5;
    for (let p = sets[r + 3]!, end = p + sets[r]!; p < end; p++) {
      const slot = mSlot[p]!;
      if (up === ROOT || parentMark[slot] !== node) chain(node, slot, mLo[p]!, mHi[p]!);
    }
  }
}
