/**
 * The pair budget (`maxPairs`): under a 10x overload of Stored events the tree never holds more
 * pairs than the budget, evicts the least recently stored leaves first (down to 90 %), counts
 * every eviction, and what it keeps scores exactly as an unbudgeted tree from which the evicted
 * pairs were removed by Removed events. Also through `ShardedIndexer` (in-thread and 2 shards).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { sortedScores } from './support/compare.js';

const WORKERS = Array.from({ length: 8 }, (_, i) => 0x9000_0000_0000_0000n + BigInt(i) * 0x1_0000_0001n);

/** Documents of up to 24 blocks sharing prefixes; block j of doc d: tokens hash and a path hash. */
function documents(count: number, seed: number): { tok: bigint[]; ext: bigint[] }[] {
  let x = seed >>> 0 || 1;
  const rand = (n: number): number => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
  const docs: { tok: bigint[]; ext: bigint[] }[] = [];
  let next = 1n;
  for (let d = 0; d < count; d++) {
    const tok: bigint[] = [];
    const ext: bigint[] = [];
    if (d > 0 && rand(3) > 0) {
      const base = docs[rand(d)]!;
      const keep = 1 + rand(Math.min(6, base.tok.length));
      tok.push(...base.tok.slice(0, keep));
      ext.push(...base.ext.slice(0, keep));
    }
    const len = 4 + rand(20);
    while (tok.length < len) {
      tok.push(0x1000_0000_0000_0000n + next);
      ext.push(0xe000_0000_0000_0000n + next);
      next++;
    }
    docs.push({ tok, ext });
  }
  return docs;
}

function stored(workerId: bigint, doc: { tok: bigint[]; ext: bigint[] }, n: number, eventId: number): RouterEvent {
  const blocks = Array.from({ length: n }, (_, i) => ({ blockHash: doc.ext[i]!, tokensHash: doc.tok[i]! }));
  return { workerId, event: { eventId: BigInt(eventId), data: { type: 'stored', parentHash: null, blocks } } };
}

/** The (worker, external hash) pairs a tree holds, from its dump. */
function pairsOf(tree: RadixTree): Set<string> {
  const out = new Set<string>();
  for (const e of tree.dumpEvents()) {
    if (e.event.data.type === 'stored') for (const b of e.event.data.blocks) out.add(`${e.workerId}:${b.blockHash}`);
  }
  return out;
}

/** A burst of Stored events, each a random prefix of a random document by a random worker. */
function burst(count: number, seed: number, docCount = 200): RouterEvent[] {
  const docs = documents(docCount, seed);
  let x = seed * 7 + 1;
  const rand = (n: number): number => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return (x >>> 8) % n;
  };
  return Array.from({ length: count }, (_, i) => {
    const doc = docs[rand(docs.length)]!;
    return stored(WORKERS[rand(WORKERS.length)]!, doc, 1 + rand(doc.tok.length), i);
  });
}

const A = WORKERS[0]!;
const B = WORKERS[1]!;
const C = WORKERS[2]!;

