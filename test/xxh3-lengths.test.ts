import { describe, expect, it } from 'vitest';

import { ErrorCode } from '../src/errors.js';
import { hashBytes } from '../src/hash/block-hash.js';
import { xxh3Into, xxh3PairInto, xxh3Seed, xxh3WordBatchInto } from '../src/hash/xxh3.js';
import { xxh3Reference } from './support/xxh3-reference.js';
import { loadNativeXxh3 } from './support/native-xxh3.js';

// Both fast XXH3-64s, the JavaScript one (src/hash/xxh3.ts, the reference) and the WebAssembly
// one (src/hash/wasm, behind `hashBytes`), against an independent bigint transcription of the
// specification, for every length class boundary and every tail length, then a sample against
// native libxxhash.

const SEEDS = [0n, 1337n, 0xfedc_ba98_7654_3210n]; // the last one > 2^53 and > 2^63
const LONG_LENGTHS = [4095, 4096, 4097, 5000, 65_536];

/** Deterministic pseudo-random bytes (xorshift32). */
function randomBytes(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let x = seed | 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes;
}

const DATA = randomBytes(65_536 + 8, 0x5eed);

function hashAt(bytes: Uint8Array, offset: number, length: number, seed: bigint): bigint {
  const out = new Uint32Array(2);
  xxh3Into(bytes, offset, length, xxh3Seed(seed), out, 0);
  return (BigInt(out[1]!) << 32n) | BigInt(out[0]!);
}

/** The JavaScript xxh3 through its byte-range API. */
function hashJs(bytes: Uint8Array, seed: bigint): bigint {
  return hashAt(bytes, 0, bytes.length, seed);
}

const IMPLEMENTATIONS: ReadonlyArray<{ name: string; hash: (bytes: Uint8Array, seed: bigint) => bigint }> = [
  { name: 'JavaScript xxh3', hash: hashJs },
  { name: 'WebAssembly xxh3 (hashBytes)', hash: hashBytes },
];

function hex(x: bigint): string {
  return `0x${x.toString(16).padStart(16, '0')}`;
}

for (const impl of IMPLEMENTATIONS) {
  describe(`${impl.name} against the bigint reference`, () => {
    it('matches for every length 0..2048 with seeds 0, 1337 and 0xfedcba9876543210', () => {
      const mismatches: string[] = [];
      for (const seed of SEEDS) {
        for (let length = 0; length <= 2048; length++) {
          const input = DATA.subarray(0, length);
          const expected = xxh3Reference(input, seed);
          const actual = impl.hash(input, seed);
          if (actual !== expected) mismatches.push(`seed ${seed} length ${length}: ${hex(actual)} != ${hex(expected)}`);
        }
      }
      expect(mismatches).toEqual([]);
    });

    it('matches for multi-block long inputs', () => {
      for (const seed of SEEDS) {
        for (const length of LONG_LENGTHS) {
          const input = DATA.subarray(0, length);
          expect(hex(impl.hash(input, seed)), `seed ${seed} length ${length}`).toBe(hex(xxh3Reference(input, seed)));
        }
      }
    });

    it('accepts the largest u64 seed', () => {
      const seed = (1n << 64n) - 1n;
      expect(impl.hash(DATA.subarray(0, 100), seed)).toBe(xxh3Reference(DATA.subarray(0, 100), seed));
      expect(impl.hash(DATA.subarray(0, 1000), seed)).toBe(xxh3Reference(DATA.subarray(0, 1000), seed));
    });
  });
}

describe('JavaScript xxh3 entry points', () => {
  it('hashes a range at any byte offset of a larger array', () => {
    const mismatches: string[] = [];
    for (const offset of [1, 2, 3, 5]) {
      for (let length = 0; length <= 300; length++) {
        const expected = xxh3Reference(DATA.subarray(offset, offset + length), 1337n);
        const actual = hashAt(DATA, offset, length, 1337n);
        if (actual !== expected) mismatches.push(`offset ${offset} length ${length}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('hashes word batches in place like the byte path', () => {
    const words = new Uint32Array(DATA.buffer, 0, 4096);
    for (const wordsPerInput of [1, 2, 3, 4, 5, 16, 17, 32, 33, 60, 61, 64, 256, 257, 512]) {
      const count = Math.floor(1000 / wordsPerInput) + 1;
      const out = new Uint32Array(2 * count + 2);
      xxh3WordBatchInto(words, 3, wordsPerInput, count, xxh3Seed(1337n), out, 2);
      for (let i = 0; i < count; i++) {
        const offset = 4 * (3 + i * wordsPerInput);
        const expected = xxh3Reference(DATA.subarray(offset, offset + 4 * wordsPerInput), 1337n);
        const actual = (BigInt(out[2 + 2 * i + 1]!) << 32n) | BigInt(out[2 + 2 * i]!);
        expect(actual, `${wordsPerInput} words, input ${i}`).toBe(expected);
      }
    }
  });

  it('hashes a pair of u64 halves like their 16 little-endian bytes', () => {
    const out = new Uint32Array(2);
    const seed = xxh3Seed(1337n);
    for (let k = 0; k < 200; k++) {
      const bytes = DATA.subarray(16 * k, 16 * k + 16);
      const view = new DataView(bytes.buffer, bytes.byteOffset, 16);
      const w = [0, 4, 8, 12].map((at) => view.getUint32(at, true));
      xxh3PairInto(seed, w[0]!, w[1]!, w[2]!, w[3]!, out, 0);
      expect((BigInt(out[1]!) << 32n) | BigInt(out[0]!)).toBe(xxh3Reference(bytes, 1337n));
    }
  });
});

describe('xxh3 argument checks', () => {
  it('rejects seeds outside u64', () => {
    for (const seed of [-1n, 1n << 64n]) {
      expect(() => xxh3Seed(seed)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
      expect(() => hashBytes(DATA.subarray(0, 4), seed)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
    }
  });

  it('rejects a byte range outside the input', () => {
    const out = new Uint32Array(2);
    const seed = xxh3Seed(1337n);
    const bytes = new Uint8Array(10);
    for (const [offset, length] of [[-1, 4], [8, 3], [0, 11], [0.5, 2]] as const) {
      expect(() => xxh3Into(bytes, offset, length, seed, out, 0)).toThrow(
        expect.objectContaining({ code: ErrorCode.InvalidOption }),
      );
    }
  });

  it('rejects a word batch running past the input', () => {
    const out = new Uint32Array(64);
    expect(() => xxh3WordBatchInto(new Uint32Array(10), 2, 4, 3, xxh3Seed(1337n), out, 0)).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidOption }),
    );
  });
});

const native = await loadNativeXxh3();

for (const impl of IMPLEMENTATIONS) {
  describe(`${impl.name} against @node-rs/xxhash (native libxxhash)`, () => {
    it.skipIf(native === null)('matches on every length 0..300 and a sample of longer lengths', () => {
      const lengths = [...Array.from({ length: 301 }, (_, i) => i), 511, 512, 1023, 1024, 1025, 2049, ...LONG_LENGTHS];
      const mismatches: string[] = [];
      for (const seed of [...SEEDS, (1n << 64n) - 1n]) {
        for (const length of lengths) {
          const input = DATA.subarray(3, 3 + length);
          if (impl.hash(input, seed) !== native!(input, seed)) mismatches.push(`seed ${seed} length ${length}`);
        }
      }
      expect(mismatches).toEqual([]);
    });
  });
}
