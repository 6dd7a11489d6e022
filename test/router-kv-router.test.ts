/**
 * KvRouter end to end on real indexers: the decision follows the indexer's overlap and the
 * in-flight loads, the request's lifecycle moves its load, approximate mode remembers its own
 * decisions for their TTL, the predicted side index merges with the event index per worker by
 * the maximum (and never writes into it), replicas share loads through sequence events, and
 * the same decisions come out of an in-thread indexer and 2 shard threads.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import { computeBlockHashes, computeSequenceHashes } from '../src/hash/block-hash.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { KvRouter } from '../src/router/kv-router.js';
import { formatActiveSequenceEvent, parseActiveSequenceEvent, type ActiveSequenceEvent } from '../src/router/sequence-event.js';
import { seededRandom } from '../src/router/random.js';
import { RadixTree } from '../src/tree/radix-tree.js';

const BS = 4;
const A = 0xa000_0000_0000_0001n;
const B = 0xb000_0000_0000_0002n;
const workers = [{ workerId: A, dpRank: 0 }, { workerId: B, dpRank: 0 }];

const tokens = (base: number, blocks: number): Uint32Array => Uint32Array.from({ length: blocks * BS }, (_, i) => base + i);

/** The Stored event an engine would publish for the first `blocks` blocks of `t`. */
function stored(workerId: bigint, t: Uint32Array, blocks: number): RouterEvent {
  const local = computeBlockHashes(t, BS);
  const seq = computeSequenceHashes(local);
  const list = Array.from({ length: blocks }, (_, i) => ({ blockHash: seq[i]!, tokensHash: local[i]! }));
  return { workerId, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: list } } };
}

function code(f: () => unknown): string | undefined {
  try {
    f();
  } catch (err) {
    return (err as KvIndexError).code;
  }
  return undefined;
}

let open: ShardedIndexer[] = [];
afterEach(async () => {
  await Promise.all(open.map((ix) => ix.close()));
  open = [];
});

