/**
 * Children without sibling links (node-store.ts): a node's first child is in its record, every
 * other child in the edge table, the first child's removal leaves its siblings in the table with
 * no first child, and the record carries a 2-bit class of the child count that lets lookups stop
 * without probing. These tests would fail if that layout lost a child or a pair: a node with
 * more children than its count byte holds, removal of the first child while its siblings
 * remain, a freed id reused by a child of another parent with the same tokens hash, hollow
 * nodes and their detach; each compared with the Map-based model, through a dump and its
 * replay, and through 2 shard threads read from shared memory.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { MapRadixTree } from '../bench/reference/map-radix-tree.js';
import type { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { createMatchResult, type MatchResult } from '../src/tree/match-result.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples, replay, sortedScores } from './support/compare.js';
import { Rng } from './support/event-gen.js';
import { createFaultyIndexer } from './support/faulty-shards.js';

const stored = (w: bigint, parent: bigint | null, blocks: [bigint, bigint][]): RouterEvent => ({
  workerId: w,
  event: { eventId: 0n, data: { type: 'stored', parentHash: parent, blocks: blocks.map(([blockHash, tokensHash]) => ({ blockHash, tokensHash })) } },
});
const removed = (w: bigint, hashes: bigint[]): RouterEvent => ({ workerId: w, event: { eventId: 0n, data: { type: 'removed', blockHashes: hashes } } });

const W = 7n;
const P_TOK = 1000n;
const P_HASH = 1n;
const KIDS = 600; // past the count byte (255) and back
const kidTok = (i: number): bigint => 5000n + BigInt(i);
const kidHash = (i: number): bigint => 100n + BigInt(i);

/** Every lookup of the prompt P + child i, and a few deeper and missing ones. */
function lookups(): bigint[][] {
  const out: bigint[][] = [[P_TOK], [P_TOK, 424242n], [424242n]];
  for (let i = 0; i < KIDS; i++) out.push([P_TOK, kidTok(i)], [P_TOK, kidTok(i), 9000n + BigInt(i)]);
  return out;
}

function expectSame(tree: RadixTree, model: MapRadixTree, qs: bigint[][], at: string): void {
  const bad: string[] = [];
  for (const q of qs) {
    const a = JSON.stringify(sortedScores(tree.findMatches(q)));
    const b = JSON.stringify(sortedScores(model.findMatches(q)));
    if (a !== b) bad.push(`${at} ${q.join(',')}: ${a} vs model ${b}`);
  }
  expect(bad.slice(0, 5)).toEqual([]);
  expect([tree.size, tree.nodeCount]).toEqual([model.size, model.nodeCount]);
}

function expectDumpReplays(tree: RadixTree, model: MapRadixTree): void {
  const dump = tree.dumpEvents();
  expect(dumpTuples(dump)).toEqual(dumpTuples(model.dumpEvents()));
  const again = new RadixTree();
  expect(replay(again, dump).every((s) => s === 'ok')).toBe(true);
  expect(dumpTuples(again.dumpEvents())).toEqual(dumpTuples(dump));
}

/**
 * The event script of the wide node: W stores P, its 600 children (one event each, so each is
 * linked on its own: the first in P's record, the rest in the edge table) and a grandchild
 * under each; a second worker shares P and every third child; then children leave in a
 * shuffled order that starts with the first child, while new root chains reuse the freed ids
 * (P + 1 among them) with the tokens hashes of removed children.
 */
