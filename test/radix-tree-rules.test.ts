/**
 * One example per rule of the radix-tree semantics (Dynamo's, with kvindex's decisions),
 * run against both the fast `RadixTree` and the Map-based reference model.
 */

import { describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import { U64_MAX, type RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples, replay, sortedScores, type TreeLike } from './support/compare.js';

type Options = { expirationMs?: number; now?: () => number };
type Factory = (options?: Options) => TreeLike;

const W1 = 0x694d99badb9f7c07n;
const W2 = W1 + 1n;
const W3 = W1 + 2n;

// Tokens hashes (the tree's keys); external hashes are small numbers in the tests.
const A = 0xa0a0_0000_0000_0001n;
const B = 0xb0b0_0000_0000_0002n;
const C = 0xc0c0_0000_0000_0003n;
const D = 0xd0d0_0000_0000_0004n;
const X = 0xeeee_0000_0000_0005n;

let nextId = 0n;
function stored(w: bigint, parentHash: bigint | null, blocks: [bigint, bigint][]): RouterEvent {
  return {
    workerId: w,
    event: {
      eventId: nextId++,
      data: { type: 'stored', parentHash, blocks: blocks.map(([blockHash, tokensHash]) => ({ blockHash, tokensHash })) },
    },
  };
}
function removed(w: bigint, blockHashes: bigint[]): RouterEvent {
  return { workerId: w, event: { eventId: nextId++, data: { type: 'removed', blockHashes } } };
}
function cleared(w: bigint): RouterEvent {
  return { workerId: w, event: { eventId: nextId++, data: { type: 'cleared' } } };
}

/** Everything observable without touching frequencies. */
function snapshot(t: TreeLike): unknown {
  return {
    tuples: dumpTuples(t.dumpEvents()),
    size: t.size,
    workers: t.workers(),
    counts: [W1, W2, W3].map((w) => t.blockCount(w)),
  };
}

function scores(t: TreeLike, hashes: bigint[], earlyExit = false): [string, number][] {
  return sortedScores(t.findMatches(hashes, earlyExit));
}

function okAll(t: TreeLike, events: RouterEvent[]): void {
  expect(replay(t, events)).toEqual(events.map(() => 'ok'));
}

const impls: [string, Factory][] = [
  ['RadixTree', (o) => new RadixTree(o)],
  ['MapRadixTree', (o) => new MapRadixTree(o)],
];

describe.each(impls)('%s', (_name, make) => {
  describe('stored', () => {
    it('stores a chain from the root and scores every block', () => {
      const t = make();
      expect(t.applyEvent(stored(W1, null, [[1n, A], [2n, B], [3n, C]]))).toBe('ok');
      expect(scores(t, [A, B, C])).toEqual([[W1.toString(), 3]]);
      expect(t.size).toBe(3);
    });

    it('extends a chain under the worker’s own parent hash', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A]]), stored(W1, 1n, [[2n, B]])]);
      expect(scores(t, [A, B])).toEqual([[W1.toString(), 2]]);
    });

    it('reports an unknown parent and changes nothing', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      const before = snapshot(t);
      expect(t.applyEvent(stored(W1, 99n, [[3n, C]]))).toBe('parent_block_not_found');
      expect(snapshot(t)).toEqual(before);
    });

    it('looks the parent up in this worker’s blocks only', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A]])]);
      const before = snapshot(t);
      expect(t.applyEvent(stored(W2, 1n, [[2n, B]]))).toBe('parent_block_not_found');
      expect(snapshot(t)).toEqual(before);
    });

    it('is idempotent', () => {
      const t = make();
      const ev = stored(W1, null, [[1n, A], [2n, B]]);
      okAll(t, [ev]);
      const before = snapshot(t);
      expect(t.applyEvent(ev)).toBe('ok');
      expect(snapshot(t)).toEqual(before);
      expect(t.size).toBe(2);
    });

    it('accepts an empty block list as a no-op', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A]])]);
      const before = snapshot(t);
      expect(t.applyEvent(stored(W1, 1n, []))).toBe('ok');
      expect(t.applyEvent(stored(W1, null, []))).toBe('ok');
      expect(snapshot(t)).toEqual(before);
    });

    it('shares a node between workers with different external hashes', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]]), stored(W2, null, [[71n, A]])]);
      expect(scores(t, [A, B])).toEqual([
        [W1.toString(), 2],
        [W2.toString(), 1],
      ]);
      expect(t.size).toBe(3);
    });

    it('overwrites the worker’s hash on a node it already holds; the old hash is forgotten', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A]]), stored(W1, null, [[9n, A]])]);
      expect(t.blockCount(W1)).toBe(1);
      expect(t.applyEvent(removed(W1, [1n]))).toBe('block_not_found');
      expect(t.applyEvent(removed(W1, [9n]))).toBe('ok');
      expect(t.size).toBe(0);
    });

    it('rejects a block named by its own parent hash (self-reference) and changes nothing', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[100n, A]])]);
      const before = snapshot(t);
      expect(t.applyEvent(stored(W1, 100n, [[100n, B]]))).toBe('invalid_block_sequence');
      expect(snapshot(t)).toEqual(before);
    });

    it('rejects a hash repeated inside one event (cycle [2,3,2]) and changes nothing', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[100n, A]])]);
      const before = snapshot(t);
      expect(t.applyEvent(stored(W1, 100n, [[2n, B], [3n, C], [2n, D]]))).toBe('invalid_block_sequence');
      expect(snapshot(t)).toEqual(before);
    });

    it('rejects a hash the worker holds on another node and changes nothing', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      const before = snapshot(t);
      expect(t.applyEvent(stored(W1, null, [[5n, C], [2n, D]]))).toBe('invalid_block_sequence');
      expect(snapshot(t)).toEqual(before);
    });

    it('rejects a hash held by an ancestor on the path and changes nothing', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[10n, A], [20n, B]])]);
      const before = snapshot(t);
      expect(t.applyEvent(stored(W1, 20n, [[30n, C], [10n, D]]))).toBe('invalid_block_sequence');
      expect(snapshot(t)).toEqual(before);
    });

    it('applies none of an invalid event, not even its valid first blocks', () => {
      const t = make();
      expect(t.applyEvent(stored(W1, null, [[5n, A], [6n, B], [5n, C]]))).toBe('invalid_block_sequence');
      expect(t.size).toBe(0);
      expect(t.workers()).toEqual([]);
      expect(scores(t, [A])).toEqual([]);
    });

    it('lets another worker use a hash this worker holds', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A]]), stored(W2, null, [[1n, B]])]);
      expect(t.size).toBe(2);
    });
  });

  describe('removed', () => {
    it('removes a leaf block', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      expect(t.applyEvent(removed(W1, [2n]))).toBe('ok');
      expect(scores(t, [A, B])).toEqual([[W1.toString(), 1]]);
      expect(t.blockCount(W1)).toBe(1);
    });

    it('continues past unknown hashes and reports block_not_found', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B], [3n, C]])]);
      expect(t.applyEvent(removed(W1, [3n, 999n, 2n]))).toBe('block_not_found');
      expect(t.blockCount(W1)).toBe(1);
      expect(scores(t, [A, B, C])).toEqual([[W1.toString(), 1]]);
    });

    it('does not cascade to the worker’s blocks below a removed block still held by others', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]]), stored(W2, null, [[1n, A], [2n, B]])]);
      expect(t.applyEvent(removed(W1, [1n]))).toBe('ok');
      expect(t.blockCount(W1)).toBe(1);
      expect(t.applyEvent(removed(W1, [2n]))).toBe('ok');
    });

    it('scores a worker only up to its first gap after a partial remove', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B], [3n, C]]), stored(W2, null, [[1n, A], [2n, B], [3n, C]])]);
      expect(t.applyEvent(removed(W1, [2n]))).toBe('ok');
      // W1 still holds C, but past the gap at B: a prefix cache cannot reuse it.
      expect(t.blockCount(W1)).toBe(2);
      expect(scores(t, [A, B, C])).toEqual([
        [W1.toString(), 1],
        [W2.toString(), 3],
      ]);
      // Without its first block a worker scores nothing, whatever it holds deeper.
      expect(t.applyEvent(removed(W1, [1n]))).toBe('ok');
      expect(scores(t, [A, B, C])).toEqual([[W2.toString(), 3]]);
      expect(t.blockCount(W1)).toBe(1);
    });

    it('keeps an emptied node with children, hollow: the worker’s blocks below stay, unscored past the gap', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B], [3n, C]])]);
      expect(t.applyEvent(removed(W1, [1n]))).toBe('ok');
      expect(t.blockCount(W1)).toBe(2);
      expect(t.size).toBe(2);
      expect(t.nodeCount).toBe(4);
      expect(t.workers()).toEqual([W1]);
      expect(scores(t, [A, B, C])).toEqual([]);
      // The blocks below are still the worker's: it can remove them and store under them.
      expect(t.applyEvent(removed(W1, [2n]))).toBe('ok');
      expect(t.applyEvent(stored(W1, 3n, [[4n, D]]))).toBe('ok');
      expect(scores(t, [A, B, C, D])).toEqual([]);
      // Storing the first block again gives the worker its run up to the next gap (B).
      expect(t.applyEvent(stored(W1, null, [[1n, A]]))).toBe('ok');
      expect(scores(t, [A, B, C, D])).toEqual([[W1.toString(), 1]]);
      expect(t.applyEvent(stored(W1, 1n, [[2n, B]]))).toBe('ok');
      expect(scores(t, [A, B, C, D])).toEqual([[W1.toString(), 4]]);
    });

    it('frees an emptied leaf with every hollow ancestor it leaves without children', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B], [3n, C]]), stored(W1, 1n, [[5n, X]])]);
      okAll(t, [removed(W1, [1n, 2n])]);
      expect(t.nodeCount).toBe(5); // A and B hollow
      okAll(t, [removed(W1, [3n])]);
      expect(t.nodeCount).toBe(3); // C and B gone; A stays for X
      okAll(t, [removed(W1, [5n])]);
      expect(t.nodeCount).toBe(1);
      expect(t.size).toBe(0);
      expect(t.workers()).toEqual([]);
      expect(t.dumpEvents()).toEqual([]);
    });

    it('never drops another worker’s blocks: a node emptied above them stays', () => {
      const t = make();
      okAll(t, [
        stored(W1, null, [[1n, A], [2n, B]]),
        stored(W2, null, [[71n, A], [72n, B]]),
        removed(W2, [71n]),
      ]);
      expect(t.blockCount(W2)).toBe(1);
      expect(t.applyEvent(removed(W1, [1n]))).toBe('ok');
      expect(t.blockCount(W2)).toBe(1);
      expect(t.size).toBe(2);
      expect(t.applyEvent(removed(W2, [72n]))).toBe('ok');
      expect(t.applyEvent(removed(W1, [2n]))).toBe('ok');
      expect(t.size).toBe(0);
      expect(t.nodeCount).toBe(1);
    });

    it('removes a block and the block below it in one event', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      expect(t.applyEvent(removed(W1, [1n, 2n]))).toBe('ok');
      expect(t.size).toBe(0);
      expect(t.nodeCount).toBe(1);
    });

    it('drops a hash repeated in the same event once and counts the repeat as unknown', () => {
      const t = make();
      okAll(t, [
        stored(W1, null, [[1n, A], [2n, B], [3n, C]]),
        stored(W2, null, [[71n, A], [72n, B]]),
      ]);
      // 3: W1's alone (inline); 2: shared with W2 (W1's pair in the node's list).
      expect(t.applyEvent(removed(W1, [3n, 3n]))).toBe('block_not_found');
      expect(t.applyEvent(removed(W1, [2n, 2n]))).toBe('block_not_found');
      expect(t.blockCount(W1)).toBe(1);
      expect(t.blockCount(W2)).toBe(2);
      expect(t.size).toBe(3);
      expect(scores(t, [A, B, C])).toEqual([[W1.toString(), 1], [W2.toString(), 2]]);
      // The dropped hashes left W1's lookup: storing them again is a fresh store.
      expect(t.applyEvent(stored(W1, 1n, [[2n, B], [3n, C]]))).toBe('ok');
      expect(scores(t, [A, B, C])).toEqual([[W1.toString(), 3], [W2.toString(), 2]]);
    });

    it('reports every hash of an unknown worker as not found', () => {
      const t = make();
      expect(t.applyEvent(removed(W3, [1n]))).toBe('block_not_found');
      expect(t.applyEvent(removed(W3, []))).toBe('ok');
    });

    it('lets a new store recreate a freed path from scratch', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]]), removed(W1, [2n, 1n]), stored(W1, null, [[1n, A]])]);
      expect(scores(t, [A, B])).toEqual([[W1.toString(), 1]]);
      expect(t.size).toBe(1);
      expect(t.nodeCount).toBe(2);
    });
  });

  describe('cleared, clearWorker, removeWorker', () => {
    it('Cleared drops all of the worker’s blocks and keeps other workers', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]]), stored(W1, 1n, [[3n, C]]), stored(W2, null, [[71n, A], [72n, B]])]);
      expect(t.applyEvent(cleared(W1))).toBe('ok');
      expect(t.blockCount(W1)).toBe(0);
      expect(t.workers()).toEqual([W2]);
      expect(t.size).toBe(2);
      expect(scores(t, [A, B])).toEqual([[W2.toString(), 2]]);
      expect(scores(t, [A, C])).toEqual([[W2.toString(), 1]]);
    });

    it('Cleared keeps other workers’ blocks below the nodes it empties', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]]), stored(W2, null, [[71n, A], [72n, B]]), removed(W2, [71n])]);
      expect(t.applyEvent(cleared(W1))).toBe('ok');
      expect(t.size).toBe(1);
      expect(t.workers()).toEqual([W2]);
      expect(scores(t, [A, B])).toEqual([]);
      expect(t.applyEvent(removed(W2, [72n]))).toBe('ok');
      expect(t.nodeCount).toBe(1);
    });

    it('Cleared of an unknown worker is ok and changes nothing', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A]])]);
      const before = snapshot(t);
      expect(t.applyEvent(cleared(W3))).toBe('ok');
      expect(snapshot(t)).toEqual(before);
    });

    it('clearWorker does what Cleared does', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]]), stored(W2, null, [[71n, A]])]);
      t.clearWorker(W1);
      expect(t.blockCount(W1)).toBe(0);
      expect(scores(t, [A, B])).toEqual([[W2.toString(), 1]]);
      t.clearWorker(W3);
      expect(t.size).toBe(1);
    });

    it('removeWorker drops the worker’s blocks and forgets it', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]]), stored(W2, null, [[71n, A]])]);
      t.removeWorker(W1);
      expect(t.workers()).toEqual([W2]);
      expect(t.blockCount(W1)).toBe(0);
      expect(t.size).toBe(1);
      expect(t.applyEvent(stored(W1, 1n, [[3n, C]]))).toBe('parent_block_not_found');
      expect(t.applyEvent(stored(W1, null, [[1n, A]]))).toBe('ok');
      t.removeWorker(W3);
      expect(t.size).toBe(2);
    });
  });

  describe('findMatches', () => {
    it('stops at the first missing child', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      expect(scores(t, [A, X, B])).toEqual([[W1.toString(), 1]]);
      expect(scores(t, [X, A])).toEqual([]);
      expect(scores(t, [])).toEqual([]);
    });

    it('accepts a BigUint64Array', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      expect(sortedScores(t.findMatches(BigUint64Array.of(A, B)))).toEqual([[W1.toString(), 2]]);
    });

    it('accepts a BigUint64Array view that does not start at its buffer’s start', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      const buf = BigUint64Array.of(X, X, A, B, C);
      expect(sortedScores(t.findMatches(buf.subarray(2, 4)))).toEqual([[W1.toString(), 2]]);
    });

    it('scores a node shared by 40 workers', () => {
      const t = make();
      const ids = Array.from({ length: 40 }, (_, k) => W1 + BigInt(k) * 0x1_0000_0001n);
      okAll(t, ids.map((w, k) => stored(w, null, [[BigInt(k), A], [BigInt(k + 100), B]])));
      t.removeWorker(ids[7]!);
      okAll(t, [stored(W1 - 1n, null, [[5n, A]])]);
      const expected = [...ids.filter((_, k) => k !== 7).map((w) => [w.toString(), 2]), [(W1 - 1n).toString(), 1]];
      expect(scores(t, [A, B])).toEqual(expected.sort(([a], [b]) => (BigInt(a!) < BigInt(b!) ? -1 : 1)));
    });

    it('with earlyExit stops after counting a node held by exactly one worker', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B], [3n, C]]), stored(W2, null, [[71n, A]])]);
      expect(scores(t, [A, B, C], true)).toEqual([
        [W1.toString(), 2],
        [W2.toString(), 1],
      ]);
      expect(scores(t, [A, B, C], false)).toEqual([
        [W1.toString(), 3],
        [W2.toString(), 1],
      ]);
    });

    it('has no frequencies without expirationMs', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A]])]);
      t.findMatches([A]);
      expect(t.findMatches([A]).frequencies).toEqual([]);
    });

    it('counts recent uses per visited node, non-zero only, in path order', () => {
      let now = 0;
      const t = make({ expirationMs: 10, now: () => now });
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      expect(t.findMatches([A, B]).frequencies).toEqual([]);
      now = 1;
      expect(t.findMatches([A]).frequencies).toEqual([1]);
      now = 2;
      expect(t.findMatches([A, B, X]).frequencies).toEqual([2, 1]);
    });

    it('expires uses strictly older than expirationMs', () => {
      let now = 100;
      const t = make({ expirationMs: 10, now: () => now });
      okAll(t, [stored(W1, null, [[1n, A]])]);
      t.findMatches([A]);
      now = 110; // exactly 10 later: still inside the window
      expect(t.findMatches([A]).frequencies).toEqual([1]);
      now = 121; // 100 and 110 are both more than 10 ago
      expect(t.findMatches([A]).frequencies).toEqual([]);
    });

    it('reads the clock once per call: every node of one lookup gets the same time', () => {
      // Dynamo takes `Instant::now()` once at the top of find_matches.
      let now = 0;
      const t = make({ expirationMs: 1, now: () => now++ });
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      t.findMatches([A, B]); // both nodes used at time 0
      // One read (time 1): both uses are exactly 1 old, inside the window. Reading per node
      // (times 2 and 3) would expire both.
      expect(t.findMatches([A, B]).frequencies).toEqual([1, 1]);
    });

    it('records a use on the node where earlyExit stops, not below it', () => {
      let now = 0;
      const t = make({ expirationMs: 10, now: () => now });
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]])]);
      t.findMatches([A, B], true);
      now = 1;
      expect(t.findMatches([A, B]).frequencies).toEqual([1]);
    });
  });

  describe('workers, blockCount, size', () => {
    it('lists only workers holding blocks, ascending', () => {
      const t = make();
      okAll(t, [stored(W3, null, [[1n, A]]), stored(W1, null, [[1n, A]]), stored(W2, null, [[2n, B]])]);
      expect(t.applyEvent(stored(W1 + 10n, 5n, [[1n, A]]))).toBe('parent_block_not_found');
      expect(t.workers()).toEqual([W1, W2, W3]);
      okAll(t, [removed(W2, [2n])]);
      expect(t.workers()).toEqual([W1, W3]);
    });

    it('counts (worker, node) pairs', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B]]), stored(W2, null, [[1n, A]])]);
      expect(t.size).toBe(3);
      expect(t.blockCount(W1)).toBe(2);
      expect(t.blockCount(W2)).toBe(1);
      expect(t.blockCount(W3)).toBe(0);
    });
  });

  describe('u64 edge values', () => {
    it('handles 0 and 2^64-1 as worker ids, tokens hashes and block hashes', () => {
      const t = make();
      const MAX = U64_MAX;
      okAll(t, [
        stored(0n, null, [[0n, 0n], [MAX, MAX]]),
        stored(MAX, null, [[MAX, 0n], [0n, MAX]]),
        stored(MAX, 0n, [[1n, 1n]]),
      ]);
      expect(t.workers()).toEqual([0n, MAX]);
      expect(scores(t, [0n, MAX, 1n])).toEqual([
        ['0', 2],
        [MAX.toString(), 3],
      ]);
      const copy = make();
      okAll(copy, t.dumpEvents());
      expect(dumpTuples(copy.dumpEvents())).toEqual(dumpTuples(t.dumpEvents()));
      expect(t.applyEvent(removed(0n, [0n, MAX]))).toBe('ok');
      expect(scores(t, [0n, MAX, 1n])).toEqual([[MAX.toString(), 3]]);
    });
  });

  describe('dumpEvents', () => {
    it('emits one event per maximal chain, branches naming the branching block', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B], [3n, C]]), stored(W1, 1n, [[4n, D]])]);
      const dump = t.dumpEvents();
      expect(dump.map((e) => e.event.eventId)).toEqual([0n, 1n]);
      const [first, second] = dump;
      expect(first?.event.data).toMatchObject({ type: 'stored', parentHash: null });
      expect(second?.event.data).toMatchObject({ type: 'stored', parentHash: 1n });
      expect(dumpTuples(dump)).toEqual(
        [`${W1}/1/${A}/-`, `${W1}/2/${B}/1`, `${W1}/3/${C}/2`, `${W1}/4/${D}/1`].sort(),
      );
    });

    it('re-roots an orphan chain with parentHash null', () => {
      const t = make();
      okAll(t, [stored(W1, null, [[1n, A], [2n, B], [3n, C]]), stored(W2, null, [[71n, A], [72n, B], [73n, C]]), removed(W2, [71n])]);
      const w2 = t.dumpEvents().filter((e) => e.workerId === W2);
      expect(w2).toHaveLength(1);
      expect(w2[0]?.event.data).toEqual({
        type: 'stored',
        parentHash: null,
        blocks: [
          { blockHash: 72n, tokensHash: B },
          { blockHash: 73n, tokensHash: C },
        ],
      });
    });

    it('replays into an empty tree with the same scores and dump', () => {
      const t = make();
      okAll(t, [
        stored(W1, null, [[1n, A], [2n, B], [3n, C]]),
        stored(W1, 1n, [[4n, D]]),
        stored(W2, null, [[71n, A], [72n, B]]),
        stored(W2, 72n, [[75n, X]]),
      ]);
      const dump = t.dumpEvents();
      const copy = make();
      okAll(copy, dump);
      expect(dumpTuples(copy.dumpEvents())).toEqual(dumpTuples(dump));
      for (const q of [[A, B, C], [A, D], [A, B, X]]) expect(scores(copy, q)).toEqual(scores(t, q));
    });

    it('is empty for an empty tree', () => {
      expect(make().dumpEvents()).toEqual([]);
    });
  });

  describe('a chain of 65,536 blocks', () => {
    const N = 65_536;
    const blocks: [bigint, bigint][] = Array.from({ length: N }, (_, i) => [BigInt(i + 1), 0x1_0000_0000n + BigInt(i)]);
    const tokens = blocks.map(([, tok]) => tok);

    it('stores, matches, dumps as one event; scores nothing without its root block; frees every node when the rest goes', () => {
      const t = make();
      expect(t.applyEvent(stored(W1, null, blocks))).toBe('ok');
      expect(t.size).toBe(N);
      expect(scores(t, tokens)).toEqual([[W1.toString(), N]]);
      const dump = t.dumpEvents();
      expect(dump).toHaveLength(1);
      const data = dump[0]?.event.data;
      expect(data?.type === 'stored' ? data.blocks.length : -1).toBe(N);
      expect(t.applyEvent(removed(W1, [1n]))).toBe('ok');
      expect(t.size).toBe(N - 1);
      expect(t.blockCount(W1)).toBe(N - 1);
      expect(scores(t, tokens)).toEqual([]);
      // Root first: each block leaves a hollow node until the last (the leaf) frees them all.
      expect(t.applyEvent(removed(W1, blocks.slice(1).map(([h]) => h)))).toBe('ok');
      expect(t.size).toBe(0);
      expect(t.nodeCount).toBe(1);
    });
  });
});
