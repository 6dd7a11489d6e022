import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

import { ErrorCode } from '../src/errors.js';
import { cachedLoraSeeds, computeBlockHashes, computeSequenceHashes, hashBytes, XXH3_SEED } from '../src/hash/block-hash.js';
import { parseJsonLossless, type JsonObject } from '../src/protocol/json-value.js';

// Dynamo's block identity beyond the tokens: the LoRA seed and multimodal hashes. The vectors
// come from test/fixtures/block-identity-vectors.py (Debian's python3-xxhash, see the fixture
// README); the rest checks the rule itself through `hashBytes`.

interface Vector {
  name: string;
  tokens: number[];
  blockSize: number;
  loraName: string | null;
  blockMmHashes: Array<bigint[] | null> | null;
  loraSeed: bigint;
  local: bigint[];
  seq: bigint[];
}

function readVectors(): Vector[] {
  const file = parseJsonLossless(readFileSync(new URL('./fixtures/block-identity-vectors.json', import.meta.url)));
  const cases = (file as JsonObject)['cases'] as JsonObject[];
  const u64 = (v: unknown): bigint => BigInt(v as string);
  return cases.map((c) => ({
    name: c['name'] as string,
    tokens: (c['tokens'] as bigint[]).map(Number),
    blockSize: Number(c['block_size'] as bigint),
    loraName: c['lora_name'] as string | null,
    blockMmHashes: c['block_mm_hashes'] === null
      ? null
      : (c['block_mm_hashes'] as Array<string[] | null>).map((e) => (e === null ? null : e.map(u64))),
    loraSeed: u64(c['lora_seed']),
    local: (c['local'] as string[]).map(u64),
    seq: (c['seq'] as string[]).map(u64),
  }));
}

const VECTORS = readVectors();
const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const U64_MAX = (1n << 64n) - 1n;

/** Little-endian bytes of u32 tokens followed by u64 values. */
function blockBytes(tokens: readonly number[], extra: readonly bigint[] = []): Uint8Array {
  const view = new DataView(new ArrayBuffer(4 * tokens.length + 8 * extra.length));
  tokens.forEach((t, i) => view.setUint32(4 * i, t, true));
  extra.forEach((h, i) => view.setBigUint64(4 * tokens.length + 8 * i, h, true));
  return new Uint8Array(view.buffer);
}

describe('block identity vectors (python3-xxhash)', () => {
  it('has LoRA, multimodal and combined cases', () => {
    expect(VECTORS.filter((v) => v.loraName !== null && v.blockMmHashes === null).length).toBeGreaterThanOrEqual(8);
    expect(VECTORS.filter((v) => v.loraName === null && v.blockMmHashes !== null).length).toBeGreaterThanOrEqual(8);
    expect(VECTORS.some((v) => v.loraName !== null && v.blockMmHashes !== null)).toBe(true);
  });

  for (const v of VECTORS) {
    const options = { loraName: v.loraName, blockMmHashes: v.blockMmHashes };
    it(`${v.name}: from a number[]`, () => {
      expect(computeBlockHashes(v.tokens, v.blockSize, options)).toEqual(BigUint64Array.from(v.local));
    });

    it(`${v.name}: from a Uint32Array, with BigUint64Array mm hashes`, () => {
      const mm = v.blockMmHashes?.map((e) => (e === null ? null : BigUint64Array.from(e))) ?? null;
      const local = computeBlockHashes(Uint32Array.from(v.tokens), v.blockSize, { loraName: v.loraName, blockMmHashes: mm });
      expect(local).toEqual(BigUint64Array.from(v.local));
      expect(computeSequenceHashes(local)).toEqual(BigUint64Array.from(v.seq));
    });
  }
});

describe('LoRA seed', () => {
  it('is 1337 + xxh3_64(name, seed 0), wrapping at 2^64', () => {
    for (const v of VECTORS.filter((x) => x.loraName !== null && x.loraName !== '')) {
      expect((XXH3_SEED + hashBytes(utf8(v.loraName!), 0n)) & U64_MAX, v.name).toBe(v.loraSeed);
    }
  });

  it('hashes every block with the LoRA seed', () => {
    const tokens = Array.from({ length: 48 }, (_, i) => i * 7);
    const seed = (XXH3_SEED + hashBytes(utf8('sql-lora'), 0n)) & U64_MAX;
    const expected = [0, 1, 2].map((b) => hashBytes(blockBytes(tokens.slice(16 * b, 16 * b + 16)), seed));
    expect(computeBlockHashes(tokens, 16, { loraName: 'sql-lora' })).toEqual(BigUint64Array.from(expected));
  });

  it('treats an absent, null or empty name as the base model', () => {
    const tokens = Array.from({ length: 64 }, (_, i) => i);
    const base = computeBlockHashes(tokens, 16);
    expect(computeBlockHashes(tokens, 16, {})).toEqual(base);
    expect(computeBlockHashes(tokens, 16, { loraName: null })).toEqual(base);
    expect(computeBlockHashes(tokens, 16, { loraName: '' })).toEqual(base);
    expect(computeBlockHashes(tokens, 16, { loraName: undefined })).toEqual(base);
  });

  it('separates adapters, and the same adapter hashes alike on every call', () => {
    const tokens = Array.from({ length: 32 }, (_, i) => i);
    const a = computeBlockHashes(tokens, 16, { loraName: 'a' });
    const b = computeBlockHashes(tokens, 16, { loraName: 'b' });
    expect(a[0]).not.toBe(b[0]);
    expect(a[0]).not.toBe(computeBlockHashes(tokens, 16)[0]);
    expect(computeBlockHashes(tokens, 16, { loraName: 'a' })).toEqual(a);
  });

  it('hashes names longer than the seed cache holds', () => {
    const tokens = Array.from({ length: 16 }, (_, i) => i);
    const first = computeBlockHashes(tokens, 16, { loraName: 'adapter-0' })[0];
    for (let i = 0; i < 1100; i++) computeBlockHashes(tokens, 16, { loraName: `adapter-${i}` });
    expect(computeBlockHashes(tokens, 16, { loraName: 'adapter-0' })[0]).toBe(first);
  });

  it('keeps no long name in the seed cache, and hashes it alike on every call', () => {
    const tokens = Array.from({ length: 16 }, (_, i) => i);
    // A request may bring an 8 MB name: 1,024 of them once stayed in the cache (GBs).
    const long = 'x'.repeat(100_000);
    const seed = (XXH3_SEED + hashBytes(utf8(long), 0n)) & U64_MAX;
    computeBlockHashes(tokens, 16, { loraName: 'short-one' });
    const before = cachedLoraSeeds();
    expect(computeBlockHashes(tokens, 16, { loraName: long })[0]).toBe(hashBytes(blockBytes(tokens), seed));
    expect(computeBlockHashes(tokens, 16, { loraName: long })[0]).toBe(hashBytes(blockBytes(tokens), seed));
    expect(cachedLoraSeeds()).toBe(before);
    computeBlockHashes(tokens, 16, { loraName: 'another-short-one' });
    expect(cachedLoraSeeds()).toBe(before + 1);
  });
});