function wideScript(): { ev: RouterEvent; check: boolean }[] {
  const out: { ev: RouterEvent; check: boolean }[] = [];
  const add = (ev: RouterEvent, check = false): void => {
    out.push({ ev, check });
  };
  add(stored(W, null, [[P_HASH, P_TOK]]));
  add(stored(8n, null, [[P_HASH, P_TOK]]));
  for (let i = 0; i < KIDS; i++) {
    add(stored(W, P_HASH, [[kidHash(i), kidTok(i)], [kidHash(i) + 10_000n, 9000n + BigInt(i)]]), i === 0 || i === 254 || i === 255 || i === KIDS - 1);
    if (i % 3 === 0) add(stored(8n, P_HASH, [[kidHash(i), kidTok(i)]]));
  }
  const order = Array.from({ length: KIDS }, (_, i) => i);
  const rng = new Rng(40);
  for (let i = order.length - 1; i > 1; i--) {
    const j = 1 + rng.int(i);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  order.forEach((i, k) => {
    const left = KIDS - k - 1;
    const check = k < 3 || left === 255 || left === 254 || left <= 2 || k % 97 === 0;
    add(removed(W, [kidHash(i) + 10_000n, kidHash(i)]), check);
    if (i % 3 === 0) add(removed(8n, [kidHash(i)]), check);
    // A root chain with a removed child's tokens hash: its node takes a freed id near the
    // root's (the first takes P + 1, child 0's) under another parent; P must not find it.
    if (k < 40) add(stored(9n + BigInt(k), null, [[77_000n + BigInt(k), kidTok(i)], [78_000n + BigInt(k), P_TOK]]), check);
  });
  return out;
}

const open: ShardedIndexer[] = [];
afterAll(async () => {
  await Promise.all(open.map((ix) => ix.close()));
});

describe('children without sibling links', () => {
  it('a node with 600 children keeps every one through removals, the first child first, and id reuse', () => {
    const tree = new RadixTree({ initialCapacity: 4 });
    const model = new MapRadixTree();
    const qs = lookups();
    for (let k = 0; k < 40; k++) qs.push([kidTok(k)], [kidTok(k), P_TOK]);
    const script = wideScript();
    let checks = 0;
    let maxKids = 0;
    const nodes = tree.nodes;
    for (const { ev, check } of script) {
      expect(tree.applyEvent(ev)).toBe(model.applyEvent(ev));
      maxKids = Math.max(maxKids, nodes.childCount(1));
      if (check) {
        expectSame(tree, model, qs, `after event ${checks}`);
        checks++;
      }
      if (checks === 4 && ev.event.data.type === 'stored') {
        // All children in: the count went past its byte and the dump finds each of them.
        expect(nodes.childCount(1)).toBe(KIDS);
        expect(nodes.manyKidsCount).toBe(1);
        expectDumpReplays(tree, model);
      }
    }
    expect(maxKids).toBe(KIDS);
    expect(nodes.childCount(1)).toBe(0); // every child left: P is a leaf again
    expect(nodes.manyKidsCount).toBe(0);
    expect(checks).toBeGreaterThan(20);
    expectSame(tree, model, qs, 'at the end');
    expectDumpReplays(tree, model);
  });

  it('hollow nodes keep their children and are freed with their hollow ancestors, ids reused', () => {
    const tree = new RadixTree({ initialCapacity: 2 });
    const model = new MapRadixTree();
    const chain = (n: number, salt: bigint): [bigint, bigint][] => Array.from({ length: n }, (_, i) => [salt + BigInt(i), 50n + BigInt(i)]);
    const a = chain(6, 1000n); // W1: 6 blocks
    const qs = [a.map(([, t]) => t), a.slice(0, 3).map(([, t]) => t), [50n, 51n, 99n]];
    const steps: RouterEvent[] = [
      stored(1n, null, a),
      stored(2n, null, a.slice(0, 2)),
      // W2 branches off block 2: its child is not the first, it goes into the edge table.
      stored(2n, a[1]![0], [[3000n, 70n], [3001n, 71n]]),
      removed(1n, [a[2]![0]]), // block 3 hollow: W1 keeps 4..6 below it
      removed(1n, [a[1]![0]]), // block 2 still W2's
      removed(2n, [a[1]![0]]), // block 2 hollow, with two children (3, W2's branch)
      removed(2n, [3001n, 3000n]), // W2's branch goes: block 2 keeps one child
      removed(1n, [a[5]![0], a[4]![0], a[3]![0]]), // block 3's last child: 3 and 2 go with it
      stored(3n, null, [[5000n, 50n], [5001n, 51n], [5002n, 52n]]), // the freed ids again
      stored(1n, a[0]![0], a.slice(1)), // W1 back on the whole chain
    ];
    for (let i = 0; i < steps.length; i++) {
      expect(tree.applyEvent(steps[i]!)).toBe(model.applyEvent(steps[i]!));
      expectSame(tree, model, qs, `step ${i}`);
    }
    expectDumpReplays(tree, model);
  });

  it('through 2 shard threads from tiny capacities: every lookup equals the in-thread tree', async () => {
    const { ix } = await createFaultyIndexer({ shards: 2, blockSize: 16 }, { initialCapacity: 4 });
    open.push(ix);
    const tree = new RadixTree();
    const qs = lookups().filter((_, i) => i % 5 === 0);
    const result: MatchResult = createMatchResult();
    const asScores = (n: number): [string, number][] =>
      Array.from({ length: n }, (_, i): [string, number] => [result.workerIds[i]!.toString(), result.scores[i]!]).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    let checked = 0;
    for (const { ev, check } of wideScript()) {
      ix.applyEvent(ev);
      tree.applyEvent(ev);
      if (!check) continue;
      await ix.flush();
      for (const q of qs) expect(asScores(ix.findMatchesInto(BigUint64Array.from(q), result))).toEqual(sortedScores(tree.findMatches(q)));
      checked++;
    }
    expect(checked).toBeGreaterThan(20);
  });
});
