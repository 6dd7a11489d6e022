/**
 * The lookup walk over a tree's arrays, shared by `RadixTree.findMatchesInto` (in-thread) and
 * by lookups that read a shard's tree from shared memory on the calling thread
 * (src/shard/main/tree-reader.ts): one implementation of the probe and the scoring.
 *
 * An active-set walk: a worker's score is the number of leading nodes of the path it holds
 * without a gap (its run from the first node; see `enter` on why). The walk keeps the current
 * node's worker set and touches workers only where the set changes: a node whose
 * count and 64-bit fingerprint (XOR of the workers' random slot keys, node-store.ts) equal the
 * previous node's holds the same workers (a different set with the same count and fingerprint
 * has probability 2^-64), so a path that thousands of workers share costs O(1) per node instead
 * of O(workers) per node (issue "fleet scale": 1.2 ms per lookup at 4,096 workers before).
 * Where the set changes, the new node's workers that continue a run are stamped and runs of
 * workers that left are closed; a worker that arrives after the first node opens no run. When no
 * run goes on, the walk stops: nobody can score deeper. At the end, the open runs are closed.
 *
 * Bulk listing: when the path starts on a node whose member set keeps its members' id words
 * (held by many workers, a shared system prompt: member-sets.ts), its workers are not visited at all while its set
 * lasts. If it lasts to the end, or gives way to at most `FEW` workers (a conversation's own
 * blocks), the result gets all members with one copy of their id words and one fill of their
 * score (`emit`), and only the few are visited. Any other change visits the set as above.
 * Whole-chain lookups at 4,096 workers sharing a 48-block prompt: 50 us -> ~2 us (p50).
 */
import { findChild } from './edge-table.js';
import type { MatchResult } from './match-result.js';

/** The arrays a lookup reads (views of the tree's own, or of shared memory). */
export interface LookupArrays {
  parent: Int32Array;
  /** Node records, 4 words (node-store.ts: tokens hash halves, child word, worker set word). */
  node: Int32Array;
  /**
   * Member sets (member-sets.ts), 5 words each (`SET_WORDS`, literal offsets below): [0] count,
   * [1] [2] fingerprint halves, [3] members' offset in `mSlot`, [4] id words' offset in `mIds`
   * or NONE.
   */
  sets: Int32Array;
  /** Worker slot per pool position. */
  mSlot: Int32Array;
  keyLo: Uint32Array;
  keyHi: Uint32Array;
  edges: Int32Array;
  edgeMask: number;
  /** Root keys: counts of the root's children by key bits (edge-table.ts `ROOT_SLOTS`); empty: none. */
  roots: Int32Array;
  /** Id words of the members of large sets (2 per position of their id range). */
  mIds: Uint32Array;
  /** Worker id halves per slot. */
  slotLo: Uint32Array;
  slotHi: Uint32Array;
}

const NONE = -1;
/**
 * A path that starts on a node whose set keeps id words keeps that node's workers unvisited
 * while its set lasts; when it shrinks to at most this many workers, the walk finds each of them
 * among the id words (a scan: ~1 us per 4,096 members) and goes on with them alone. Larger
 * changes visit the set as usual.
 */
const FEW = 8;

/** A LookupArrays of empty arrays, for holders that fill it in place. */
export function emptyLookupArrays(): LookupArrays {
  const i = (): Int32Array => new Int32Array(0);
  const u = (): Uint32Array => new Uint32Array(0);
  return {
    parent: i(), node: i(), sets: i(), mSlot: i(),
    keyLo: u(), keyHi: u(), edges: i(), edgeMask: 0, roots: i(),
    mIds: u(), slotLo: u(), slotHi: u(),
  };
}
/** Stamps restart (and the stamp array is cleared) before they could overflow an int32. */
const STAMP_LIMIT = 1 << 30;

