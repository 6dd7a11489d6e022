import { afterEach, describe, expect, it } from 'vitest';

import { ErrorCode } from '../src/errors.js';
import { computeBlockHashes, firstBlockHashInto, type BlockHashOptions } from '../src/hash/block-hash.js';
import { CutGate, MIN_SHARE, SAMPLE } from '../src/indexer/cut-gate.js';
import { CUT_MIN_TOKENS, ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { sortedEntries, storedTokens, tokenRange } from './support/token-events.js';

// Tokens lookups of CUT_MIN_TOKENS or more hash their first block alone first and stop when no
// worker holds it at the start of a sequence (src/indexer/tokens-cut.ts), while the recent
// checks found unheld first blocks often enough (cut-gate.ts). What must hold: every answer
// equals hashing everything and looking the hashes up; the shortcut is taken exactly when
// nothing can score; and with read-your-writes it never answers from a state older than the
// call (an event applied just before the lookup makes the first block match).

const BS = 4;
const LORA: BlockHashOptions = { loraName: 'sql-lora' };

const tokens = tokenRange;
const stored = (worker: bigint, toks: Uint32Array, options?: BlockHashOptions, id = 0n): RouterEvent => storedTokens(worker, toks, BS, options, id);

/** The Removed event for the first block of `toks` (its sequence hash is its tokens hash). */
function removedFirst(worker: bigint, toks: Uint32Array): RouterEvent {
  const first = computeBlockHashes(toks.subarray(0, BS), BS)[0]!;
  return { workerId: worker, event: { eventId: 9n, data: { type: 'removed', blockHashes: [first] } } };
}

const sorted = sortedEntries;

let indexer: ShardedIndexer | null = null;
afterEach(async () => {
  await indexer?.close();
  indexer = null;
});

const LONG = CUT_MIN_TOKENS + 6; // a partial block at the end
const A = tokens(1000, LONG); // worker 1 holds its first 10 blocks
const B = tokens(500_000, LONG); // worker 2 holds its first 4 blocks
const H = tokens(900_000, LONG); // worker 3 held 2 blocks, then removed the first: a hollow first node
const NONE = tokens(77_000_000, LONG); // nobody holds any of it

for (const shards of [0, 1, 2]) {
  describe(`tokens lookups stop at a first block nobody holds (shards: ${shards})`, () => {
    async function start(): Promise<ShardedIndexer> {
      indexer = await ShardedIndexer.create({ shards, blockSize: BS });
      indexer.applyEvents([stored(1n, A.subarray(0, 40)), stored(2n, B.subarray(0, 16)), stored(4n, A.subarray(0, 40), LORA), stored(3n, H.subarray(0, 8))]);
      indexer.applyEvent(removedFirst(3n, H));
      await indexer.flush();
      return indexer;
    }

    const cases: Array<[string, Uint32Array | number[], BlockHashOptions | undefined, boolean]> = [
      ['a prompt that extends a stored chain', Uint32Array.from([...A.subarray(0, 24), ...NONE.subarray(24)]), undefined, false],
      ['a prompt that matches nothing', NONE, undefined, true],
      ['a prompt whose first block matches and then diverges', Uint32Array.from([...B.subarray(0, 4), ...NONE.subarray(4)]), undefined, false],
      ['a prompt whose first node is hollow', H, undefined, true],
      ['a LoRA prompt on the adapter blocks', A, LORA, false],
      ['a LoRA prompt on base-model tokens nobody stored with the adapter', B, LORA, true],
      [`a prompt shorter than ${CUT_MIN_TOKENS} tokens (not cut short: the check would cost more than it saves)`, NONE.subarray(0, CUT_MIN_TOKENS - 1), undefined, false],
      ['an array of numbers (not cut short: every value is checked)', Array.from(NONE), undefined, false],
      ['fewer tokens than a block', NONE.subarray(0, BS - 1), undefined, false],
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
      const a = ix.findMatchesForTokensSync(NONE);
      a.scores.set(99n, 1);
      expect(ix.findMatchesForTokensSync(NONE).scores.size).toBe(0);
      expect(ix.firstBlockMisses).toBe(2);
    });

    it('sees an event applied just before the call (read-your-writes): never answers from an older state', async () => {
      const ix = await start();
      for (let round = 0; round < 20; round++) {
        const fresh = tokens(200_000_000 + round * 10_000, LONG);
        expect(ix.findMatchesForTokensSync(fresh).scores.size).toBe(0);
        ix.applyEvent(stored(10n + BigInt(round), fresh.subarray(0, 8)));
        // No flush: the event may still be queued or in flight to a shard.
        expect(sorted(ix.findMatchesForTokensSync(fresh))).toEqual([[10n + BigInt(round), 2]]);
        const other = tokens(400_000_000 + round * 10_000, LONG);
        ix.applyEvent(stored(50n + BigInt(round), other.subarray(0, 4)));
        expect(sorted(await ix.findMatchesForTokens(other))).toEqual([[50n + BigInt(round), 1]]);
      }
    });

    it('checks the options whole, as hashing everything does', async () => {
      const ix = await start();
      const bad = { blockMmHashes: [null, null, null, [-1n]] } as unknown as BlockHashOptions;
      expect(() => ix.findMatchesForTokensSync(NONE, bad)).toThrowError(expect.objectContaining({ code: ErrorCode.InvalidOption }));
      expect(() => ix.findMatchesForTokens(NONE, bad)).toThrowError(expect.objectContaining({ code: ErrorCode.InvalidOption }));
      expect(() => ix.findMatchesForTokensSync(NONE, { loraName: 7 } as unknown as BlockHashOptions)).toThrowError(
        expect.objectContaining({ code: ErrorCode.InvalidOption }),
      );
      expect(ix.firstBlockMisses).toBe(0);
    });
  });
}

