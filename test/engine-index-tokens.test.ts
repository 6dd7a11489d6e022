import { describe, expect, it } from 'vitest';

import { computeBlockHashes, type BlockHashOptions } from '../src/hash/block-hash.js';
import { CUT_MIN_TOKENS, PREFIX_BLOCKS } from '../src/indexer/cut-gate.js';
import { StorageTier } from '../src/zmq/convert.js';
import { EngineIndex, type EngineScores } from '../src/zmq/engine-index.js';

// EngineIndex.queryTokens (the HTTP /query path): a long prompt whose first block no tree of any
// tier or rank holds is answered after that block alone, one whose every score (every tier and
// rank) is below PREFIX_BLOCKS from its first PREFIX_BLOCKS blocks; every answer equals hashing
// everything and calling `query`, and a chain held deep on any tier or rank is never cut.

const BS = 4;
const LORA: BlockHashOptions = { loraName: 'sql-lora' };
const tokens = (base: number, n: number): Uint32Array => Uint32Array.from({ length: n }, (_, i) => base + i);
const LONG = CUT_MIN_TOKENS + 3;

/** Stores the first `blocks` blocks of `toks` for (worker, rank) in `tier`. */
function store(ix: EngineIndex, worker: bigint, rank: number, tier: StorageTier, toks: Uint32Array, blocks: number, options?: BlockHashOptions): void {
  const local = computeBlockHashes(toks.subarray(0, blocks * BS), BS, options);
  const status = ix.apply(worker, rank, tier, { type: 'stored', parentHash: null, blocks: Array.from(local, (h) => ({ blockHash: h, tokensHash: h })) }, 0n);
  expect(status).toBe('ok');
}

const plain = (r: EngineScores): unknown => ({
  scores: [...r.scores].map(([w, m]) => [w, [...m]]),
  frequencies: r.frequencies,
  treeSizes: [...r.treeSizes].map(([w, m]) => [w, [...m]]),
  lowerTiers: [...r.lowerTiers].map(([t, rm]) => [t, [...rm].map(([w, m]) => [w, [...m]])]),
});

describe('EngineIndex.queryTokens', () => {
  const device = tokens(10, LONG);
  const rank3 = tokens(50_000, LONG);
  const disk = tokens(90_000, LONG);
  const none = tokens(7_000_000, LONG);
  const ix = new EngineIndex({ blockSize: BS });
  store(ix, 1n, 0, StorageTier.Device, device, 6);
  store(ix, 2n, 3, StorageTier.Device, rank3, 2);
  store(ix, 3n, 0, StorageTier.Disk, disk, 3);
  store(ix, 4n, 0, StorageTier.Device, device, 5, LORA);
  const deep = tokens(200_000, LONG);
  const deepRank = tokens(300_000, LONG);
  const deepDisk = tokens(400_000, LONG);
  store(ix, 5n, 0, StorageTier.Device, deep, 3 * PREFIX_BLOCKS);
  store(ix, 6n, 0, StorageTier.Device, deep, 2);
  store(ix, 7n, 3, StorageTier.Device, deepRank, PREFIX_BLOCKS);
  store(ix, 8n, 0, StorageTier.Device, deepDisk, 1);
  store(ix, 9n, 0, StorageTier.Disk, deepDisk, 2 * PREFIX_BLOCKS);

  const cases: Array<[string, Uint32Array, BlockHashOptions, boolean]> = [
    ['held on the device tier, rank 0', device, {}, true],
    ['held by rank 3 only', rank3, {}, true],
    ['held on a lower tier only', disk, {}, true],
    ['held with the LoRA adapter', device, LORA, true],
    ['held by nobody', none, {}, true],
    ['held by nobody with that adapter', rank3, LORA, true],
    ['short, held by nobody (not checked)', none.subarray(0, CUT_MIN_TOKENS - 1), {}, false],
    [`held ${3 * PREFIX_BLOCKS} blocks deep on the device tier`, deep, {}, false],
    [`held ${PREFIX_BLOCKS} blocks deep by rank 3 only`, deepRank, {}, false],
    [`held ${2 * PREFIX_BLOCKS} blocks deep on a lower tier only (the device tier shallow)`, deepDisk, {}, false],
  ];
  for (const [name, toks, options, cut] of cases) {
    it(`${name}: the answer of hashing everything${cut ? ', cut short' : ''}`, () => {
      const before = ix.cutShort;
      const got = ix.queryTokens(toks, options);
      expect(plain(got)).toEqual(plain(ix.query(computeBlockHashes(toks, BS, options))));
      expect(ix.cutShort - before).toBe(cut ? 1 : 0);
    });
  }

  it('never cuts short with expirationMs (the lookup records the frequency trail)', () => {
    const ex = new EngineIndex({ blockSize: BS, expirationMs: 60_000 });
    store(ex, 1n, 0, StorageTier.Device, device, 2);
    expect(ex.queryTokens(none, {}).scores.size).toBe(0);
    expect(ex.cutShort).toBe(0);
  });
});