/** Per-slot scratch of a walker (reused across lookups; grown to the slot count). */
export class WalkScratch {
  /** A lookup's scores, by slot; zero outside a lookup. */
  score = new Int32Array(16);
  /** Slots scored by the lookup, in order. */
  touched = new Int32Array(16);
  /** Stamp of the last node set a slot was seen in. */
  private mark = new Int32Array(16);
  /** Depth where a slot's current run started. */
  private runStart = new Int32Array(16);
  private stamp = 0;
  /**
   * After a walk: the member set listed in bulk (the offset of its id words, NONE for none, and
   * of its members' slots), its size, its members' score, and the positions in it of members
   * listed among the visited instead.
   */
  bulkOff = NONE;
  bulkMembers = NONE;
  bulkCount = 0;
  bulkScore = 0;
  /**
   * Whether the last guarded walk met a node its guard lists (a unit of writing in progress
   * changes it: unit-log.ts); its result is then to be dropped.
   */
  aborted = false;
  private readonly exempt = new Int32Array(FEW);
  private exemptCount = 0;
  /** The last id-word view copied from, kept: a lookup allocates nothing in steady state. */
  private view: Uint32Array = new Uint32Array(0);
  private viewOf: Uint32Array | null = null;
  private viewOff = -1;

  /** Makes room for `slots` worker slots. */
  ensure(slots: number): void {
    if (this.score.length >= slots) return;
    const n = Math.max(slots, this.score.length * 2);
    this.score = new Int32Array(n);
    this.touched = new Int32Array(n);
    const mark = new Int32Array(n);
    mark.set(this.mark);
    this.mark = mark;
    this.runStart = new Int32Array(n);
  }