describe('KvRouter: decisions and lifecycle', () => {
  it('routes to the worker holding the prefix, and records the request with its net prefill', () => {
    const tree = new RadixTree();
    const t = tokens(1, 8);
    tree.applyEvent(stored(B, t, 6));
    const router = new KvRouter({ indexer: tree, blockSize: BS, workers, random: seededRandom(1) });
    const d = router.route(t, { requestId: 'r1' });
    expect(d.workerId).toBe(B);
    expect(d.overlapBlocks).toBe(6);
    expect(d.requiredBlocks).toBe(8);
    expect([...d.overlaps]).toEqual([0, 6]);
    expect([...d.costs]).toEqual([16, 10]); // A: 8 prefill + 8 new blocks; B: 8 - 6 + 8
    expect(router.sequences.load(B)).toEqual({ activePrefillTokens: 8, activeBlocks: 8, activeRequests: 1 });
    expect(router.markPrefillCompleted('r1')).toBe(true);
    expect(router.sequences.load(B).activePrefillTokens).toBe(0);
    expect(router.free('r1')).toBe(true);
    expect(router.sequences.load(B)).toEqual({ activePrefillTokens: 0, activeBlocks: 0, activeRequests: 0 });
    expect(router.free('r1')).toBe(false);
  });

  it('after a long idle the first decision prices no request past its TTL', () => {
    const c = { t: 0 };
    const router = new KvRouter({ indexer: new RadixTree(), blockSize: BS, workers, sequenceTtlMs: 1000, now: () => c.t, random: seededRandom(3) });
    router.route(tokens(1, 8), { requestId: 'old', candidates: [{ workerId: A, dpRank: 0 }] });
    expect(router.sequences.load(A).activeRequests).toBe(1);
    c.t = 5000; // 'old' was never freed (a client gone); it is long past its TTL
    const d = router.route(tokens(500, 8), { requestId: 'new' });
    // Both candidates idle: equal costs. The loads were once read before the add's expiry
    // check, so 'old' still weighed on A in this decision (found by fuzzing).
    expect(Array.from(d.costs)).toEqual([d.costs[0], d.costs[0]]);
    expect(router.sequences.has('old')).toBe(false);
    expect(router.sequences.stats().expired).toBe(1);
  });

  it('in-flight load spreads identical prompts over idle workers when no cache is known', () => {
    for (let seed = 0; seed < 20; seed++) {
      const router = new KvRouter({ indexer: new RadixTree(), blockSize: BS, workers, random: seededRandom(seed) });
      const first = router.route(tokens(1, 8));
      const second = router.route(tokens(1, 8));
      expect(second.workerId).not.toBe(first.workerId);
    }
  });

  it('duplicate ids, no workers and bad tokens are typed errors; a freed id can be reused', () => {
    const router = new KvRouter({ indexer: new RadixTree(), blockSize: BS, workers });
    router.route(tokens(1, 2), { requestId: 'x' });
    expect(code(() => router.route(tokens(1, 2), { requestId: 'x' }))).toBe(ErrorCode.DuplicateRequest);
    router.free('x');
    expect(router.route(tokens(1, 2), { requestId: 'x' }).requestId).toBe('x');
    // Generated ids skip the ones clients sent: a request without an id was refused as a
    // duplicate of a client's 'kvr-0'.
    router.route(tokens(1, 2), { requestId: 'kvr-0' });
    router.route(tokens(1, 2), { requestId: 'kvr-1' });
    expect(router.route(tokens(1, 2)).requestId).toBe('kvr-2');
    for (const id of ['kvr-0', 'kvr-1', 'kvr-2']) router.free(id);
    expect(code(() => router.route(tokens(1, 2), { candidates: [] }))).toBe(ErrorCode.NoWorkers);
    expect(code(() => new KvRouter({ indexer: new RadixTree(), blockSize: BS }).route(tokens(1, 2)))).toBe(ErrorCode.NoWorkers);
    expect(code(() => router.route([1, -2, 3, 4]))).toBe(ErrorCode.InvalidField);
    expect(code(() => new KvRouter({ indexer: new RadixTree(), blockSize: 0 }))).toBe(ErrorCode.InvalidOption);
    expect(code(() => router.route(tokens(1, 2), { candidates: 'x' as never }))).toBe(ErrorCode.InvalidField);
    expect(code(() => router.route(tokens(1, 2), { candidates: [{ workerId: 5 as never, dpRank: 0 }] }))).toBe(ErrorCode.InvalidField);
    expect(code(() => router.route(tokens(1, 2), { overrides: 5 as never }))).toBe(ErrorCode.InvalidOption);
    expect(code(() => router.route(tokens(1, 2), { expectedOutputTokens: -1 }))).toBe(ErrorCode.InvalidField);
    // Token counts are u32, as replicas parse them: larger ones were recorded here, refused by
    // every replica, and 2^53-1 left a load at -1 once marked.
    expect(code(() => router.route(tokens(1, 2), { expectedOutputTokens: 2 ** 32 }))).toBe(ErrorCode.InvalidField);
    const local = computeBlockHashes(tokens(1, 2), BS);
    expect(code(() => router.routeBlocks(local, 2 ** 32))).toBe(ErrorCode.InvalidField);
    expect(code(() => router.routeBlocks(local, Number.MAX_SAFE_INTEGER))).toBe(ErrorCode.InvalidField);
    expect(code(() => router.route(null as never))).toBe(ErrorCode.InvalidField);
    expect(router.sequences.size).toBe(1); // only 'x': nothing of the failed calls was recorded
    const events: ActiveSequenceEvent[] = [];
    const edge = new KvRouter({ indexer: new RadixTree(), blockSize: BS, workers, onSequenceEvent: (e) => events.push(e) });
    edge.routeBlocks(local, 2 ** 32 - 1, { expectedOutputTokens: 2 ** 32 - 1, requestId: 'max' });
    const replica = new KvRouter({ indexer: new RadixTree(), blockSize: BS, workers });
    expect(replica.sequences.applyEvent(parseActiveSequenceEvent(formatActiveSequenceEvent(events[0]!)))).toBe(true);
    expect(replica.sequences.load(events[0]!.workerId)).toEqual(edge.sequences.load(events[0]!.workerId));
  });

  it('routeBlocks on hashes computed by the caller decides as route on the tokens', () => {
    const tree = new RadixTree();
    tree.applyEvent(stored(A, tokens(1, 8), 5));
    const r1 = new KvRouter({ indexer: tree, blockSize: BS, workers, random: seededRandom(2) });
    const r2 = new KvRouter({ indexer: tree, blockSize: BS, workers, random: seededRandom(2) });
    for (const t of [tokens(1, 8), tokens(1, 3), Uint32Array.from([...tokens(1, 6), 99, 98])]) {
      const a = r1.route(t);
      const b = r2.routeBlocks(computeBlockHashes(t, BS), t.length);
      expect([b.workerId, b.overlapBlocks, [...b.costs]]).toEqual([a.workerId, a.overlapBlocks, [...a.costs]]);
    }
    expect(code(() => r2.routeBlocks(computeBlockHashes(tokens(1, 4), BS), 15))).toBe(ErrorCode.InvalidField);
  });

  it('a per-request temperature override samples instead of taking the minimum', () => {
    const tree = new RadixTree();
    const t = tokens(1, 8);
    tree.applyEvent(stored(B, t, 8));
    const router = new KvRouter({ indexer: tree, blockSize: BS, workers, random: seededRandom(3) });
    const picks = new Set<bigint>();
    for (let i = 0; i < 200; i++) {
      const d = router.route(t, { overrides: { temperature: 10 } });
      picks.add(d.workerId);
      router.free(d.requestId);
    }
    expect(picks.size).toBe(2);
    const d = router.route(t);
    expect(d.workerId).toBe(B); // temperature 0 again
  });

  it("replicas share loads: router 2 applies router 1's events and avoids its busy worker", () => {
    const tree = new RadixTree();
    const r2 = new KvRouter({ indexer: tree, blockSize: BS, workers, routerId: 2n });
    const r1 = new KvRouter({
      indexer: tree, blockSize: BS, workers, routerId: 1n,
      onSequenceEvent: (e) => r2.sequences.applyEvent(e),
    });
    const first = r1.route(tokens(1, 8), { requestId: 'a' });
    expect(r2.sequences.load(first.workerId).activeRequests).toBe(1);
    const second = r2.route(tokens(1, 8), { requestId: 'b' });
    expect(second.workerId).not.toBe(first.workerId);
    r1.free('a');
    expect(r2.sequences.load(first.workerId).activeRequests).toBe(0);
  });
});