for (const shards of [0, 2]) {
  describe(`the first block's check follows the traffic (shards: ${shards})`, () => {
    it('stops checking after many lookups that match, and checks again soon after misses come back', async () => {
      indexer = await ShardedIndexer.create({ shards, blockSize: BS });
      const ix = indexer;
      ix.applyEvent(stored(1n, A.subarray(0, 40)));
      for (let i = 0; i < 200; i++) expect(sorted(ix.findMatchesForTokensSync(A))).toEqual([[1n, 10]]);
      const cut: boolean[] = [];
      for (let i = 0; i < 3 * SAMPLE; i++) {
        const before = ix.firstBlockMisses;
        expect(ix.findMatchesForTokensSync(NONE).scores.size).toBe(0);
        cut.push(ix.firstBlockMisses > before);
      }
      const firstCut = cut.indexOf(true);
      // Closed after the matches: not every miss is checked at once...
      expect(firstCut).toBeGreaterThan(0);
      // ...but sampled checks find the misses and open the gate within two samples.
      expect(firstCut).toBeLessThan(2 * SAMPLE);
      expect(cut.slice(cut.lastIndexOf(false) + 1).length).toBeGreaterThan(SAMPLE / 2);
      expect(cut.slice(cut.indexOf(true, firstCut + 1))).not.toContain(false);
    });
  });
}

describe('CutGate', () => {
  it('starts open, closes after checks that found the block held, samples while closed, reopens on misses', () => {
    const g = new CutGate();
    expect(g.open).toBe(true);
    expect(g.shouldCheck()).toBe(true);
    let n = 0;
    while (g.open) {
      g.note(false);
      n++;
    }
    expect(n).toBeGreaterThan(10); // one check does not close it
    for (let i = 0; i < 1000; i++) g.note(false);
    const checks = Array.from({ length: 4 * SAMPLE }, () => g.shouldCheck()).filter(Boolean).length;
    expect(checks).toBe(4);
    g.note(true);
    g.note(true);
    expect(g.open).toBe(true);
    expect(MIN_SHARE).toBeGreaterThan(0);
  });
});

describe('tokens lookups with a frequency trail (expirationMs, in-thread)', () => {
  it('are never cut short: the lookup records the trail', async () => {
    indexer = await ShardedIndexer.create({ shards: 0, blockSize: BS, expirationMs: 60_000 });
    indexer.applyEvent(stored(1n, A.subarray(0, 40)));
    const r = indexer.findMatchesForTokensSync(NONE);
    expect(r.scores.size).toBe(0);
    expect(sorted(indexer.findMatchesForTokensSync(A))).toEqual([[1n, 10]]);
    expect(indexer.firstBlockMisses).toBe(0);
  });
});

describe('firstBlockHashInto', () => {
  const opts: Array<BlockHashOptions | undefined> = [
    undefined,
    {},
    LORA,
    { blockMmHashes: [[5n, 3n]] },
    { blockMmHashes: [null, [7n]] },
    { loraName: 'vision-lora', blockMmHashes: [BigUint64Array.of(9n, 1n)] },
  ];
  it('writes the first entry of computeBlockHashes, for every block size and option', () => {
    const out = BigUint64Array.of(123n);
    for (const bs of [1, 4, 16, 64, 100]) {
      for (const o of opts) {
        const toks = Uint32Array.from({ length: 3 * bs + 1 }, (_, i) => (i * 2_654_435_761) >>> 0);
        firstBlockHashInto(toks, bs, o, out);
        expect(out[0]).toBe(computeBlockHashes(toks, bs, o)[0]);
      }
    }
  });
  it('refuses a short input and bad options as computeBlockHashes does', () => {
    const out = new BigUint64Array(1);
    expect(() => firstBlockHashInto(tokens(1, 3), 4, undefined, out)).toThrowError(expect.objectContaining({ code: ErrorCode.InvalidField }));
    expect(() => firstBlockHashInto(tokens(1, 8), 0, undefined, out)).toThrowError(expect.objectContaining({ code: ErrorCode.InvalidOption }));
    expect(() => firstBlockHashInto(tokens(1, 8), 4, { blockMmHashes: [null, null, [1n << 64n]] }, out)).toThrowError(
      expect.objectContaining({ code: ErrorCode.InvalidOption }),
    );
  });
});