  /**
   * Walks `n` tokens hashes (`words[off + 2i ..]` as (lo, hi)) from the root and adds each
   * worker's score to `score[slot]`, listing each scored slot once in `touched`; returns how
   * many it listed. Stops at the first missing block, or with `earlyExit` after a node held by
   * exactly one worker.
   *
   * With `guardN` > 0 (a read without the lock, past a descheduled writer: unit-log.ts) it
   * stops with `aborted` set on reaching a node listed in `guard[0, guardN)`. Without the lock
   * the arrays may also change under the walk if the writer resumes (the caller then drops the
   * result): every loop over a list is bounded by the pair count, so the walk ends regardless.
   */
  walk(a: LookupArrays, words: Uint32Array, off: number, n: number, earlyExit: boolean, guard: Int32Array | null = null, guardN = 0): number {
    const { parent, node, sets, mSlot, keyLo, keyHi, edges, edgeMask, roots } = a;
    const rootMask = roots.length - 1; // -1: no root keys
    this.aborted = guardN > 0 && listed(guard!, guardN, 0);
    if (this.aborted) return 0;
    // Member loops end at the pool's end too: a set read without the lock may be changing.
    const most = mSlot.length;
    if (this.stamp > STAMP_LIMIT) {
      this.mark.fill(0);
      this.stamp = 0;
    }
    const base = ++this.stamp;
    const score = this.score;
    const touched = this.touched;
    const mark = this.mark;
    const runStart = this.runStart;
    let count = 0;
    let cur = 0;
    let prev = NONE; // the previous node, whose worker set is active
    let prevStamp = 0;
    let activeCnt = 0;
    let activeLo = 0;
    let activeHi = 0;
    let depth = 0;
    // The first node's member set, while its workers stay unvisited (see FEW), and the depth
    // where its set gave way to a few of its workers (-1 while it lasts).
    let bulk = NONE;
    let bulkHead = NONE; // the bulk set's members' offset
    let bulkCnt = 0;
    let bulkEnd = -1;
    this.exemptCount = 0;
    for (let i = 0; i < n; i++) {
      // As int32, the form of the node records' halves.
      const lo = words[off + 2 * i]! | 0;
      const hi = words[off + 2 * i + 1]! | 0;
      // Most nodes have one child: compare the first child before probing the edge table
      // (lookup p99 on the conversation tree measured 22 -> 14 us; edge-table.ts `findChild`,
      // inlined with the root keys' check). Record offsets as literals (node-store.ts: a named
      // constant is a load in V8).
      const cw = node[cur * 4 + 2]!;
      let child = cw & 0x0fffffff;
      if (child === 0x0fffffff || node[child * 4] !== lo || node[child * 4 + 1] !== hi) {
        // No child but the first, or none at all: no probe (the child class, node-store.ts).
        const kids = cw >>> 28;
        if (kids === 0 || (kids === 1 && child !== 0x0fffffff)) break;
        // No root child has a key with these low bits: no probe (edge-table.ts ROOT_SLOTS).
        if (cur === 0 && rootMask >= 0 && roots[lo & rootMask] === 0) break;
        // The probe of edge-table.ts `findEdge` (hash: `edgeHash`), inlined: a call per probe cost ~0.5 us of
        // the conversation tree's p99 lookup (42 probes on its longest paths).
        let h = Math.imul(lo ^ Math.imul(cur, 0x9e3779b1), 0x85ebca6b) ^ Math.imul(hi, 0xc2b2ae35);
        h ^= h >>> 15;
        h = Math.imul(h, 0x27d4eb2f) ^ (h >>> 13);
        const tag = h >>> 29; // edge-table.ts `EDGE_ID`: the slot's tag bits
        let e = h & edgeMask;
        child = -1;
        for (;;) {
          const v = edges[e]!;
          if (v === 0) break;
          if (v >>> 28 === tag) {
            const ce = (v & 0x0fffffff) - 1;
            const re = ce * 4;
            if (node[re] === lo && node[re + 1] === hi && parent[ce] === cur) {
              child = ce;
              break;
            }
          }
          e = (e + 1) & edgeMask;
        }
        if (child < 0) break;
      }
      if (guardN > 0 && listed(guard!, guardN, child)) {
        this.aborted = true;
        break;
      }
      const s = node[child * 4 + 3]!;
      // A hollow node (no workers, kept for the blocks below it: radix-tree.ts `detach`): every
      // run ends before it.
      if (s === NONE) break;
      depth = i + 1;
      let cnt: number;
      let fLo: number;
      let fHi: number;
      if (s >= 0) {
        cnt = 1;
        fLo = keyLo[s]! | 0; // int32, as the lists' fingerprints
        fHi = keyHi[s]! | 0;
      } else {
        const r = (-s - 2) * 5;
        cnt = sets[r]!;
        fLo = sets[r + 1]!;
        fHi = sets[r + 2]!;
      }
      if (prev === NONE || cnt !== activeCnt || fLo !== activeLo || fHi !== activeHi) {
        const stamp = ++this.stamp;
        let alive = cnt; // workers whose run goes on through this node
        if (prev === NONE && s < 0 && sets[(-s - 2) * 5 + 4]! >= 0) {
          // The path starts on a node held by many workers: they stay unvisited, listed in bulk.
          bulkHead = sets[(-s - 2) * 5 + 3]!;
          bulk = sets[(-s - 2) * 5 + 4]!;
          bulkCnt = cnt;
        } else if (bulk !== NONE && bulkEnd < 0 && cnt < bulkCnt && cnt <= FEW) {
          // The bulk set gives way to a few workers: those found among its id words continue
          // their run from depth 1 (and leave the bulk listing); the others never scored.
          bulkEnd = depth;
          if (s >= 0) {
            count = this.fromBulk(a, bulk, bulkCnt, s, count, stamp);
          } else {
            const m0 = sets[(-s - 2) * 5 + 3]!;
            for (let p = m0, end = Math.min(m0 + cnt, most); p < end; p++) count = this.fromBulk(a, bulk, bulkCnt, mSlot[p]!, count, stamp);
          }
          alive = this.exemptCount;
        } else {
          if (bulk !== NONE) {
            count = this.visitBulk(a, bulkHead, bulkCnt, bulkEnd, count, base, prevStamp);
            bulk = NONE;
            this.exemptCount = 0;
          }
          // The set changes: stamp the new node's workers that continue a run (on the first
          // node, all of them open one), then close the runs of the previous node's workers
          // that left.
          alive = 0;
          if (s >= 0) {
            count = enter(s, mark, runStart, score, touched, count, prevStamp, stamp);
            if (mark[s] === stamp) alive = 1;
          } else {
            const m0 = sets[(-s - 2) * 5 + 3]!;
            for (let p = m0, end = Math.min(m0 + cnt, most); p < end; p++) {
              const w = mSlot[p]!;
              count = enter(w, mark, runStart, score, touched, count, prevStamp, stamp);
              if (mark[w] === stamp) alive++;
            }
          }
          if (prev !== NONE) {
            const ps = node[prev * 4 + 3]!;
            if (ps >= 0) {
              if (mark[ps] === prevStamp) score[ps] = score[ps]! + depth - runStart[ps]!;
            } else {
              const rp = (-ps - 2) * 5;
              const m0 = sets[rp + 3]!;
              for (let p = m0, end = Math.min(m0 + sets[rp]!, most); p < end; p++) {
                const w = mSlot[p]!;
                if (mark[w] === prevStamp) score[w] = score[w]! + depth - runStart[w]!;
              }
            }
          }
        }
        prevStamp = stamp;
        activeCnt = cnt;
        activeLo = fLo;
        activeHi = fHi;
        prev = child;
        // No run goes on (the node is held only by workers that missed a node before it): no
        // one can score deeper. Reached only when a worker holds a block without its parent.
        if (alive === 0) break;
      }
      prev = child;
      if (earlyExit && cnt === 1) break;
      cur = child;
    }
    this.bulkOff = bulk;
    this.bulkMembers = bulkHead;
    this.bulkCount = bulkCnt;
    if (bulk !== NONE && bulkEnd < 0) {
      // The bulk set lasted to the end: every member held the whole path.
      this.bulkScore = depth;
      return count;
    }
    if (bulk !== NONE) this.bulkScore = bulkEnd - 1;
    // Close the runs still open at the last node (its workers stamped with the active stamp).
    if (prev !== NONE) {
      const ps = node[prev * 4 + 3]!;
      if (ps >= 0) {
        if (mark[ps] === prevStamp) score[ps] = score[ps]! + depth + 1 - runStart[ps]!;
      } else {
        const rp = (-ps - 2) * 5;
        const m0 = sets[rp + 3]!;
        for (let p = m0, end = Math.min(m0 + sets[rp]!, most); p < end; p++) {
          const w = mSlot[p]!;
          if (mark[w] === prevStamp) score[w] = score[w]! + depth + 1 - runStart[w]!;
        }
      }
    }
    return count;
  }