describe('KvRouter: approximate and predicted indexes', () => {
  it('approximate mode: a decision makes the next identical prompt a hit, until the 120 s TTL', () => {
    const clock = { t: 0 };
    const tree = new RadixTree();
    const router = new KvRouter({ indexer: tree, blockSize: BS, workers, approximate: true, now: () => clock.t, random: seededRandom(4) });
    const t = tokens(1, 8);
    const first = router.route(t);
    expect(first.overlapBlocks).toBe(0);
    router.free(first.requestId);
    clock.t = 119_000;
    const second = router.route(t);
    expect(second.workerId).toBe(first.workerId);
    expect(second.overlapBlocks).toBe(8);
    router.free(second.requestId);
    clock.t = 119_000 + 120_000;
    const third = router.route(tokens(1000, 1)); // any decision expires what is due
    router.free(third.requestId);
    expect(tree.findMatches(computeBlockHashes(t, BS)).scores.size).toBe(0);
  });

  it('approximate mode: removeWorker takes the worker\'s routed blocks out of the index, statuses ok', () => {
    const clock = { t: 0 };
    const tree = new RadixTree();
    const statuses: string[] = [];
    const indexer = {
      findMatchesInto: tree.findMatchesInto.bind(tree),
      applyEvent: (e: RouterEvent) => statuses.push(tree.applyEvent(e)),
    };
    const router = new KvRouter({ indexer, blockSize: BS, workers, approximate: true, approximateTtlMs: 1000, now: () => clock.t, random: seededRandom(4) });
    const t = tokens(1, 4);
    const d = router.route(t, { requestId: 'a' });
    router.route(tokens(1, 2), { requestId: 'b', candidates: [{ workerId: d.workerId, dpRank: 0 }] }); // a prefix again
    expect(tree.blockCount(d.workerId)).toBe(4);
    router.removeWorker(d.workerId);
    // Gone at once, deepest first (no block_not_found); they once stayed for good, and a
    // re-added worker got overlap from decisions many TTLs old.
    expect(tree.blockCount(d.workerId)).toBe(0);
    expect(statuses).toEqual(['ok', 'ok', 'ok']);
    clock.t = 10_000;
    router.addWorker(d.workerId);
    expect(router.route(t, { requestId: 'c' }).overlapBlocks).toBe(0);
  });

  it('predicted index: a sibling follows its first request before any Stored event; it expires after its TTL', () => {
    const clock = { t: 0 };
    const tree = new RadixTree();
    const router = new KvRouter({ indexer: tree, blockSize: BS, workers, predictedTtlMs: 5_000, now: () => clock.t, random: seededRandom(5) });
    const parent = tokens(1, 8);
    const first = router.route(parent);
    router.free(first.requestId);
    const sibling = Uint32Array.from([...parent, ...tokens(500, 2)]);
    for (let i = 0; i < 10; i++) {
      const d = router.route(sibling);
      expect(d.workerId).toBe(first.workerId);
      expect(d.overlapBlocks).toBeGreaterThanOrEqual(8);
      router.free(d.requestId);
    }
    expect(tree.size).toBe(0); // router hashes never reach the event index
    clock.t = 60_000; // every prediction is past its 5 s TTL
    const late = router.route(tokens(900, 1));
    router.free(late.requestId);
    const after = router.route(sibling);
    expect(after.overlapBlocks).toBe(0);
  });

  it('without the predicted index the same sibling is a coin toss', () => {
    const seen = new Set<boolean>();
    for (let seed = 0; seed < 20; seed++) {
      const router = new KvRouter({ indexer: new RadixTree(), blockSize: BS, workers, random: seededRandom(seed) });
      const first = router.route(tokens(1, 8));
      router.free(first.requestId);
      seen.add(router.route(tokens(1, 10)).workerId === first.workerId);
    }
    expect([...seen].sort()).toEqual([false, true]);
  });

  it('predicted and event overlaps merge per worker by the maximum', () => {
    const tree = new RadixTree();
    const router = new KvRouter({ indexer: tree, blockSize: BS, workers, predictedTtlMs: 5_000, now: () => 0, random: seededRandom(6) });
    const t = tokens(1, 8);
    const first = router.route(t);
    router.free(first.requestId);
    const other = first.workerId === A ? B : A;
    tree.applyEvent(stored(other, t, 3));
    tree.applyEvent(stored(first.workerId, t, 2)); // below its predicted 8: the 8 stands
    const d = router.route(t);
    const at = (w: bigint): number => d.overlaps[workers.findIndex((c) => c.workerId === w)]!;
    expect(at(first.workerId)).toBe(8);
    expect(at(other)).toBe(3);
  });

  it('predictedTtlMs with approximate mode is rejected', () => {
    expect(code(() => new KvRouter({ indexer: new RadixTree(), blockSize: BS, approximate: true, predictedTtlMs: 5_000 }))).toBe(ErrorCode.InvalidOption);
  });
});

