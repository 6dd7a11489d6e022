/**
 * src/tree/bulk-load.ts against the event path: a random stream of Stored, Removed and Cleared
 * events (u64 values across the whole range) encoded as bincode and loaded with `loadBincode`
 * leaves a tree that dumps exactly what `applyEvent` of the same events leaves, with the same
 * statuses counted; `checkBincode` counts the same and changes nothing on bad bytes. The
 * indexer's `restoreSnapshot` (src/indexer/snapshot-restore.ts), in-thread and with 2 shard
 * threads, leaves what `restore` of the decoded events leaves, and nothing for bad bytes.
 */
import { describe, expect, it } from 'vitest';
import { SnapshotDecodeError } from '../src/errors.js';
import { encodeSnapshot } from '../src/protocol/snapshot-writer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { checkBincode, loadBincode } from '../src/tree/bulk-load.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { xorshift32 } from './support/rng.js';

/** Events of 3 workers over a small token alphabet, so chains share prefixes and branch. */
function stream(seed: number, n: number): RouterEvent[] {
  const r = xorshift32(seed);
  const workers = [0n, 2n ** 64n - 1n, 9007199254740993n];
  const held = workers.map(() => [] as bigint[]);
  const out: RouterEvent[] = [];
  for (let i = 0; i < n; i++) {
    const w = r() % 3;
    const mine = held[w]!;
    const pick = r() % 10;
    let data: RouterEvent['event']['data'];
    if (pick < 6 || mine.length === 0) {
      const parent = mine.length > 0 && r() % 2 === 0 ? mine[r() % mine.length]! : null;
      const len = 1 + (r() % 70); // past the scratch's first size in words only when long
      const blocks = Array.from({ length: len }, () => {
        const h = (BigInt(r()) << 32n) | BigInt(r());
        mine.push(h);
        return { blockHash: h, tokensHash: BigInt(r() % 5) * 0x1_0000_0001n + (1n << 63n) };
      });
      data = { type: 'stored', parentHash: parent, blocks };
    } else if (pick < 9) {
      data = { type: 'removed', blockHashes: Array.from({ length: 1 + (r() % 4) }, () => mine[r() % mine.length]!) };
    } else {
      data = { type: 'cleared' };
      mine.length = 0;
    }
    out.push({ workerId: workers[w]!, event: { eventId: BigInt(i), data } });
  }
  return out;
}

describe('bulk load of a bincode snapshot', () => {
  it('leaves the tree the event path leaves, on random streams', () => {
    for (let seed = 1; seed <= 3; seed++) {
      const events = stream(seed, 300);
      const slow = new RadixTree();
      let rejected = 0;
      for (const e of events) if (slow.applyEvent(e) !== 'ok') rejected++;
      const bytes = encodeSnapshot(events);
      const fast = new RadixTree();
      const report = loadBincode(fast, bytes);
      const stored = events.reduce((n, e) => n + (e.event.data.type === 'stored' ? e.event.data.blocks.length : 0), 0);
      expect(report).toEqual({ events: events.length, storedBlocks: stored, rejected });
      expect(checkBincode(bytes)).toEqual({ events: events.length, storedBlocks: stored });
      expect(fast.size).toBe(slow.size);
      expect(fast.dumpEvents()).toEqual(slow.dumpEvents());
    }
  });

  it('reads bincode-dp too (the rank field is skipped)', () => {
    const events = stream(7, 100).map((e) => ({ workerId: e.workerId, event: { ...e.event, dpRank: 3 } }));
    const a = new RadixTree();
    const b = new RadixTree();
    loadBincode(a, encodeSnapshot(events, 'bincode'));
    loadBincode(b, encodeSnapshot(events, 'bincode-dp'), true);
    expect(b.dumpEvents()).toEqual(a.dumpEvents());
  });

  it('checkBincode rejects every cut of a snapshot with a typed error', () => {
    const bytes = encodeSnapshot(stream(3, 20));
    for (let cut = 0; cut < bytes.length; cut += 7) {
      expect(() => checkBincode(bytes.subarray(0, cut))).toThrow(SnapshotDecodeError);
    }
    const extra = new Uint8Array(bytes.length + 1);
    extra.set(bytes);
    expect(() => checkBincode(extra)).toThrow(/trailing/);
  });

  it('ShardedIndexer.restoreSnapshot equals restore of the decoded events, shards 0 and 2; bad bytes apply nothing', async () => {
    const events = stream(11, 300);
    const bytes = encodeSnapshot(events);
    for (const shards of [0, 2]) {
      const a = await ShardedIndexer.create({ shards, blockSize: 4 });
      const b = await ShardedIndexer.create({ shards, blockSize: 4 });
      try {
        await a.restore(events);
        const summary = await b.restoreSnapshot(bytes);
        expect(summary.events).toBe(events.length);
        expect(await b.dumpEvents()).toEqual(await a.dumpEvents());
        // Bad bytes, into the indexer that holds the snapshot: nothing changes.
        await expect(b.restoreSnapshot(bytes.subarray(0, bytes.length - 3))).rejects.toThrow(SnapshotDecodeError);
        await expect(b.restoreSnapshot(encodeSnapshot([{ workerId: 5n, event: { eventId: 0n, data: { type: 'cleared' } } }]).subarray(0, 20))).rejects.toThrow(SnapshotDecodeError);
        expect(await b.dumpEvents()).toEqual(await a.dumpEvents());
      } finally {
        await a.close();
        await b.close();
      }
    }
  });
});