  /**
   * A worker of the few that follow the bulk set: continuing its run from depth 1 if it is a
   * member (counted in `exemptCount`), else it never scores (it missed the first node).
   */
  private fromBulk(a: LookupArrays, bulk: number, bulkCnt: number, w: number, count: number, stamp: number): number {
    const pos = findMember(a.mIds, bulk, bulkCnt, a.slotLo[w]!, a.slotHi[w]!);
    if (pos < 0) return count;
    this.touched[count] = w;
    this.score[w] = 0;
    this.mark[w] = stamp;
    this.exempt[this.exemptCount++] = pos;
    this.runStart[w] = 1;
    return count + 1;
  }

  /**
   * Visits the bulk set's workers after all, when the path changes in a way the bulk listing
   * cannot follow: while the set lasts (`bulkEnd` -1) they join the active set (runs from depth
   * 1, stamped `active`); after it gave way, those not already followed get their run's score.
   */
  private visitBulk(a: LookupArrays, head: number, cnt: number, bulkEnd: number, count: number, base: number, active: number): number {
    const mSlot = a.mSlot;
    const { touched, score, mark, runStart } = this;
    for (let p = head, end = Math.min(head + cnt, mSlot.length); p < end; p++) {
      const w = mSlot[p]!;
      if (mark[w]! >= base) continue; // one of the few that followed it, already listed
      touched[count++] = w;
      if (bulkEnd < 0) {
        score[w] = 0;
        runStart[w] = 1;
        mark[w] = active;
      } else {
        score[w] = bulkEnd - 1;
        mark[w] = base;
      }
    }
    return count;
  }

  /** A view of `cnt` members' id words from `off` (the previous one when it is the same). */
  private membersView(ids: Uint32Array, off: number, cnt: number): Uint32Array {
    if (this.viewOf !== ids || this.viewOff !== off || this.view.length !== 2 * cnt) {
      this.view = ids.subarray(2 * off, 2 * (off + cnt));
      this.viewOf = ids;
      this.viewOff = off;
    }
    return this.view;
  }

