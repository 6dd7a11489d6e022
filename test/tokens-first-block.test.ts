import { afterEach, describe, expect, it } from 'vitest';

import { ErrorCode } from '../src/errors.js';
import { computeBlockHashes, computeSequenceHashes, type BlockHashOptions } from '../src/hash/block-hash.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { OverlapScores, RouterEvent } from '../src/protocol/types.js';

// Tokens lookups hash their first block alone first and stop when no worker holds it at the
// start of a sequence (sharded-indexer.ts `#missesFirstBlock`). What must hold: every answer
// equals hashing everything and looking the hashes up; the shortcut is taken exactly when
// nothing can score; and with read-your-writes it never answers from a state older than the
// call (an event applied just before the lookup makes the first block match).

const BS = 4;
const LORA: BlockHashOptions = { loraName: 'sql-lora' };

/** Tokens `base .. base + n - 1` as a Uint32Array. */
function tokens(base: number, n: number): Uint32Array {
  return Uint32Array.from({ length: n }, (_, i) => base + i);
}

/** The Stored event an engine with `options` publishes for `toks` (full blocks). */
function stored(worker: bigint, toks: Uint32Array, options?: BlockHashOptions, id = 0n): RouterEvent {
  const local = computeBlockHashes(toks, BS, options);
  const seq = computeSequenceHashes(local);
  return {
    workerId: worker,
    event: { eventId: id, data: { type: 'stored', parentHash: null, blocks: Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash })) } },
  };
}

/** The Removed event for the first block of `toks` (its sequence hash is its tokens hash). */
function removedFirst(worker: bigint, toks: Uint32Array): RouterEvent {
  const first = computeBlockHashes(toks.subarray(0, BS), BS)[0]!;
  return { workerId: worker, event: { eventId: 9n, data: { type: 'removed', blockHashes: [first] } } };
}

const sorted = (r: OverlapScores): Array<[bigint, number]> => [...r.scores].sort((a, b) => (a[0] < b[0] ? -1 : 1));

let indexer: ShardedIndexer | null = null;
afterEach(async () => {
  await indexer?.close();
  indexer = null;
});

const A = tokens(1000, 40); // worker 1 holds its 10 blocks
const B = tokens(5000, 16); // worker 2 holds its 4 blocks
const H = tokens(9000, 8); // worker 3 held 2 blocks, then removed the first: a hollow first node

for (const shards of [0, 1, 2]) {
  describe(`tokens lookups stop at a first block nobody holds (shards: ${shards})`, () => {
    async function start(): Promise<ShardedIndexer> {
      indexer = await ShardedIndexer.create({ shards, blockSize: BS });
      indexer.applyEvents([stored(1n, A), stored(2n, B), stored(4n, A, LORA), stored(3n, H)]);
      indexer.applyEvent(removedFirst(3n, H));
      await indexer.flush();
      return indexer;
    }

    const cases: Array<[string, Uint32Array | number[], BlockHashOptions | undefined, boolean]> = [
      ['a prompt that extends a stored chain', Uint32Array.from([...A.subarray(0, 24), ...tokens(7, 20)]), undefined, false],
      ['a prompt that matches nothing', tokens(77_000, 64), undefined, true],
      ['a prompt whose first block matches and then diverges', Uint32Array.from([...B.subarray(0, 4), ...tokens(3, 12)]), undefined, false],
      ['a prompt whose first node is hollow', H, undefined, true],
      ['a LoRA prompt on the adapter blocks', A, LORA, false],
      ['a LoRA prompt on base-model tokens nobody stored with the adapter', B, LORA, true],
      ['a single block (not cut short: nothing to save)', tokens(77_000, BS), undefined, false],
      ['an array of numbers (not cut short: every value is checked)', Array.from(tokens(77_000, 64)), undefined, false],
      ['fewer tokens than a block', tokens(77_000, BS - 1), undefined, false],
    ];

    for (const [name, toks, options, cut] of cases) {
      it(`${name}: the answer of hashing everything, ${cut ? '' : 'not '}cut short`, async () => {
        const ix = await start();
        const want = sorted(ix.findMatchesSync(computeBlockHashes(toks, BS, options)));
        const before = ix.firstBlockMisses;
        const sync = ix.findMatchesForTokensSync(toks, options);
        const async_ = await ix.findMatchesForTokens(toks, options);
        expect(sorted(sync)).toEqual(want);
        expect(sorted(async_)).toEqual(want);
        expect(sync.frequencies).toEqual([]);
        if (cut) expect(want).toEqual([]);
        // The async call may leave the question open only while a shard lags; here none does.
        expect(ix.firstBlockMisses - before).toBe(cut ? 2 : 0);
      });
    }

    it('answers cut short are fresh objects', async () => {
      const ix = await start();
      const a = ix.findMatchesForTokensSync(tokens(77_000, 64));
      a.scores.set(99n, 1);
      expect(ix.findMatchesForTokensSync(tokens(77_000, 64)).scores.size).toBe(0);
    });

    it('sees an event applied just before the call (read-your-writes): never answers from an older state', async () => {
      const ix = await start();
      for (let round = 0; round < 20; round++) {
        const fresh = tokens(200_000 + round * 1000, 32);
        expect(ix.findMatchesForTokensSync(fresh).scores.size).toBe(0);
        ix.applyEvent(stored(10n + BigInt(round), fresh.subarray(0, 8)));
        // No flush: the event may still be queued or in flight to a shard.
        expect(sorted(ix.findMatchesForTokensSync(fresh))).toEqual([[10n + BigInt(round), 2]]);
        const other = tokens(400_000 + round * 1000, 32);
        ix.applyEvent(stored(50n + BigInt(round), other.subarray(0, 4)));
        expect(sorted(await ix.findMatchesForTokens(other))).toEqual([[50n + BigInt(round), 1]]);
      }
    });

    it('checks the options whole, as hashing everything does', async () => {
      const ix = await start();
      const bad = { blockMmHashes: [null, null, null, [-1n]] } as unknown as BlockHashOptions;
      expect(() => ix.findMatchesForTokensSync(tokens(77_000, 64), bad)).toThrowError(expect.objectContaining({ code: ErrorCode.InvalidOption }));
      expect(() => ix.findMatchesForTokens(tokens(77_000, 64), bad)).toThrowError(expect.objectContaining({ code: ErrorCode.InvalidOption }));
      expect(() => ix.findMatchesForTokensSync(tokens(77_000, 64), { loraName: 7 } as unknown as BlockHashOptions)).toThrowError(
        expect.objectContaining({ code: ErrorCode.InvalidOption }),
      );
      expect(ix.firstBlockMisses).toBe(0);
    });
  });
}

describe('tokens lookups with a frequency trail (expirationMs, in-thread)', () => {
  it('are never cut short: the lookup records the trail', async () => {
    indexer = await ShardedIndexer.create({ shards: 0, blockSize: BS, expirationMs: 60_000 });
    indexer.applyEvent(stored(1n, A));
    const r = indexer.findMatchesForTokensSync(tokens(77_000, 64));
    expect(r.scores.size).toBe(0);
    expect(sorted(indexer.findMatchesForTokensSync(A))).toEqual([[1n, 10]]);
    expect(indexer.firstBlockMisses).toBe(0);
  });
});