describe('KvRouter: through shard threads', () => {
  it('approximate mode over 2 shards: the decision reaches the shards and the next identical prompt hits', async () => {
    const clock = { t: 0 };
    const ix = await ShardedIndexer.create({ shards: 2, blockSize: BS });
    open.push(ix);
    const router = new KvRouter({ indexer: ix, blockSize: BS, workers, approximate: true, now: () => clock.t, random: seededRandom(8) });
    const t = tokens(1, 8);
    const first = router.route(t);
    router.free(first.requestId);
    const second = router.route(t);
    expect(second.workerId).toBe(first.workerId);
    expect(second.overlapBlocks).toBe(8);
    router.free(second.requestId);
    clock.t = 200_000;
    router.free(router.route(tokens(5000, 1)).requestId); // expires the 8 blocks
    await ix.flush();
    expect((await ix.stats()).reduce((n, s) => n + s.pairs, 0)).toBe(1); // only the last prompt's block
  });

  it('2 shards give the decisions of an in-thread indexer on the same events', async () => {
    const local = await ShardedIndexer.create({ shards: 0, blockSize: BS });
    const sharded = await ShardedIndexer.create({ shards: 2, blockSize: BS });
    open.push(local, sharded);
    const ids = [A, B, 0xc000_0000_0000_0003n, 0xd000_0000_0000_0004n];
    const cands = ids.map((workerId) => ({ workerId, dpRank: 0 }));
    const prompts = Array.from({ length: 40 }, (_, i) => tokens(1 + (i % 5) * 1000, 2 + (i % 7)));
    for (let i = 0; i < prompts.length; i += 3) {
      const e = stored(ids[i % 4]!, prompts[i]!, 1 + (i % 3));
      local.applyEvent(e);
      sharded.applyEvent(e);
    }
    const r1 = new KvRouter({ indexer: local, blockSize: BS, workers: cands, random: seededRandom(9) });
    const r2 = new KvRouter({ indexer: sharded, blockSize: BS, workers: cands, random: seededRandom(9) });
    for (const p of prompts) {
      const a = r1.route(p);
      const b = r2.route(p);
      expect(b.workerId).toBe(a.workerId);
      expect([...b.overlaps]).toEqual([...a.overlaps]);
      expect([...b.costs]).toEqual([...a.costs]);
    }
  });
});