describe('multimodal hashes', () => {
  const tokens = Array.from({ length: 64 }, (_, i) => 1000 + i);

  it('appends the sorted mm hashes to the block bytes', () => {
    const mm = [0xfedc_ba98_7654_3210n, 3n, U64_MAX];
    const local = computeBlockHashes(tokens, 32, { blockMmHashes: [null, mm] });
    expect(local[0]).toBe(hashBytes(blockBytes(tokens.slice(0, 32))));
    expect(local[1]).toBe(hashBytes(blockBytes(tokens.slice(32), [3n, 0xfedc_ba98_7654_3210n, U64_MAX])));
  });

  it('does not depend on the order the mm hashes are given in', () => {
    const a = computeBlockHashes(tokens, 16, { blockMmHashes: [[5n, 1n, 9n]] });
    const b = computeBlockHashes(tokens, 16, { blockMmHashes: [[9n, 5n, 1n]] });
    expect(a).toEqual(b);
  });

  it('hashes empty, null, undefined and missing entries as tokens only', () => {
    const base = computeBlockHashes(tokens, 16);
    expect(computeBlockHashes(tokens, 16, { blockMmHashes: [[], null, undefined] })).toEqual(base);
    expect(computeBlockHashes(tokens, 16, { blockMmHashes: [] })).toEqual(base);
    expect(computeBlockHashes(tokens, 16, { blockMmHashes: null })).toEqual(base);
  });

  it('changes only the blocks that carry mm hashes, not their successors', () => {
    const base = computeBlockHashes(tokens, 16);
    const mm = computeBlockHashes(tokens, 16, { blockMmHashes: [null, [77n]] });
    expect(mm[0]).toBe(base[0]);
    expect(mm[1]).not.toBe(base[1]);
    expect(mm.subarray(2)).toEqual(base.subarray(2));
  });

  it('combines with the LoRA seed', () => {
    const seed = (XXH3_SEED + hashBytes(utf8('vision'), 0n)) & U64_MAX;
    const local = computeBlockHashes(tokens, 16, { loraName: 'vision', blockMmHashes: [[42n]] });
    expect(local[0]).toBe(hashBytes(blockBytes(tokens.slice(0, 16), [42n]), seed));
    expect(local[1]).toBe(hashBytes(blockBytes(tokens.slice(16, 32)), seed));
  });

  it('hashes a block with many mm hashes (long input) after a short prompt', () => {
    const many = Array.from({ length: 500 }, (_, i) => BigInt(i) * 0x1_0000_0001n);
    const local = computeBlockHashes(tokens.slice(0, 16), 16, { blockMmHashes: [many] });
    expect(local[0]).toBe(hashBytes(blockBytes(tokens.slice(0, 16), many)));
  });
});

describe('block identity option checks', () => {
  const tokens = [1, 2, 3, 4];

  it('rejects a LoRA name that is not a string', () => {
    for (const loraName of [7, {}, ['a']]) {
      expect(() => computeBlockHashes(tokens, 4, { loraName } as never)).toThrow(
        expect.objectContaining({ code: ErrorCode.InvalidOption, message: expect.stringContaining('loraName') }),
      );
    }
  });

  it('rejects blockMmHashes that is not an array of u64 arrays, naming the entry', () => {
    const cases: Array<[unknown, string]> = [
      [{ 0: [1n] }, 'blockMmHashes'],
      [[7n], 'blockMmHashes[0]'],
      [[null, [1n, 2]], 'blockMmHashes[1][1]'],
      [[[-1n]], 'blockMmHashes[0][0]'],
      [[[1n << 64n]], 'blockMmHashes[0][0]'],
      // Entries past the last full block are checked too.
      [[null, null, ['3']], 'blockMmHashes[2][0]'],
    ];
    for (const [blockMmHashes, field] of cases) {
      expect(() => computeBlockHashes(tokens, 4, { blockMmHashes } as never)).toThrow(
        expect.objectContaining({ code: ErrorCode.InvalidOption, message: expect.stringContaining(field) }),
      );
    }
  });

  it('rejects options that are not an object', () => {
    expect(() => computeBlockHashes(tokens, 4, 'lora' as never)).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidOption }),
    );
  });
});
