/** Engine events converted as Dynamo's zmq_wire.rs does. */
import { describe, expect, it } from 'vitest';
import { computeBlockHashes } from '../src/hash/block-hash.js';
import { EventConverter, tierOf } from '../src/zmq/convert.js';
import type { EngineStored } from '../src/zmq/wire.js';

const tokens = Uint32Array.from({ length: 12 }, (_, i) => 100 + i);
const base: EngineStored = {
  kind: 'stored',
  blockHashes: [2n ** 63n + 11n, 22n, 33n],
  parentHash: 7n,
  tokenIds: tokens,
  blockSize: 4,
  medium: 'GPU',
  loraName: null,
  extraKeys: null,
  groupIdx: 0,
  specKind: 'full_attention',
};

describe('EventConverter', () => {
  it('maps engine hashes to external hashes and each block tokens to its xxh3 tokens hash', () => {
    const c = new EventConverter(4).convert(base);
    const local = computeBlockHashes(tokens, 4);
    expect(c).toEqual({
      tier: 'device',
      data: { type: 'stored', parentHash: 7n, blocks: base.blockHashes.map((h, i) => ({ blockHash: h, tokensHash: local[i] })) },
    });
  });

  it('seeds with the LoRA name and appends multimodal hashes from 64-hex extra keys', () => {
    const mm = 'a1b2c3d4e5f60718' + '0'.repeat(48);
    const c = new EventConverter(4).convert({ ...base, loraName: 'adapter-x', extraKeys: [null, [[mm, 0]], [{ type: 'MultiModalKey', modality: 'image', hash: mm, block_offset: 0 }]] });
    const want = computeBlockHashes(tokens, 4, { loraName: 'adapter-x', blockMmHashes: [null, [0xa1b2c3d4e5f60718n], [0xa1b2c3d4e5f60718n]] });
    const plain = computeBlockHashes(tokens, 4);
    if (typeof c === 'string' || c.data.type !== 'stored') throw new Error('expected a store');
    expect(c.data.blocks.map((b) => b.tokensHash)).toEqual([...want]);
    expect(c.data.blocks[1]!.tokensHash).not.toBe(plain[1]);
  });

  it('stores nothing when the event block size differs from the index', () => {
    expect(new EventConverter(16).convert(base)).toBe('block_size_mismatch');
  });

  it('rejects a store that repeats a hash or its parent', () => {
    const cv = new EventConverter(4);
    expect(cv.convert({ ...base, blockHashes: [1n, 2n, 1n] })).toBe('duplicate_hash');
    expect(cv.convert({ ...base, parentHash: 22n })).toBe('duplicate_hash');
  });

  it('finds a repeated hash or parent in short and long stores alike (pairwise up to 16 blocks, a set above)', () => {
    const cv = new EventConverter(1);
    for (const n of [1, 2, 15, 16, 17, 40]) {
      const hashes = Array.from({ length: n }, (_, i) => 2n ** 63n + BigInt(i) * 1_000_003n);
      const store = (blockHashes: bigint[], parentHash: bigint | null): EngineStored =>
        ({ ...base, blockSize: 1, tokenIds: Uint32Array.from({ length: n }, (_, i) => i), blockHashes, parentHash });
      expect(cv.convert(store(hashes, 5n)), `n=${n}`).not.toBe('duplicate_hash');
      expect(cv.convert(store(hashes, null)), `n=${n}`).not.toBe('duplicate_hash');
      expect(cv.convert(store(hashes, hashes[n - 1]!)), `parent = last, n=${n}`).toBe('duplicate_hash');
      if (n > 1) expect(cv.convert(store([...hashes.slice(0, -1), hashes[0]!], null)), `first = last, n=${n}`).toBe('duplicate_hash');
    }
  });

  it('drops blocks beyond the full blocks of token_ids', () => {
    const c = new EventConverter(4).convert({ ...base, tokenIds: tokens.subarray(0, 9) });
    if (typeof c === 'string' || c.data.type !== 'stored') throw new Error('expected a store');
    expect(c.data.blocks.length).toBe(2);
  });

  it('files vLLM and Dynamo media into tiers, unknown media as device', () => {
    expect(['GPU', null, 'CPU', 'STORAGE', 'CPU_TIER2', 'REMOTE', 'weird'].map(tierOf)).toEqual(['device', 'device', 'host_pinned', 'disk', 'disk', 'external', 'device']);
  });

  it('skips stores of non-full-attention groups, and later removals of those groups only', () => {
    const cv = new EventConverter(4);
    expect(cv.convert({ ...base, groupIdx: 1, specKind: 'sliding_window' })).toBe('non_full_attention');
    expect(cv.convert({ kind: 'removed', blockHashes: [22n], medium: 'GPU', groupIdx: 1 })).toBe('non_full_attention');
    expect(cv.convert({ kind: 'removed', blockHashes: [22n], medium: 'GPU', groupIdx: 0 })).toEqual({ tier: 'device', data: { type: 'removed', blockHashes: [22n] } });
  });
});
