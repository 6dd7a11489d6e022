/**
 * Helpers that compare two radix-tree implementations through their public API only: a
 * structural `TreeLike` interface both satisfy, canonical forms of scores and dumps, and dump
 * replay.
 */

import type { ApplyStatus, OverlapScores, RouterEvent } from '../../src/protocol/types.js';

/** The public API shared by `RadixTree` and `MapRadixTree`. */
export interface TreeLike {
  applyEvent(ev: RouterEvent): ApplyStatus;
  findMatches(hashes: readonly bigint[] | BigUint64Array, earlyExit?: boolean): OverlapScores;
  clearWorker(workerId: bigint): void;
  removeWorker(workerId: bigint): void;
  dumpEvents(): RouterEvent[];
  workers(): bigint[];
  blockCount(workerId: bigint): number;
  readonly size: number;
  /** Attached nodes, the root included. */
  readonly nodeCount: number;
}

/** Scores as `[workerId, score]` pairs sorted by worker id (ids as decimal strings). */
export function sortedScores(s: OverlapScores): [string, number][] {
  return [...s.scores]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([w, n]) => [w.toString(), n]);
}

/**
 * A dump normalised to one tuple per stored block:
 * `worker/blockHash/tokensHash/parentHash`, where parentHash is the previous block of the
 * event or, for the first block, the event's own parentHash (`-` for null). Sorted, so two
 * dumps are equivalent exactly when their tuple lists are equal. Throws if the dump holds
 * anything but Stored events, or names one (worker, block hash) twice.
 */
export function dumpTuples(events: readonly RouterEvent[]): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  for (const ev of events) {
    const d = ev.event.data;
    if (d.type !== 'stored') throw new Error(`dump holds a ${d.type} event`);
    let parent = d.parentHash;
    for (const b of d.blocks) {
      const id = `${ev.workerId}/${b.blockHash}`;
      if (seen.has(id)) throw new Error(`dump names (worker, block) ${id} twice`);
      seen.add(id);
      out.push(`${id}/${b.tokensHash}/${parent === null ? '-' : parent.toString()}`);
      parent = b.blockHash;
    }
  }
  return out.sort();
}

/** Checks the dump's event ids are 0, 1, 2, ... in emission order; returns a problem or null. */
export function eventIdProblem(events: readonly RouterEvent[]): string | null {
  for (let i = 0; i < events.length; i++) {
    if (events[i]!.event.eventId !== BigInt(i)) {
      return `event ${i} has id ${events[i]!.event.eventId}`;
    }
  }
  return null;
}

/** Applies `events` in order to `tree`, returning the statuses. */
export function replay(tree: TreeLike, events: readonly RouterEvent[]): ApplyStatus[] {
  return events.map((ev) => tree.applyEvent(ev));
}

/** The worker-visible state: workers, per-worker block counts, size. */
export function stateSummary(tree: TreeLike, workerIds: readonly bigint[]): {
  workers: string[];
  blockCounts: [string, number][];
  size: number;
} {
  return {
    workers: tree.workers().map(String),
    blockCounts: workerIds.map((w) => [w.toString(), tree.blockCount(w)]),
    size: tree.size,
  };
}

/**
 * Scores of prefixes of every document, as sorted entries: every prefix length up to 32, then
 * every 17th and the full length, so long documents stay linear-ish in cost.
 */
export function prefixScores(tree: TreeLike, docs: readonly (readonly bigint[])[]): [string, number][][] {
  const out: [string, number][][] = [];
  for (const doc of docs) {
    for (let n = 1; n <= doc.length; n++) {
      if (n <= 32 || n % 17 === 0 || n === doc.length) {
        out.push(sortedScores(tree.findMatches(doc.slice(0, n))));
      }
    }
  }
  return out;
}
