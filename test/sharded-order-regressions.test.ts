/**
 * Named regressions of the ordering contract, each once reproducible in a few lines:
 * - a dump included events applied after it was called (the bincode dump awaited the previous
 *   dump before queuing its request);
 * - `removeWorker` was overtaken by a JSON event still queued, leaving the worker's blocks in
 *   its old shard for good;
 * - a malformed event claimed a shard for its worker;
 * - a lookup's reply slot could be completed by a late reply to an abandoned lookup.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import { decodeSnapshot } from '../src/protocol/snapshot-reader.js';
import type { RouterEvent, SnapshotEncoding } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { ReplyBoard } from '../src/shard/main/reply-board.js';
import { ReplyWriter } from '../src/shard/thread/reply-writer.js';
import { dumpTuples } from './support/compare.js';

const W1 = 0x694d99badb9f7c07n;
const W2 = W1 + 1n;
const ENCODINGS: SnapshotEncoding[] = ['bincode', 'bincode-dp', 'jsonl'];

function chain(workerId: bigint, n: number, salt: bigint, parent: bigint | null = null): RouterEvent {
  const blocks = Array.from({ length: n }, (_, i) => ({
    blockHash: 0xf000_0000_0000_0000n + salt * 1000n + BigInt(i),
    tokensHash: 0xe000_0000_0000_0000n + salt * 1000n + BigInt(i),
  }));
  return { workerId, event: { eventId: 0n, data: { type: 'stored', parentHash: parent, blocks } } };
}
const enc = (e: RouterEvent): Uint8Array => new TextEncoder().encode(formatRouterEvent(e));
const blocksOf = (events: RouterEvent[]): string[] => dumpTuples(events);

let open: ShardedIndexer[] = [];
async function make(shards: number): Promise<ShardedIndexer> {
  const ix = await ShardedIndexer.create({ shards, blockSize: 4 });
  open.push(ix);
  return ix;
}
afterEach(async () => {
  await Promise.all(open.map((ix) => ix.close()));
  open = [];
});

describe('a dump sees exactly the events applied before it', () => {
  for (const shards of [0, 1, 2]) {
    it.each(ENCODINGS)(`dumpSnapshot(%s) excludes an event applied after the call (shards: ${shards})`, async (encoding) => {
      const ix = await make(shards);
      const e1 = chain(W1, 3, 1n);
      const e2 = chain(W2, 2, 2n);
      ix.applyEvent(e1);
      const earlier = ix.dumpSnapshot(encoding); // a dump already in flight when ours is called
      const p = ix.dumpSnapshot(encoding);
      ix.applyEvent(e2);
      const later = ix.dumpSnapshot(encoding);
      expect(blocksOf(decodeSnapshot(await p, encoding))).toEqual(blocksOf([e1]));
      expect(blocksOf(decodeSnapshot(await earlier, encoding))).toEqual(blocksOf([e1]));
      expect(blocksOf(decodeSnapshot(await later, encoding))).toEqual(blocksOf([e1, e2]));
    });
  }

  it.each([0, 2])('dumpEvents excludes events applied after the call, through every ingestion path (shards: %i)', async (shards) => {
    const ix = await make(shards);
    const e1 = chain(W1, 3, 1n);
    ix.applyEvent(e1);
    const first = ix.dumpEvents();
    const p = ix.dumpEvents();
    ix.applyEventJson(enc(chain(W1, 1, 3n, 0xf000_0000_0000_0000n + 1002n)));
    ix.applyEventJsonOnCaller(enc(chain(W2, 2, 2n)));
    ix.applyEvent({ workerId: W1, event: { eventId: 9n, data: { type: 'cleared' } } });
    expect(blocksOf(await p)).toEqual(blocksOf([e1]));
    expect(blocksOf(await first)).toEqual(blocksOf([e1]));
    expect(blocksOf(await ix.dumpEvents())).toEqual(blocksOf([chain(W2, 2, 2n)]));
  });
});

describe('removeWorker is not overtaken by queued events', () => {
  it.each([1, 2, 3])('a JSON event queued before removeWorker is removed with the worker (shards: %i)', async (shards) => {
    const ix = await make(shards);
    ix.applyEvent(chain(W1, 2, 1n)); // W1 claims a shard; its next JSON event is parsed there
    ix.applyEventJson(enc(chain(W1, 3, 2n)));
    await ix.removeWorker(W1);
    expect(await ix.dumpEvents()).toEqual([]);
    expect((await ix.stats()).reduce((n, s) => n + s.workers + s.pairs, 0)).toBe(0);
  });

  it('a returning worker lives in one shard, and lookups keep working', async () => {
    const ix = await make(2);
    ix.applyEvent(chain(W2, 1, 9n)); // shard 0
    ix.applyEvent(chain(W1, 2, 1n)); // shard 1
    ix.applyEventJson(enc(chain(W1, 3, 2n)));
    await ix.removeWorker(W1);
    ix.applyEvent(chain(W1 + 5n, 1, 7n)); // takes shard 1 back: W1's old shard is now busier
    ix.applyEvent(chain(W1, 4, 3n)); // W1 returns, assigned afresh
    const stats = await ix.stats();
    expect(stats.map((s) => s.workers).sort()).toEqual([1, 2]);
    expect(stats.reduce((n, s) => n + s.pairs, 0)).toBe(1 + 1 + 4);
    const tokens = Array.from({ length: 4 }, (_, i) => 0xe000_0000_0000_0000n + 3000n + BigInt(i));
    expect((await ix.findMatches(tokens)).scores).toEqual(new Map([[W1, 4]]));
  });
});

describe('a malformed event claims no shard', () => {
  it('applyEvent validates a new worker\'s event before assigning it a shard', async () => {
    const ix = await make(2);
    const bad = chain(W1, 2, 1n);
    (bad.event.data as { blocks: { blockHash: bigint }[] }).blocks[1]!.blockHash = -1n;
    expect(() => ix.applyEvent(bad)).toThrow(/block_hash/);
    // Unclaimed, shard 0 takes W2 and shard 1 the next worker; had W1 claimed shard 0, W2
    // would go to shard 1 and the next worker to shard 0.
    ix.applyEvent(chain(W2, 1, 2n));
    ix.applyEvent(chain(W2 + 1n, 3, 3n));
    expect((await ix.stats()).map((s) => s.pairs)).toEqual([1, 3]);
  });
});

describe('reply slots', () => {
  it('a late reply to an abandoned lookup does not complete the next lookup in its slot', async () => {
    const board = new ReplyBoard(2);
    const shard0 = new ReplyWriter(board.shape, 0);
    const shard1 = new ReplyWriter(board.shape, 1);
    const words = new Uint32Array([1, 0]);
    const slot = board.open(words, 1, false);
    const abandoned = shard0.request(slot).generation;
    shard0.write(slot, abandoned, new Map([[W1, 1]]), []);
    board.release(slot); // the caller gave up (a shard failed, the indexer closed)
    const again = board.open(words, 1, false);
    expect(again).toBe(slot); // the slot is reused at once
    shard1.write(slot, abandoned, new Map([[W2, 1]]), []); // late: the old generation
    let done = false;
    const waiting = board.wait(slot, () => false).then(() => (done = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(done).toBe(false); // two old replies would have completed it
    const current = shard0.request(slot).generation;
    shard0.write(slot, current, new Map([[W1, 2]]), []);
    shard1.write(slot, current, new Map([[W2, 3]]), []);
    await waiting;
    const replies = board.read(slot);
    expect(Array.isArray(replies) && replies.map((r) => Array.from(r.triples))).toEqual([
      [Number(W1 & 0xffffffffn), Number(W1 >> 32n), 2],
      [Number(W2 & 0xffffffffn), Number(W2 >> 32n), 3],
    ]);
  });
});
