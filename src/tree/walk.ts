/**
 * The lookup walk over a tree's arrays, shared by `RadixTree.findMatchesInto` (in-thread) and
 * by lookups that read a shard's tree from shared memory on the calling thread
 * (src/shard/main/tree-reader.ts): one implementation of the probe and the scoring.
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
  edges: Int32Array;
  edgeMask: number;
}

const NONE = -1;

/**
 * Walks `n` tokens hashes (`words[off + 2i ..]` as (lo, hi)) from the root: every worker on a
 * visited node scores 1; stops at the first missing block, or with `earlyExit` after a node
 * held by exactly one worker. Adds to `score[slot]` and lists each newly scored slot in
 * `touched`; returns how many it listed. `score` must hold every slot and `touched` as many.
 */
export function walkScores(
  a: LookupArrays, words: Uint32Array, off: number, n: number, earlyExit: boolean,
  score: Int32Array, touched: Int32Array,
): number {
  const { parent, tokLo, tokHi, firstChild, w0, pWorker, pNext, edges, edgeMask } = a;
  let count = 0;
  let cur = 0;
  for (let i = 0; i < n; i++) {
    const lo = words[off + 2 * i]!;
    const hi = words[off + 2 * i + 1]!;
    // Most nodes have one child: compare the first child before probing the edge table
    // (lookup p99 on the conversation tree measured 22 -> 14 us).
    const c = firstChild[cur]!;
    if (c === NONE) break;
    const child = tokLo[c] === lo && tokHi[c] === hi ? c : findEdge(edges, edgeMask, parent, tokLo, tokHi, cur, lo, hi);
    if (child < 0) break;
    const s = w0[child]!;
    if (s >= 0) {
      const v = score[s]!;
      score[s] = v + 1;
      if (v === 0) touched[count++] = s;
      if (earlyExit) break;
    } else {
      for (let p = -s - 2; p !== NONE; p = pNext[p]!) {
        const t = pWorker[p]!;
        const u = score[t]!;
        score[t] = u + 1;
        if (u === 0) touched[count++] = t;
      }
    }
    cur = child;
  }
  return count;
}