describe('RadixTree maxPairs', () => {
  it('evicts the least recently stored leaves first, down to 90 %, and nothing newer', () => {
    const docs = documents(3, 99).map((d, i) => ({ tok: d.tok.map((t) => t + BigInt(i) * 1000n), ext: d.ext.map((e) => e + BigInt(i) * 1000n) }));
    const tree = new RadixTree({ maxPairs: 10 });
    tree.applyEvent(stored(A, docs[0]!, 4, 0));
    tree.applyEvent(stored(B, docs[1]!, 4, 1));
    expect(tree.evicted).toBe(0);
    tree.applyEvent(stored(C, docs[2]!, 3, 2)); // 11 pairs: evict 2, to 9
    expect(tree.size).toBe(9);
    expect(tree.evicted).toBe(2);
    const score = (w: bigint, d: number): number => tree.findMatches(docs[d]!.tok).scores.get(w) ?? 0;
    expect(score(A, 0)).toBe(2); // A's two deepest blocks went
    expect(score(B, 1)).toBe(4);
    expect(score(C, 2)).toBe(3);
  });

  it('storing a chain again makes it recent: the other chain goes first', () => {
    const docs = documents(3, 98).map((d, i) => ({ tok: d.tok.map((t) => t + BigInt(i) * 1000n), ext: d.ext.map((e) => e + BigInt(i) * 1000n) }));
    const tree = new RadixTree({ maxPairs: 10 });
    tree.applyEvent(stored(A, docs[0]!, 4, 0));
    tree.applyEvent(stored(B, docs[1]!, 4, 1));
    tree.applyEvent(stored(A, docs[0]!, 4, 2)); // re-stored: now the most recent
    tree.applyEvent(stored(C, docs[2]!, 3, 3));
    expect(tree.findMatches(docs[0]!.tok).scores.get(A)).toBe(4);
    expect(tree.findMatches(docs[1]!.tok).scores.get(B)).toBe(2);
  });

  it('a leaf held by two workers is evicted for both, counted twice', () => {
    const doc = documents(1, 97)[0]!;
    const other = { tok: doc.tok.map((t) => t + 5000n), ext: doc.ext.map((e) => e + 5000n) };
    const tree = new RadixTree({ maxPairs: 8, lowWaterRatio: 0.5 });
    tree.applyEvent(stored(A, doc, 2, 0));
    tree.applyEvent(stored(B, doc, 2, 1)); // 4 pairs on 2 nodes
    tree.applyEvent(stored(C, other, 5, 2)); // 9 > 8: down to 4
    expect(tree.size).toBe(4);
    expect(tree.evicted).toBe(5);
    expect(tree.findMatches(doc.tok).scores.size).toBe(0);
    expect(tree.findMatches(other.tok).scores.get(C)).toBe(4);
  });

  it('under a 10x overload never exceeds the budget, and keeps exact scores for what it keeps', () => {
    const budget = 2_000;
    const tree = new RadixTree({ maxPairs: budget });
    const full = new RadixTree(); // the same events, no budget, minus what the budget evicted
    const ever = new RadixTree(); // the same events, no budget: every distinct pair stored
    const events = burst(5_000, 5, 600);
    const docs = documents(600, 5);
    let removedId = 0;
    for (let i = 0; i < events.length; i++) {
      tree.applyEvent(events[i]!);
      full.applyEvent(events[i]!);
      ever.applyEvent(events[i]!);
      expect(tree.size).toBeLessThanOrEqual(budget);
      if (i % 500 !== 499) continue;
      // Remove from the unbudgeted tree every pair the budgeted one evicted, as Removed events.
      const kept = pairsOf(tree);
      for (const pair of pairsOf(full)) {
        if (kept.has(pair)) continue;
        const [w, h] = pair.split(':');
        full.applyEvent({ workerId: BigInt(w!), event: { eventId: BigInt(removedId++), data: { type: 'removed', blockHashes: [BigInt(h!)] } } });
      }
      expect(full.size).toBe(tree.size);
      for (const d of docs) expect(sortedScores(tree.findMatches(d.tok))).toEqual(sortedScores(full.findMatches(d.tok)));
    }
    expect(ever.size).toBeGreaterThanOrEqual(10 * budget); // the overload
    // Every pair stored and not kept was evicted at least once (some were stored again after).
    expect(tree.evicted).toBeGreaterThanOrEqual(ever.size - tree.size);
    expect(tree.evicted).toBeGreaterThanOrEqual(removedId);
  });

  it('counts hollow nodes: a worker that keeps only the last block of each chain holds no more nodes than the budget', () => {
    // Each chain: 50 blocks stored, then the first 49 removed root first, so 49 nodes stay
    // hollow above the one block held. Uncounted, 40 chains would hold 1,960 hollow nodes.
    const budget = 200;
    const tree = new RadixTree({ maxPairs: budget });
    const docs = Array.from({ length: 40 }, (_, d) => {
      const ids = Array.from({ length: 50 }, (_, i) => BigInt(d * 50 + i + 1));
      return { tok: ids.map((i) => 0x2000_0000_0000_0000n + i), ext: ids.map((i) => 0xd000_0000_0000_0000n + i) };
    });
    let eventId = 0;
    let hollowSeen = 0;
    for (const d of docs) {
      expect(tree.applyEvent(stored(A, d, 50, eventId++))).toBe('ok');
      // After a Stored event, nodes (the root aside) fit in the budget: each holds a pair or is hollow.
      expect(tree.nodeCount - 1).toBeLessThanOrEqual(budget);
      const removed: RouterEvent = { workerId: A, event: { eventId: BigInt(eventId++), data: { type: 'removed', blockHashes: d.ext.slice(0, 49) } } };
      expect(tree.applyEvent(removed)).toBe('ok');
      hollowSeen = Math.max(hollowSeen, tree.nodeCount - 1 - tree.size);
    }
    expect(hollowSeen).toBeGreaterThanOrEqual(49);
    expect(tree.evicted).toBeGreaterThan(0);
  });

  it('bad budgets are KVX_INVALID_OPTION', () => {
    for (const o of [{ maxPairs: 0 }, { maxPairs: 1.5 }, { maxPairs: 10, lowWaterRatio: 0 }, { maxPairs: 10, lowWaterRatio: 1.1 }]) {
      let err: unknown = null;
      try {
        new RadixTree(o);
      } catch (e) {
        err = e;
      }
      expect((err as KvIndexError).code, JSON.stringify(o)).toBe(ErrorCode.InvalidOption);
    }
  });
});