  /**
   * Writes the last walk's matches into `result` from index `at` (`k`: the walk's return):
   * the bulk members with one copy and one fill (minus those that followed a few-worker
   * branch, listed with their own scores), then the visited workers. Returns the new count.
   */
  emit(a: LookupArrays, k: number, result: MatchResult, at: number): number {
    // Bounded by the member pool: a count read while the writer ran (a read without the lock,
    // dropped afterwards) must not size the result beyond what the tree holds.
    const bulkCnt = this.bulkOff === NONE ? 0 : Math.min(this.bulkCount, a.mIds.length >>> 1);
    result.reserve(at + bulkCnt + k, at);
    const idw = result.idWords;
    const out = result.scores;
    let end = at;
    if (bulkCnt > 0) {
      const off = this.bulkOff;
      idw.set(this.membersView(a.mIds, off, bulkCnt), 2 * at);
      out.fill(this.bulkScore, at, at + bulkCnt);
      end = at + bulkCnt;
      // Take out the members that followed the few-worker branch, highest position first, so
      // that the member moved into a freed place is never one still to be taken out.
      const ex = this.exempt;
      const m = this.exemptCount;
      for (let i = 1; i < m; i++) {
        const v = ex[i]!;
        let j = i - 1;
        while (j >= 0 && ex[j]! < v) {
          ex[j + 1] = ex[j]!;
          j--;
        }
        ex[j + 1] = v;
      }
      for (let i = 0; i < m; i++) {
        const p = at + ex[i]!;
        const last = --end;
        if (p !== last) {
          idw[2 * p] = idw[2 * last]!;
          idw[2 * p + 1] = idw[2 * last + 1]!;
        }
      }
    }
    const { slotLo, slotHi } = a;
    const touched = this.touched;
    const score = this.score;
    for (let i = 0; i < k; i++) {
      const s = touched[i]!;
      idw[2 * end] = slotLo[s]!;
      idw[2 * end + 1] = slotHi[s]!;
      out[end] = score[s]!;
      end++;
    }
    return end;
  }
}

/**
 * Whether the root has no child with tokens-hash key (lo, hi): the walk's first step alone, for
 * a caller that can skip preparing the rest of a lookup that matches nothing.
 */
export function rootMisses(a: LookupArrays, lo: number, hi: number): boolean {
  return rootChild(a, lo, hi) === NONE;
}

/**
 * Whether no worker holds the root's child with key (lo, hi): there is none, or it is hollow
 * (kept for the blocks below it: radix-tree.ts `detach`). No lookup that starts there scores.
 */
export function firstBlockUnheld(a: LookupArrays, lo: number, hi: number): boolean {
  const c = rootChild(a, lo, hi);
  return c === NONE || a.node[c * 4 + 3] === NONE;
}

/** The root's child with tokens-hash key (lo, hi), or NONE. */
function rootChild(a: LookupArrays, lo: number, hi: number): number {
  const node = a.node;
  if (node.length < 4) return NONE; // empty views (a reader before its first refresh)
  const c = node[2]! & 0x0fffffff;
  if (c !== 0x0fffffff && node[c * 4] === lo && node[c * 4 + 1] === hi) return c;
  // No root child has a key with these low bits: no probe.
  const roots = a.roots;
  if (roots.length > 0 && roots[lo & (roots.length - 1)] === 0) return NONE;
  return findChild(a.edges, a.edgeMask, a.parent, node, 0, lo, hi);
}

/** Position of the worker with id words (lo, hi) in a set's id words, or -1. */
function findMember(ids: Uint32Array, off: number, cnt: number, lo: number, hi: number): number {
  const end = Math.min(cnt, ids.length >>> 1); // bounded, as in `emit`
  for (let i = 0, j = 2 * off; i < end; i++, j += 2) if (ids[j] === lo && ids[j + 1] === hi) return i;
  return -1;
}

/** Whether `id` is among the first `n` ids of `list` (n is at most TOUCHED_MAX). */
function listed(list: Int32Array, n: number, id: number): boolean {
  for (let i = 0; i < n; i++) if (list[i] === id) return true;
  return false;
}

/**
 * A worker of the node where the set changes (`prevStamp` 0: the first node): on the first node
 * it opens a run from depth 1; later it is stamped only if it continues its run (stamped with
 * `prevStamp`). Returns the new touched count.
 *
 * Only the run from the first node scores: a prefix cache reuses a worker's blocks up to its
 * first gap, so a block it holds past a gap (it removed a block but kept the children) is no
 * use to a request. This is also what Dynamo's active-set walk (2026) computes. With hollow
 * nodes (radix-tree.ts `detach`) it makes scores independent of which workers share a tree:
 * counting a run per gap, the same events scored differently in-thread and through shards
 * (README, "Semantics").
 */
function enter(
  w: number, mark: Int32Array, runStart: Int32Array, score: Int32Array, touched: Int32Array,
  count: number, prevStamp: number, stamp: number,
): number {
  if (prevStamp === 0) {
    touched[count++] = w;
    score[w] = 0;
    runStart[w] = 1;
  } else if (mark[w] !== prevStamp) {
    return count;
  }
  mark[w] = stamp;
  return count;
}
