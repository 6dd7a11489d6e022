/**
 * The lookup walk over a tree's arrays, shared by `RadixTree.findMatchesInto` (in-thread) and
 * by lookups that read a shard's tree from shared memory on the calling thread
 * (src/shard/main/tree-reader.ts): one implementation of the probe and the scoring.
 *
 * An active-set walk: a worker's score is the number of visited nodes it holds, so along the
 * path it is the sum of the lengths of its runs (consecutive nodes holding it). The walk keeps
 * the current node's worker set and touches workers only where the set changes: a node whose
 * count and 64-bit fingerprint (XOR of the workers' random slot keys, node-store.ts) equal the
 * previous node's holds the same workers (a different set with the same count and fingerprint
 * has probability 2^-64), so a path that thousands of workers share costs O(1) per node instead
 * of O(workers) per node (issue "fleet scale": 1.2 ms per lookup at 4,096 workers before).
 * Where the set changes, the new node's workers are stamped, runs of workers that left are
 * closed, and runs of workers that arrived are opened; at the end, the open runs are closed.
 */
import { findEdge } from './edge-table.js';

/** The arrays a lookup reads (views of the tree's own, or of shared memory). */
export interface LookupArrays {
  parent: Int32Array;
  tokLo: Uint32Array;
  tokHi: Uint32Array;
  firstChild: Int32Array;
  w0: Int32Array;
  pWorker: Int32Array;
  pNext: Int32Array;
  pCnt: Int32Array;
  pFpLo: Uint32Array;
  pFpHi: Uint32Array;
  keyLo: Uint32Array;
  keyHi: Uint32Array;
  edges: Int32Array;
  edgeMask: number;
}

const NONE = -1;

/** A LookupArrays of empty arrays, for holders that fill it in place. */
export function emptyLookupArrays(): LookupArrays {
  const i = (): Int32Array => new Int32Array(0);
  const u = (): Uint32Array => new Uint32Array(0);
  return {
    parent: i(), tokLo: u(), tokHi: u(), firstChild: i(), w0: i(), pWorker: i(), pNext: i(),
    pCnt: i(), pFpLo: u(), pFpHi: u(), keyLo: u(), keyHi: u(), edges: i(), edgeMask: 0,
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
   */
  walk(a: LookupArrays, words: Uint32Array, off: number, n: number, earlyExit: boolean): number {
    const { parent, tokLo, tokHi, firstChild, w0, pWorker, pNext, pCnt, pFpLo, pFpHi, keyLo, keyHi, edges, edgeMask } = a;
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
    for (let i = 0; i < n; i++) {
      const lo = words[off + 2 * i]!;
      const hi = words[off + 2 * i + 1]!;
      // Most nodes have one child: compare the first child before probing the edge table
      // (lookup p99 on the conversation tree measured 22 -> 14 us).
      const c = firstChild[cur]!;
      if (c === NONE) break;
      const child = tokLo[c] === lo && tokHi[c] === hi ? c : findEdge(edges, edgeMask, parent, tokLo, tokHi, cur, lo, hi);
      if (child < 0) break;
      depth = i + 1;
      const s = w0[child]!;
      let cnt: number;
      let fLo: number;
      let fHi: number;
      if (s >= 0) {
        cnt = 1;
        fLo = keyLo[s]!;
        fHi = keyHi[s]!;
      } else {
        const h = -s - 2;
        cnt = pCnt[h]!;
        fLo = pFpLo[h]!;
        fHi = pFpHi[h]!;
      }
      if (prev === NONE || cnt !== activeCnt || fLo !== activeLo || fHi !== activeHi) {
        // The set changes: stamp the new node's workers (continuing ones keep their run, new
        // ones open a run here), then close the runs of the previous node's workers that left.
        const stamp = ++this.stamp;
        if (s >= 0) {
          count = enter(s, mark, runStart, score, touched, count, base, prevStamp, stamp, depth);
        } else {
          for (let p = -s - 2; p !== NONE; p = pNext[p]!) {
            count = enter(pWorker[p]!, mark, runStart, score, touched, count, base, prevStamp, stamp, depth);
          }
        }
        if (prev !== NONE) {
          const ps = w0[prev]!;
          if (ps >= 0) {
            if (mark[ps] === prevStamp) score[ps] = score[ps]! + depth - runStart[ps]!;
          } else {
            for (let p = -ps - 2; p !== NONE; p = pNext[p]!) {
              const w = pWorker[p]!;
              if (mark[w] === prevStamp) score[w] = score[w]! + depth - runStart[w]!;
            }
          }
        }
        prevStamp = stamp;
        activeCnt = cnt;
        activeLo = fLo;
        activeHi = fHi;
      }
      prev = child;
      if (earlyExit && cnt === 1) break;
      cur = child;
    }
    // Close the runs still open at the last node.
    if (prev !== NONE) {
      const ps = w0[prev]!;
      if (ps >= 0) {
        score[ps] = score[ps]! + depth + 1 - runStart[ps]!;
      } else {
        for (let p = -ps - 2; p !== NONE; p = pNext[p]!) {
          const w = pWorker[p]!;
          score[w] = score[w]! + depth + 1 - runStart[w]!;
        }
      }
    }
    return count;
  }
}

/** A worker of the node entering the active set at `depth`; returns the new touched count. */
function enter(
  w: number, mark: Int32Array, runStart: Int32Array, score: Int32Array, touched: Int32Array,
  count: number, base: number, prevStamp: number, stamp: number, depth: number,
): number {
  const m = mark[w]!;
  if (m !== prevStamp || prevStamp === 0) {
    if (m < base) {
      touched[count++] = w; // first seen in this lookup
      score[w] = 0;
    }
    runStart[w] = depth;
  }
  mark[w] = stamp;
  return count;
}
