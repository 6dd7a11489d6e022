import { describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { warmUpShard } from '../src/shard/thread/warm-up.js';
import { FleetWorkload, type FleetLookup } from '../src/trace/fleet-workload.js';
import { readTraceFile } from '../src/trace/mooncake.js';

/** A small fleet's events and lookups (kvindex fleet: 8 engines x 128 blocks, with evictions). */
async function smallFleet(): Promise<{ events: RouterEvent[]; lookups: FleetLookup[] }> {
  const { requests } = await readTraceFile(new URL('../data/conversation_trace_head.jsonl', import.meta.url).pathname, 200);
  const fleet = new FleetWorkload(requests, { engines: 8, blocksPerEngine: 128, subBlocks: 2, seed: 9n });
  const ids = fleet.config.workerIds;
  const events: RouterEvent[] = [];
  const eventIds = ids.map(() => 0n);
  const u64 = (lo: number, hi: number): bigint => (BigInt(hi) << 32n) | BigInt(lo);
  while (
    fleet.step({
      removed(e, _id, hashes) {
        const blockHashes: bigint[] = [];
        for (let i = 0; i < hashes.length; i += 2) blockHashes.push(u64(hashes[i]!, hashes[i + 1]!));
        events.push({ workerId: ids[e]!, event: { eventId: eventIds[e]!++, data: { type: 'removed', blockHashes } } });
      },
      stored(e, _id, seq, local, from, to) {
        const blocks = [];
        for (let i = from; i < to; i++) blocks.push({ blockHash: seq[i]!, tokensHash: local[i]! });
        events.push({ workerId: ids[e]!, event: { eventId: eventIds[e]!++, data: { type: 'stored', parentHash: from === 0 ? null : seq[from - 1]!, blocks } } });
      },
    })
  );
  const lookups: FleetLookup[] = [];
  fleet.lookups(30, (l) => lookups.push(l));
  return { events, lookups };
}

describe('shard warm-up', () => {
  it('applies its synthetic fleet cleanly and leaves its throwaway tree empty', () => {
    const r = warmUpShard({ shard: 0, expirationMs: null, maxPairs: null, expectedPairs: null, board: null as never, ring: null as never, initialCapacity: null, nice: 0, warmUp: true }, 4);
    expect(r.notOk).toBe(0);
    expect(r.blockOps).toBeGreaterThan(2000);
    expect(r.lookups).toBe(64);
  });

  it('changes no answer and leaves no state in a fresh 2-shard indexer', async () => {
    const { events, lookups } = await smallFleet();
    const warmed = await ShardedIndexer.create({ shards: 2, blockSize: 16, warmUp: true });
    const inThread = await ShardedIndexer.create({ shards: 0, blockSize: 16 });
    try {
      // Nothing of the warm-up is visible before the first event: no worker, pair or count.
      for (const s of await warmed.stats()) {
        expect(s.pairs).toBe(0);
        expect(s.workers).toBe(0);
        expect(s.malformed).toBe(0);
        expect(Object.values(s.events).every((n) => n === 0)).toBe(true);
      }
      for (const ix of [warmed, inThread]) await ix.restore(events);
      const stats = await warmed.stats();
      expect(stats.reduce((k, s) => k + s.pairs, 0)).toBe(8 * 128);
      expect(stats.reduce((k, s) => k + s.workers, 0)).toBe(8);
      expect(stats.reduce((k, s) => k + s.events.ok, 0)).toBe(events.length);
      for (const l of lookups) {
        const want = inThread.findMatchesSync(l.seq).scores;
        expect(warmed.findMatchesSync(l.seq).scores).toEqual(want);
        expect(want.size).toBe(l.expect.size);
      }
      const pairs = (evs: RouterEvent[]): Set<string> => {
        const out = new Set<string>();
        for (const e of evs) if (e.event.data.type === 'stored') for (const b of e.event.data.blocks) out.add(`${e.workerId}:${b.blockHash}`);
        return out;
      };
      expect(pairs(await warmed.dumpEvents())).toEqual(pairs(await inThread.dumpEvents()));
    } finally {
      await Promise.all([warmed.close(), inThread.close()]);
    }
  });

  it('refuses a warmUp option that is not a boolean', async () => {
    await expect(ShardedIndexer.create({ shards: 2, blockSize: 16, warmUp: 'yes' as never })).rejects.toMatchObject({ code: 'KVX_INVALID_OPTION' });
  });
});