let open: ShardedIndexer[] = [];
afterEach(async () => {
  await Promise.all(open.map((ix) => ix.close()));
  open = [];
});

describe('ShardedIndexer maxPairs', () => {
  it('in-thread: the same state as a RadixTree with the budget; evictions in stats()', async () => {
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 16, maxPairs: 1_000 });
    open.push(ix);
    const tree = new RadixTree({ maxPairs: 1_000 });
    for (const e of burst(1_500, 6)) {
      ix.applyEvent(e);
      tree.applyEvent(e);
    }
    const [s] = await ix.stats();
    expect(s!.pairs).toBe(tree.size);
    expect(s!.pairs).toBeLessThanOrEqual(1_000);
    expect(s!.evicted).toBe(tree.evicted);
    expect(s!.evicted).toBeGreaterThan(0);
    for (const d of documents(200, 6)) expect(sortedScores(ix.findMatchesSync(d.tok))).toEqual(sortedScores(tree.findMatches(d.tok)));
  });

  it('2 shards: pairs across shards stay within the budget at every check; evictions are counted', async () => {
    const ix = await ShardedIndexer.create({ shards: 2, blockSize: 16, maxPairs: 1_000 });
    open.push(ix);
    const events = burst(2_000, 7);
    const ever = new RadixTree(); // every distinct pair the stream stores
    for (let i = 0; i < events.length; i++) {
      ix.applyEvent(events[i]!);
      ever.applyEvent(events[i]!);
      if (i % 250 === 249) {
        const stats = await ix.stats();
        expect(stats.reduce((n, s) => n + s.pairs, 0)).toBeLessThanOrEqual(1_000);
      }
    }
    const stats = await ix.stats();
    const pairs = stats.reduce((n, s) => n + s.pairs, 0);
    const evicted = stats.reduce((n, s) => n + s.evicted, 0);
    expect(pairs).toBeLessThanOrEqual(1_000);
    expect(ever.size).toBeGreaterThan(5 * 1_000);
    expect(evicted).toBeGreaterThanOrEqual(ever.size - pairs);
  });

  it('maxPairs below the shard count is rejected', async () => {
    await expect(ShardedIndexer.create({ shards: 4, blockSize: 16, maxPairs: 3 })).rejects.toMatchObject({ code: ErrorCode.InvalidOption });
  });
});
