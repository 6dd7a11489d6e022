import { describe, expect, it } from 'vitest';

import {
  computeBlockHashes,
  computeSequenceHashes,
  hashBytes,
  XXH3_SEED,
} from '../src/hash/block-hash.js';
import { ErrorCode, KvIndexError } from '../src/errors.js';

// Test vectors of docs/dynamo-reference.md section 2 (reference libxxhash 0.8,
// XXH3_64bits_withSeed; the first one is asserted in Dynamo's own `test_router_event_new`).

const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);
const u64s = (values: readonly bigint[]): BigUint64Array => BigUint64Array.from(values);

describe('hashBytes (compute_hash)', () => {
  it('hashes b"test data" with seed 1337 to the value Dynamo asserts', () => {
    expect(hashBytes(new TextEncoder().encode('test data'))).toBe(13226331709069118873n);
  });

  it('hashes the empty input', () => {
    expect(hashBytes(new Uint8Array(0))).toBe(15128690059815094969n);
  });

  it('uses seed 1337 by default', () => {
    expect(XXH3_SEED).toBe(1337n);
    const bytes = new TextEncoder().encode('test data');
    expect(hashBytes(bytes, 1337n)).toBe(hashBytes(bytes));
  });

  it('matches tokens.rs with salt 0 for tokens [1, 2, 3, 4]', () => {
    const bytes = Uint8Array.of(1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0);
    expect(hashBytes(bytes, 0n)).toBe(8052976908588476977n);
  });
});

describe('computeBlockHashes (compute_block_hash_for_seq)', () => {
  const vectors: Array<{ name: string; tokens: number[]; blockSize: number; local: bigint[] }> = [
    { name: '[1,2,3,4], bs 4', tokens: [1, 2, 3, 4], blockSize: 4, local: [14643705804678351452n] },
    {
      name: '[1..8], bs 4',
      tokens: range(1, 9),
      blockSize: 4,
      local: [14643705804678351452n, 16777012769546811212n],
    },
    {
      name: '[1..9], bs 4 (partial block dropped)',
      tokens: range(1, 10),
      blockSize: 4,
      local: [14643705804678351452n, 16777012769546811212n],
    },
    { name: '[10,20,30,40], bs 4', tokens: [10, 20, 30, 40], blockSize: 4, local: [16324159493528209483n] },
    { name: '[0,1,2,3], bs 4', tokens: [0, 1, 2, 3], blockSize: 4, local: [9143094415614847814n] },
    { name: '0..16, bs 16', tokens: range(0, 16), blockSize: 16, local: [15310707395893867146n] },
    {
      name: '0..32, bs 16',
      tokens: range(0, 32),
      blockSize: 16,
      local: [15310707395893867146n, 15292316782987903195n],
    },
    { name: '0..11, bs 11', tokens: range(0, 11), blockSize: 11, local: [3478666572770996202n] },
    { name: '0..64, bs 64', tokens: range(0, 64), blockSize: 64, local: [3480597578098033343n] },
    { name: '[0], bs 1', tokens: [0], blockSize: 1, local: [16451421758532862321n] },
    { name: '[3]*32, bs 32', tokens: new Array<number>(32).fill(3), blockSize: 32, local: [2671291174597333161n] },
  ];

  for (const v of vectors) {
    it(`hashes ${v.name} from a number[]`, () => {
      expect(computeBlockHashes(v.tokens, v.blockSize)).toEqual(u64s(v.local));
    });

    it(`hashes ${v.name} from a Uint32Array`, () => {
      expect(computeBlockHashes(Uint32Array.from(v.tokens), v.blockSize)).toEqual(u64s(v.local));
    });
  }

  it('hashes a Uint32Array that is a view into a larger buffer', () => {
    const backing = Uint32Array.from([99, 99, ...range(0, 32), 99]);
    expect(computeBlockHashes(backing.subarray(2, 34), 16)).toEqual(
      u64s([15310707395893867146n, 15292316782987903195n]),
    );
  });

  it('returns no hashes when there is no full block', () => {
    expect(computeBlockHashes([1, 2, 3], 4)).toEqual(new BigUint64Array(0));
    expect(computeBlockHashes(new Uint32Array(0), 16)).toEqual(new BigUint64Array(0));
  });

  it('rejects a block size that is not a positive integer', () => {
    for (const blockSize of [0, -4, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => computeBlockHashes([1, 2, 3, 4], blockSize)).toThrow(
        expect.objectContaining({ code: ErrorCode.InvalidOption }),
      );
    }
  });

  it('rejects tokens that are not u32 integers, naming the index', () => {
    for (const bad of [-1, 2 ** 32, 1.5, Number.NaN, '7' as unknown as number]) {
      let error: unknown;
      try {
        computeBlockHashes([1, 2, bad, 4, 5], 4);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(KvIndexError);
      expect((error as KvIndexError).code).toBe(ErrorCode.InvalidField);
      expect((error as KvIndexError).message).toContain('tokens[2]');
    }
  });

  it('rejects a bad token in the ignored partial block', () => {
    expect(() => computeBlockHashes([1, 2, 3, 4, -1], 4)).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidField }),
    );
  });
});

describe('computeSequenceHashes (compute_seq_hash_for_block)', () => {
  it('chains [1..8], bs 4', () => {
    expect(computeSequenceHashes(computeBlockHashes(range(1, 9), 4))).toEqual(
      u64s([14643705804678351452n, 4945711292740353085n]),
    );
  });

  it('chains 0..32, bs 16', () => {
    expect(computeSequenceHashes(computeBlockHashes(range(0, 32), 16))).toEqual(
      u64s([15310707395893867146n, 13769157705258532664n]),
    );
  });

  it('keeps a single block hash as it is', () => {
    expect(computeSequenceHashes(u64s([14643705804678351452n]))).toEqual(u64s([14643705804678351452n]));
  });

  it('chains the raw values [1, 2, 3]', () => {
    expect(computeSequenceHashes(u64s([1n, 2n, 3n]))).toEqual(
      u64s([1n, 16740963408272063728n, 5417695437591212399n]),
    );
  });

  it('equals hashing le_u64(previous) ++ le_u64(local) with hashBytes', () => {
    const local = computeBlockHashes(range(0, 64 * 5), 64);
    const seq = computeSequenceHashes(local);
    for (let i = 1; i < local.length; i++) {
      const bytes = new DataView(new ArrayBuffer(16));
      bytes.setBigUint64(0, seq[i - 1]!, true);
      bytes.setBigUint64(8, local[i]!, true);
      expect(seq[i]).toBe(hashBytes(new Uint8Array(bytes.buffer)));
    }
  });

  it('returns an empty array for no blocks', () => {
    expect(computeSequenceHashes(new BigUint64Array(0))).toEqual(new BigUint64Array(0));
  });
});
