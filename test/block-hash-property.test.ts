import { describe, expect, it } from 'vitest';

import { computeBlockHashes, computeSequenceHashes, hashBytes, XXH3_SEED } from '../src/hash/block-hash.js';
import {
  HEAP,
  copyU64s,
  copyU64sPortable,
  ensureMemory,
  swapWordsPortable,
  u32,
  writeU64s,
  writeU64sPortable,
} from '../src/hash/wasm-xxh3.js';
import { xxh3Into, xxh3PairInto, xxh3Seed, xxh3WordBatchInto } from '../src/hash/xxh3.js';
import { loadNativeXxh3 } from './support/native-xxh3.js';

// The WebAssembly block hashing against the JavaScript xxh3 (the reference) and native
// libxxhash (@node-rs/xxhash) on random prompts: random lengths, block sizes 1-256 and seeds
// (through random LoRA names, whose seeds cover the whole u64 range), random multimodal hashes.

const native = await loadNativeXxh3();
const U64_MAX = (1n << 64n) - 1n;

/** Deterministic xorshift32 stream; the case number in failures makes a case reproducible. */
class Random {
  #x: number;
  constructor(seed: number) {
    this.#x = seed | 1;
  }
  next(): number {
    let x = this.#x;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#x = x;
    return x >>> 0;
  }
  below(n: number): number {
    return this.next() % n;
  }
  u64(): bigint {
    return (BigInt(this.next()) << 32n) | BigInt(this.next());
  }
}

/** The LoRA seed by Dynamo's rule, through the JavaScript xxh3. */
function jsLoraSeed(name: string): bigint {
  const bytes = new TextEncoder().encode(name);
  const out = new Uint32Array(2);
  xxh3Into(bytes, 0, bytes.length, xxh3Seed(0n), out, 0);
  return (XXH3_SEED + ((BigInt(out[1]!) << 32n) | BigInt(out[0]!))) & U64_MAX;
}

/** Block hashes by the JavaScript xxh3's batch over the words in place. */
function jsBlockHashes(tokens: Uint32Array, blockSize: number, seed: bigint): BigUint64Array {
  const blocks = Math.floor(tokens.length / blockSize);
  const result = new BigUint64Array(blocks);
  xxh3WordBatchInto(tokens, 0, blockSize, blocks, xxh3Seed(seed), new Uint32Array(result.buffer), 0);
  return result;
}

function randomTokens(random: Random, length: number): Uint32Array {
  const tokens = new Uint32Array(length);
  // Mostly vocabulary-sized ids, sometimes any u32 (the high bytes matter to the hash).
  const wide = random.below(4) === 0;
  for (let i = 0; i < length; i++) tokens[i] = wide ? random.next() : random.below(150_000);
  return tokens;
}

function randomName(random: Random): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz-_0123456789ßé漢🦙';
  const chars = Array.from(alphabet);
  let name = '';
  const length = 1 + random.below(random.below(8) === 0 ? 400 : 24);
  for (let i = 0; i < length; i++) name += chars[random.below(chars.length)];
  return name;
}

describe('computeBlockHashes against the JavaScript xxh3 and native libxxhash', () => {
  it('agrees on 400 random prompts, block sizes 1-256, random LoRA seeds', () => {
    const random = new Random(0x5eed_1234);
    const failures: string[] = [];
    for (let n = 0; n < 400; n++) {
      const blockSize = 1 + random.below(256);
      const length = random.below(blockSize * (1 + random.below(24)) + blockSize);
      const tokens = randomTokens(random, length);
      const loraName = random.below(3) === 0 ? null : randomName(random);
      const seed = loraName === null ? XXH3_SEED : jsLoraSeed(loraName);
      const actual = computeBlockHashes(tokens, blockSize, { loraName });
      const expected = jsBlockHashes(tokens, blockSize, seed);
      if (actual.length !== Math.floor(length / blockSize) || !equal(actual, expected)) {
        failures.push(`case ${n}: ${length} tokens, bs ${blockSize}, lora ${JSON.stringify(loraName)}`);
        continue;
      }
      if (native !== null) {
        for (let b = 0; b < actual.length; b++) {
          const bytes = new Uint8Array(tokens.buffer, 4 * b * blockSize, 4 * blockSize);
          if (native(bytes, seed) !== actual[b]) failures.push(`case ${n}: block ${b} differs from native`);
        }
      }
    }
    expect(failures).toEqual([]);
  });

  it('gives the same hashes for a number[] and a Uint32Array of the same tokens', () => {
    const random = new Random(77);
    for (let n = 0; n < 50; n++) {
      const blockSize = 1 + random.below(256);
      const tokens = randomTokens(random, random.below(4 * blockSize + 1));
      expect(computeBlockHashes(Array.from(tokens), blockSize)).toEqual(computeBlockHashes(tokens, blockSize));
    }
  });

  it('agrees with byte hashing of tokens ++ sorted mm hashes on random multimodal prompts', () => {
    const random = new Random(0xbeef);
    const failures: string[] = [];
    for (let n = 0; n < 200; n++) {
      const blockSize = 1 + random.below(256);
      const blocks = random.below(6);
      const tokens = randomTokens(random, blocks * blockSize + random.below(blockSize));
      const mm = Array.from({ length: blocks + random.below(2) }, () =>
        random.below(2) === 0 ? null : Array.from({ length: random.below(40) }, () => random.u64()),
      );
      const loraName = random.below(2) === 0 ? null : randomName(random);
      const seed = loraName === null ? XXH3_SEED : jsLoraSeed(loraName);
      const actual = computeBlockHashes(tokens, blockSize, { loraName, blockMmHashes: mm });
      for (let b = 0; b < blocks; b++) {
        const extra = [...(mm[b] ?? [])].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
        const view = new DataView(new ArrayBuffer(4 * blockSize + 8 * extra.length));
        for (let i = 0; i < blockSize; i++) view.setUint32(4 * i, tokens[b * blockSize + i]!, true);
        extra.forEach((h, i) => view.setBigUint64(4 * blockSize + 8 * i, h, true));
        const bytes = new Uint8Array(view.buffer);
        const out = new Uint32Array(2);
        xxh3Into(bytes, 0, bytes.length, xxh3Seed(seed), out, 0);
        const expected = (BigInt(out[1]!) << 32n) | BigInt(out[0]!);
        if (actual[b] !== expected) failures.push(`case ${n}: block ${b} (bs ${blockSize}, ${extra.length} mm)`);
        if (native !== null && native(bytes, seed) !== expected) failures.push(`case ${n}: block ${b} native`);
      }
    }
    expect(failures).toEqual([]);
  });

  it('hashBytes agrees with both on random lengths and seeds', () => {
    const random = new Random(4242);
    const data = randomTokens(random, 1200);
    const bytes = new Uint8Array(data.buffer);
    const out = new Uint32Array(2);
    for (let n = 0; n < 500; n++) {
      const offset = random.below(64);
      const length = random.below(random.below(4) === 0 ? 4000 : 260);
      const seed = random.below(5) === 0 ? BigInt(random.below(2000)) : random.u64();
      const input = bytes.subarray(offset, offset + length);
      xxh3Into(input, 0, input.length, xxh3Seed(seed), out, 0);
      const expected = (BigInt(out[1]!) << 32n) | BigInt(out[0]!);
      expect(hashBytes(input, seed), `case ${n}`).toBe(expected);
      if (native !== null) expect(native(input, seed), `case ${n} native`).toBe(expected);
    }
  });
});

