/**
 * The lookup walk that records the frequency trail (`expirationMs`, Dynamo's `recent_uses`):
 * per node, every worker on it is visited, so it costs O(workers) per node where walk.ts's
 * active-set walk costs O(1) on a node that holds its parent's workers; it is chosen only when
 * a tree has a frequency window, since every visited node's use must be recorded anyway.
 */
import type { OverlapScores } from '../protocol/types.js';
import { ROOT, type NodeStore } from './node-store.js';
import type { UseTracker } from './use-tracker.js';

/** What the walk reads of a tree: its nodes, the child probe, the trail, the slots' ids. */
export interface TrailTree {
  readonly nodes: NodeStore;
  readonly uses: UseTracker;
  readonly slotIds: readonly (bigint | null)[];
  /** The child of `cur` keyed by the tokens hash (lo, hi), or -1. */
  childOf(cur: number, lo: number, hi: number): number;
}

/**
 * Walks `n` tokens hashes (`words[off + 2i ..]` as (lo, hi)) from the root, scoring each worker
 * per visited node it holds without a gap from the first node into `score` by slot (zero on
 * entry and on return; `touched` lists the scored slots, empty on entry and on return), and
 * records each visited node's use.
 */
export function walkWithTrail(
  tree: TrailTree, score: Int32Array, touched: number[], words: Uint32Array, off: number, n: number, earlyExit: boolean,
): OverlapScores {
  const nodes = tree.nodes;
  const m = nodes.members;
  const frequencies: number[] = [];
  const uses = tree.uses;
  const t = uses.now();
  let cur: number = ROOT;
  for (let i = 0; i < n; i++) {
    const child = tree.childOf(cur, words[off + 2 * i]!, words[off + 2 * i + 1]!);
    if (child < 0) break;
    // A worker scores a node only if it held every node before it (walk.ts, `enter`): its score
    // is then i. The walk goes on while nobody scores, as every visited node's use is recorded.
    const s = nodes.w0(child);
    const single = s >= 0;
    if (single) {
      if (score[s] === i) {
        score[s] = i + 1;
        if (i === 0) touched.push(s);
      }
    } else {
      const mSlot = m.mSlot;
      const set = -s - 2;
      const off = m.offset(set);
      for (let p = off, end = off + m.count(set); p < end; p++) {
        const w = mSlot[p]!;
        if (score[w] === i) {
          score[w] = i + 1;
          if (i === 0) touched.push(w);
        }
      }
    }
    uses.record(child, frequencies, t);
    if (earlyExit && single) break;
    cur = child;
  }
  const scores = new Map<bigint, number>();
  for (let i = 0; i < touched.length; i++) {
    const s = touched[i]!;
    scores.set(tree.slotIds[s]!, score[s]!);
    score[s] = 0;
  }
  touched.length = 0;
  return { scores, frequencies };
}
