import { afterEach, describe, expect, it } from 'vitest';

import { ErrorCode } from '../src/errors.js';
import { blockHashesInto, computeBlockHashes, type BlockHashOptions } from '../src/hash/block-hash.js';
import { CutGate, PREFIX_BLOCKS, PREFIX_MIN_SHARE, SAMPLE } from '../src/indexer/cut-gate.js';
import { CUT_MIN_TOKENS, ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { sortedEntries, storedTokens, tokenRange } from './support/token-events.js';

// Long tokens lookups look up their first PREFIX_BLOCKS blocks first and answer from them when
// every score is below PREFIX_BLOCKS (src/indexer/tokens-cut.ts): the rest of the
// prompt is never hashed. What must hold: every answer equals hashing everything and looking the
// hashes up; a worker that holds the whole prefix is never cut at PREFIX_BLOCKS (its score is
// the whole prompt's); multimodal hashes beyond the prefix stay with their block; and with
// read-your-writes the prefix is never read from a state older than the call.

const BS = 4;
const LONG = CUT_MIN_TOKENS + 6; // 1,025 blocks of 4 and a partial block
const P = PREFIX_BLOCKS;
const stored = (worker: bigint, toks: Uint32Array, options?: BlockHashOptions): RouterEvent => storedTokens(worker, toks, BS, options);
const blocks = (toks: Uint32Array, n: number): Uint32Array => toks.subarray(0, n * BS);
/** The Removed event for block `i` of a chain stored by `stored` (block hashes: sequence hashes). */
function removedBlock(worker: bigint, ev: RouterEvent, i: number): RouterEvent {
  const data = ev.event.data;
  if (data.type !== 'stored') throw new Error('not a stored event');
  return { workerId: worker, event: { eventId: 1n, data: { type: 'removed', blockHashes: [data.blocks[i]!.blockHash] } } };
}

const PROMPT = tokenRange(1_000, LONG);
const OTHER = tokenRange(3_000_000, LONG);
const MM: BlockHashOptions = { blockMmHashes: Object.assign([], { 3: [11n, 5n], [P + 4]: [7n] }) };
const LORA: BlockHashOptions = { loraName: 'sql-lora' };

let indexer: ShardedIndexer | null = null;
afterEach(async () => {
  await indexer?.close();
  indexer = null;
});

for (const shards of [0, 1, 2]) {
  describe(`tokens lookups answered from their first ${P} blocks (shards: ${shards})`, () => {
    // [name, events, prompt, options, answered from the prefix]
    const cases: Array<[string, () => RouterEvent[], Uint32Array, BlockHashOptions | undefined, boolean]> = [
      [`a worker holding ${P - 1} blocks`, () => [stored(1n, blocks(PROMPT, P - 1))], PROMPT, undefined, true],
      [`a worker holding exactly ${P} blocks (its score may go on: the rest is hashed)`, () => [stored(1n, blocks(PROMPT, P))], PROMPT, undefined, false],
      [`a worker holding ${3 * P} blocks (never cut at ${P})`, () => [stored(1n, blocks(PROMPT, 3 * P))], PROMPT, undefined, false],
      ['two workers, one shallow and one deep', () => [stored(1n, blocks(PROMPT, 3)), stored(2n, blocks(PROMPT, 2 * P + 1))], PROMPT, undefined, false],
      ['three workers, all shallow', () => [stored(1n, blocks(PROMPT, 3)), stored(2n, blocks(PROMPT, 7)), stored(3n, blocks(PROMPT, P - 1))], PROMPT, undefined, true],
      ['a deep chain with a gap inside the prefix (the run stops at the gap)', () => {
        const ev = stored(1n, blocks(PROMPT, 3 * P));
        return [ev, removedBlock(1n, ev, 5)];
      }, PROMPT, undefined, true],
      ['a deep chain with a gap after the prefix', () => {
        const ev = stored(1n, blocks(PROMPT, 3 * P));
        return [ev, removedBlock(1n, ev, P + 5)];
      }, PROMPT, undefined, false],
      ['multimodal blocks inside and after the prefix, held deep', () => [stored(1n, blocks(PROMPT, 2 * P), MM)], PROMPT, MM, false],
      ['multimodal blocks, the plain chain held deep (differs at block 3)', () => [stored(1n, blocks(PROMPT, 2 * P))], PROMPT, MM, true],
      ['a LoRA prompt held deep with the adapter', () => [stored(1n, blocks(PROMPT, 2 * P), LORA)], PROMPT, LORA, false],
      ['a prompt whose first block matches and then diverges', () => [stored(1n, blocks(PROMPT, 2 * P))], Uint32Array.from([...blocks(PROMPT, 1), ...OTHER.subarray(BS)]), undefined, true],
    ];

    for (const [name, events, prompt, options, answered] of cases) {
      it(`${name}: the answer of hashing everything, ${answered ? '' : 'not '}answered from the prefix`, async () => {
        indexer = await ShardedIndexer.create({ shards, blockSize: BS });
        const ix = indexer;
        ix.applyEvents(events());
        await ix.flush();
        const want = sortedEntries(ix.findMatchesSync(computeBlockHashes(prompt, BS, options)));
        expect(want.length).toBeGreaterThan(0);
        const before = ix.prefixAnswers;
        expect(sortedEntries(ix.findMatchesForTokensSync(prompt, options))).toEqual(want);
        expect(sortedEntries(await ix.findMatchesForTokens(prompt, options))).toEqual(want);
        expect(ix.prefixAnswers - before).toBe(answered ? 2 : 0);
        if (answered) expect(Math.max(...want.map(([, s]) => s))).toBeLessThan(P);
      });
    }

    it('sees an event applied just before the call (read-your-writes): a chain extended past the prefix is never cut', async () => {
      indexer = await ShardedIndexer.create({ shards, blockSize: BS });
      const ix = indexer;
      for (let round = 0; round < 20; round++) {
        const prompt = tokenRange(10_000_000 + round * 100_000, LONG);
        const worker = 100n + BigInt(round);
        ix.applyEvent(stored(worker, blocks(prompt, 5)));
        expect(sortedEntries(ix.findMatchesForTokensSync(prompt))).toEqual([[worker, 5]]);
        // No flush: the extension may still be queued or in flight to a shard, where a prefix
        // read from the older state would score 5 and answer that.
        ix.applyEvent(stored(worker, blocks(prompt, 2 * P)));
        expect(sortedEntries(ix.findMatchesForTokensSync(prompt))).toEqual([[worker, 2 * P]]);
        ix.applyEvent(stored(worker, blocks(prompt, 3 * P)));
        expect(sortedEntries(await ix.findMatchesForTokens(prompt))).toEqual([[worker, 3 * P]]);
      }
    });
  });
}

for (const shards of [0, 2]) {
  describe(`the prefix lookup follows the traffic (shards: ${shards})`, () => {
    it('stops after many deep matches, and answers from the prefix again soon after shallow ones come back', async () => {
      indexer = await ShardedIndexer.create({ shards, blockSize: BS });
      const ix = indexer;
      ix.applyEvents([stored(1n, blocks(PROMPT, 3 * P)), stored(2n, blocks(OTHER, 2))]);
      for (let i = 0; i < 200; i++) expect(sortedEntries(ix.findMatchesForTokensSync(PROMPT))).toEqual([[1n, 3 * P]]);
      const answered: boolean[] = [];
      for (let i = 0; i < 6 * SAMPLE; i++) {
        const before = ix.prefixAnswers;
        expect(sortedEntries(ix.findMatchesForTokensSync(OTHER))).toEqual([[2n, 2]]);
        answered.push(ix.prefixAnswers > before);
      }
      const first = answered.indexOf(true);
      expect(first).toBeGreaterThan(0); // closed after the deep matches
      expect(first).toBeLessThan(2 * SAMPLE); // sampled tries find the shallow matches...
      // ...and a few of them reopen it (each weighs 1/16 against a quarter to reach): from
      // then on every long lookup tries.
      const open = answered.indexOf(true, answered.lastIndexOf(false));
      expect(open).toBeLessThan(5 * SAMPLE);
      expect(answered.slice(open).length).toBeGreaterThan(SAMPLE);
    });
  });
}

describe('tokens lookups with a frequency trail (expirationMs, in-thread)', () => {
  it('are never answered from a prefix: the lookup records the trail', async () => {
    indexer = await ShardedIndexer.create({ shards: 0, blockSize: BS, expirationMs: 60_000 });
    indexer.applyEvent(stored(1n, blocks(PROMPT, 3)));
    expect(sortedEntries(indexer.findMatchesForTokensSync(PROMPT))).toEqual([[1n, 3]]);
    expect(indexer.prefixAnswers).toBe(0);
  });
});

describe('CutGate with the prefix share', () => {
  it('closes sooner than the first-block gate: at a quarter of tries that cut', () => {
    const g = new CutGate(PREFIX_MIN_SHARE);
    let n = 0;
    while (g.open) {
      g.note(false);
      n++;
    }
    expect(n).toBeGreaterThan(5);
    expect(n).toBeLessThan(40);
  });
});

describe('blockHashesInto', () => {
  const opts: Array<BlockHashOptions | undefined> = [undefined, {}, LORA, MM, { loraName: 'v', blockMmHashes: [null, [3n], null, BigUint64Array.of(9n)] }];
  it('writes blocks from..to of computeBlockHashes at their index, for every block size and option', () => {
    for (const bs of [1, 4, 64]) {
      const toks = Uint32Array.from({ length: 40 * bs + 3 }, (_, i) => (i * 2_654_435_761) >>> 0);
      for (const o of opts) {
        const want = computeBlockHashes(toks, bs, o);
        for (const [from, to] of [[0, 1], [0, 16], [16, 40], [3, 21], [39, 40], [5, 5]] as const) {
          const out = new BigUint64Array(40).fill(42n);
          blockHashesInto(toks, bs, o, from, to, out);
          for (let i = 0; i < 40; i++) expect(out[i]).toBe(i >= from && i < to ? want[i] : 42n);
        }
      }
    }
  });

  it('refuses a range the tokens or the output do not hold, and checks the options whole', () => {
    const toks = tokenRange(0, 10 * BS);
    const out = new BigUint64Array(10);
    for (const [from, to] of [[0, 11], [-1, 2], [3, 2], [0.5, 2]]) {
      expect(() => blockHashesInto(toks, BS, undefined, from!, to!, out)).toThrowError(expect.objectContaining({ code: ErrorCode.InvalidField }));
    }
    expect(() => blockHashesInto(toks, BS, undefined, 0, 10, new BigUint64Array(9))).toThrowError(expect.objectContaining({ code: ErrorCode.InvalidField }));
    const bad = { blockMmHashes: [null, null, null, null, null, null, null, null, null, [-1n]] } as unknown as BlockHashOptions;
    expect(() => blockHashesInto(toks, BS, bad, 0, 2, out)).toThrowError(expect.objectContaining({ code: ErrorCode.InvalidOption }));
  });
});