describe('computeSequenceHashes against the JavaScript xxh3', () => {
  it('agrees on random local hashes', () => {
    const random = new Random(99);
    const out = new Uint32Array(2);
    const seed = xxh3Seed(XXH3_SEED);
    for (let n = 0; n < 50; n++) {
      const local = BigUint64Array.from({ length: random.below(300) }, () => random.u64());
      const actual = computeSequenceHashes(local);
      const expected = new BigUint64Array(local.length);
      for (let i = 0; i < local.length; i++) {
        if (i === 0) {
          expected[0] = local[0]!;
          continue;
        }
        const a = expected[i - 1]!;
        const b = local[i]!;
        xxh3PairInto(seed, Number(a & 0xffffffffn), Number(a >> 32n), Number(b & 0xffffffffn), Number(b >> 32n), out, 0);
        expected[i] = (BigInt(out[1]!) << 32n) | BigInt(out[0]!);
      }
      expect(actual, `case ${n}`).toEqual(expected);
    }
  });
});

describe('the WebAssembly memory', () => {
  it('grows for a large prompt and keeps hashing correctly after', () => {
    const random = new Random(5);
    const big = randomTokens(random, 2_000_000);
    expect(computeBlockHashes(big, 64)).toEqual(jsBlockHashes(big, 64, XXH3_SEED));
    const small = randomTokens(random, 100);
    expect(computeBlockHashes(small, 16)).toEqual(jsBlockHashes(small, 16, XXH3_SEED));
  });

  it('an input past the 2 GiB layout is a typed error, and hashing goes on after it', () => {
    // A sparse array: 2^30 tokens without their memory. Its layout (4 GiB) once wrapped
    // around in 32-bit address arithmetic and failed inside TypedArray.set, untyped.
    const huge = new Array<number>(2 ** 30);
    expect(() => computeBlockHashes(huge, 16)).toThrow(expect.objectContaining({ code: 'KVX_INVALID_FIELD', message: expect.stringContaining('too large to hash') as unknown }));
    expect(() => hashBytes({ length: 2 ** 31 } as Uint8Array)).toThrow(expect.objectContaining({ code: 'KVX_INVALID_FIELD' }));
    const small = randomTokens(new Random(6), 64);
    expect(computeBlockHashes(small, 16)).toEqual(jsBlockHashes(small, 16, XXH3_SEED));
  });

  it('has big-endian helpers that write and read the same little-endian bytes as the native ones', () => {
    ensureMemory(HEAP + 1024);
    const values = BigUint64Array.of(1n, 0x0102_0304_0506_0708n, U64_MAX, 0xfedc_ba98_7654_3210n);
    writeU64s(values, HEAP);
    expect(copyU64sPortable(HEAP, 4)).toEqual(values);
    writeU64sPortable(values, HEAP + 256);
    expect(copyU64s(HEAP + 256, 4)).toEqual(values);
    // Unaligned to 8 (the multimodal staging writes after an odd number of tokens).
    writeU64s(values, HEAP + 516);
    expect(copyU64sPortable(HEAP + 516, 4)).toEqual(values);
    u32[HEAP >>> 2] = 0x0102_0304;
    swapWordsPortable(HEAP, 1);
    expect(u32[HEAP >>> 2]).toBe(0x0403_0201);
  });
});

function equal(a: BigUint64Array, b: BigUint64Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
