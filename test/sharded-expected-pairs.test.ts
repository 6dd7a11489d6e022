import { describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';

/** `workers` workers, each storing `chains` chains of `len` blocks under one shared prompt. */
function fleetEvents(workers: number, chains: number, len: number): { events: RouterEvent[]; probes: bigint[][] } {
  const events: RouterEvent[] = [];
  const probes: bigint[][] = [];
  const prompt = Array.from({ length: 8 }, (_, i) => ({ blockHash: 0x7000_0000_0000n + BigInt(i), tokensHash: 0x5000_0000_0000n + BigInt(i) }));
  for (let w = 0; w < workers; w++) {
    const workerId = 0xffff_ffff_0000_0000n + BigInt(w); // above 2^53: must not pass through a number
    let eventId = 0n;
    events.push({ workerId, event: { eventId: eventId++, data: { type: 'stored', parentHash: null, blocks: prompt } } });
    for (let c = 0; c < chains; c++) {
      const blocks = Array.from({ length: len }, (_, i) => {
        const h = (BigInt(w) << 40n) | (BigInt(c) << 20n) | BigInt(i + 1);
        return { blockHash: h, tokensHash: h ^ 0x1234_5678n };
      });
      events.push({ workerId, event: { eventId: eventId++, data: { type: 'stored', parentHash: prompt[7]!.blockHash, blocks } } });
      if (c === 0) probes.push([...prompt.map((b) => b.tokensHash), ...blocks.map((b) => b.tokensHash)]);
    }
    // Evict half of the last chain: removals must free nodes of the presized arrays too.
    const last = events[events.length - 1]!.event.data;
    if (last.type === 'stored') {
      events.push({ workerId, event: { eventId: eventId++, data: { type: 'removed', blockHashes: last.blocks.slice(len / 2).map((b) => b.blockHash) } } });
    }
  }
  return { events, probes };
}

const treeBytes = async (ix: ShardedIndexer): Promise<number> => (await ix.stats()).reduce((k, s) => k + s.bytes, 0);

describe('ShardedIndexer expectedPairs (capacity hint)', () => {
  for (const shards of [0, 2]) {
    it(`sizes the trees at create() (shards ${shards}): more bytes before the first event, none of them pairs`, async () => {
      const plain = await ShardedIndexer.create({ shards, blockSize: 16 });
      const hinted = await ShardedIndexer.create({ shards, blockSize: 16, expectedPairs: 200_000 });
      try {
        const [p, h] = [await treeBytes(plain), await treeBytes(hinted)];
        // 200,000 node slots of at least 20 bytes (record + parent) beyond the default 1,024.
        expect(h - p).toBeGreaterThan(200_000 * 20 - 1024 * 40);
        for (const s of await hinted.stats()) {
          expect(s.pairs).toBe(0);
          expect(s.nodes).toBe(1); // the root
        }
      } finally {
        await Promise.all([plain.close(), hinted.close()]);
      }
    });

    it(`answers as an unhinted indexer does, with more pairs than hinted (shards ${shards})`, async () => {
      const { events, probes } = fleetEvents(12, 6, 64);
      const plain = await ShardedIndexer.create({ shards, blockSize: 16 });
      // A hint far below the ~4,000 pairs stored: the arrays grow past it as without one.
      const hinted = await ShardedIndexer.create({ shards, blockSize: 16, expectedPairs: 500 });
      try {
        for (const ix of [plain, hinted]) {
          for (const e of events) ix.applyEvent(e);
          await ix.flush();
        }
        const pairs = async (ix: ShardedIndexer): Promise<number> => (await ix.stats()).reduce((k, s) => k + s.pairs, 0);
        expect(await pairs(hinted)).toBe(12 * (8 + 5 * 64 + 32));
        expect(await pairs(hinted)).toBe(await pairs(plain));
        for (const [w, probe] of probes.entries()) {
          const seq = BigUint64Array.from(probe);
          const got = hinted.findMatchesSync(seq).scores;
          expect(got).toEqual(plain.findMatchesSync(seq).scores);
          // Every worker holds the prompt; only worker w its first chain too.
          expect(got.size).toBe(12);
          expect(got.get(0xffff_ffff_0000_0000n + BigInt(w))).toBe(8 + 64);
          expect(got.get(0xffff_ffff_0000_0000n + BigInt((w + 1) % 12))).toBe(8);
        }
        expect(await hinted.dumpSnapshot('bincode')).toEqual(await plain.dumpSnapshot('bincode'));
      } finally {
        await Promise.all([plain.close(), hinted.close()]);
      }
    });
  }

  it('refuses a hint that is not an integer 0..2^28-2', async () => {
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 28, '10' as never]) {
      await expect(ShardedIndexer.create({ shards: 0, blockSize: 16, expectedPairs: bad })).rejects.toMatchObject({ code: 'KVX_INVALID_OPTION' });
    }
  });
});
