/**
 * XXH3-64 in AssemblyScript, compiled to src/hash/wasm/xxh3.wasm (`npm run build:wasm`; the
 * options are in asconfig.json beside this file). Written from the public xxHash specification
 * (doc/xxhash_spec.md, "XXH3 Algorithm Description"); src/hash/xxh3.ts is the JavaScript
 * transcription of the same text and the reference the tests compare this module with.
 *
 * The module owns no allocator: the JavaScript side (src/hash/wasm-xxh3.ts) lays out its
 * inputs and outputs from `heapBase()` upwards and grows the memory itself. Every export
 * works on byte addresses in that memory and returns nothing; u64 results are stored little
 * endian. Seeds cross the boundary as two u32 halves, so no call converts a `bigint`.
 *
 * Shaped for Dynamo's block hashes: `hashBlocks` hashes every block of a prompt in one call,
 * with the length dispatch and the seed's derived secret done once per call, not per block.
 */

const PRIME32_1: u64 = 0x9e3779b1;
const PRIME32_2: u64 = 0x85ebca77;
const PRIME32_3: u64 = 0xc2b2ae3d;
const PRIME64_1: u64 = 0x9e3779b185ebca87;
const PRIME64_2: u64 = 0xc2b2ae3d27d4eb4f;
const PRIME64_3: u64 = 0x165667b19e3779f9;
const PRIME64_4: u64 = 0x85ebca77c2b2ae63;
const PRIME64_5: u64 = 0x27d4eb2f165667c5;
const PRIME_MX1: u64 = 0x165667919e3779f9;
const PRIME_MX2: u64 = 0x9fb21c651e98df25;

const SECRET_SIZE: usize = 192;
const STRIPE_LEN: usize = 64;
/** (SECRET_SIZE - STRIPE_LEN) / 8 stripes per 1024-byte block. */
const STRIPES_PER_BLOCK: usize = 16;
const BLOCK_LEN: usize = STRIPE_LEN * STRIPES_PER_BLOCK;

/** The specification's 192-byte default secret. */
const SECRET: usize = memory.data<u8>([
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
]);

/**
 * The secret derived from the current seed: for every 16 bytes, (secret64 + seed) then
 * (secret64 - seed). The long hash uses it as its custom secret, and the 17-240 byte paths
 * read their aligned mixing keys from it, so no key is recomputed per block.
 */
const DERIVED: usize = memory.data(<i32>SECRET_SIZE, 16);
let derivedSeed: u64 = 0;
let derivedReady = false;

function useSeed(seed: u64): void {
  if (derivedReady && seed == derivedSeed) return;
  for (let i: usize = 0; i < SECRET_SIZE; i += 16) {
    store<u64>(DERIVED + i, load<u64>(SECRET + i) + seed);
    store<u64>(DERIVED + i + 8, load<u64>(SECRET + i + 8) - seed);
  }
  derivedSeed = seed;
  derivedReady = true;
}

/** The low 64 bits of a * b xor its high 64 bits, from four 32x32 -> 64 products. */
// @ts-ignore: decorator
@inline function mulFold(a: u64, b: u64): u64 {
  const aLo = a & 0xffffffff;
  const aHi = a >> 32;
  const bLo = b & 0xffffffff;
  const bHi = b >> 32;
  const ll = aLo * bLo;
  const hl = aHi * bLo;
  const lh = aLo * bHi;
  const cross = (ll >> 32) + (hl & 0xffffffff) + lh;
  const upper = (hl >> 32) + (cross >> 32) + aHi * bHi;
  const lower = (cross << 32) | (ll & 0xffffffff);
  return lower ^ upper;
}

// @ts-ignore: decorator
@inline function avalanche(h: u64): u64 {
  h ^= h >> 37;
  h *= PRIME_MX1;
  return h ^ (h >> 32);
}

// @ts-ignore: decorator
@inline function avalancheXxh64(h: u64): u64 {
  h ^= h >> 33;
  h *= PRIME64_2;
  h ^= h >> 29;
  h *= PRIME64_3;
  return h ^ (h >> 32);
}

function hash0to3(p: usize, len: usize, seed: u64): u64 {
  if (len == 0) return avalancheXxh64(seed ^ load<u64>(SECRET + 56) ^ load<u64>(SECRET + 64));
  const c1 = <u32>load<u8>(p);
  const c2 = <u32>load<u8>(p + (len >> 1));
  const c3 = <u32>load<u8>(p + len - 1);
  const combined = (c1 << 16) | (c2 << 24) | c3 | (<u32>len << 8);
  const bitflip = <u64>(load<u32>(SECRET) ^ load<u32>(SECRET + 4)) + seed;
  return avalancheXxh64(<u64>combined ^ bitflip);
}

function hash4to8(p: usize, len: usize, seed: u64): u64 {
  const modified = seed ^ (<u64>bswap<u32>(<u32>seed) << 32);
  const input64 = <u64>load<u32>(p + len - 4) + (<u64>load<u32>(p) << 32);
  const bitflip = (load<u64>(SECRET + 8) ^ load<u64>(SECRET + 16)) - modified;
  let h = input64 ^ bitflip;
  h ^= rotl<u64>(h, 49) ^ rotl<u64>(h, 24);
  h *= PRIME_MX2;
  h ^= (h >> 35) + <u64>len;
  h *= PRIME_MX2;
  return h ^ (h >> 28);
}

// @ts-ignore: decorator
@inline function hash16Words(first: u64, last: u64, len: usize, seed: u64): u64 {
  const lo = first ^ ((load<u64>(SECRET + 24) ^ load<u64>(SECRET + 32)) + seed);
  const hi = last ^ ((load<u64>(SECRET + 40) ^ load<u64>(SECRET + 48)) - seed);
  return avalanche(<u64>len + bswap<u64>(lo) + hi + mulFold(lo, hi));
}

function hash9to16(p: usize, len: usize, seed: u64): u64 {
  return hash16Words(load<u64>(p), load<u64>(p + len - 8), len, seed);
}

/** fold((input ^ key) * (input' ^ key')) with both keys already seeded (DERIVED). */
// @ts-ignore: decorator
@inline function mix16(p: usize, key: usize): u64 {
  return mulFold(load<u64>(p) ^ load<u64>(key), load<u64>(p + 8) ^ load<u64>(key + 8));
}

/** mix16 with the keys read from the default secret at an unaligned offset and seeded here. */
// @ts-ignore: decorator
@inline function mix16Seeded(p: usize, offset: usize, seed: u64): u64 {
  const k0 = load<u64>(SECRET + offset) + seed;
  const k1 = load<u64>(SECRET + offset + 8) - seed;
  return mulFold(load<u64>(p) ^ k0, load<u64>(p + 8) ^ k1);
}

/** 17-128 bytes; DERIVED holds the seed's keys. */
function hash17to128(p: usize, len: usize): u64 {
  let acc = <u64>len * PRIME64_1;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        acc += mix16(p + 48, DERIVED + 96);
        acc += mix16(p + len - 64, DERIVED + 112);
      }
      acc += mix16(p + 32, DERIVED + 64);
      acc += mix16(p + len - 48, DERIVED + 80);
    }
    acc += mix16(p + 16, DERIVED + 32);
    acc += mix16(p + len - 32, DERIVED + 48);
  }
  acc += mix16(p, DERIVED);
  acc += mix16(p + len - 16, DERIVED + 16);
  return avalanche(acc);
}

/** 129-240 bytes; DERIVED holds the seed's keys. */
function hash129to240(p: usize, len: usize, seed: u64): u64 {
  let acc = <u64>len * PRIME64_1;
  for (let i: usize = 0; i < 128; i += 16) acc += mix16(p + i, DERIVED + i);
  acc = avalanche(acc);
  const rounds = len >> 4;
  for (let i: usize = 8; i < rounds; i++) acc += mix16Seeded(p + 16 * i, 16 * (i - 8) + 3, seed);
  acc += mix16Seeded(p + len - 16, 119, seed);
  return avalanche(acc);
}

/**
 * Two accumulator lanes (one v128) through one 16-byte slice of a stripe:
 * acc[lane ^ 1] += input; acc[lane] += lo32(input ^ key) * hi32(input ^ key).
 */
// @ts-ignore: decorator
@inline function accumulate2(acc: v128, p: usize, key: usize): v128 {
  const data = v128.load(p);
  const keyed = v128.xor(data, v128.load(key));
  const product = i64x2.extmul_low_i32x4_u(
    i32x4.shuffle(keyed, keyed, 0, 2, 0, 2),
    i32x4.shuffle(keyed, keyed, 1, 3, 1, 3),
  );
  return i64x2.add(i64x2.add(acc, product), i64x2.shuffle(data, data, 1, 0));
}

/** acc = (acc ^ (acc >> 47) ^ key) * PRIME32_1, two lanes. */
// @ts-ignore: decorator
@inline function scramble2(acc: v128, key: usize): v128 {
  const x = v128.xor(v128.xor(acc, i64x2.shr_u(acc, 47)), v128.load(key));
  return i64x2.mul(x, i64x2.splat(PRIME32_1));
}

// @ts-ignore: decorator
@inline function merge2(acc: v128, key: usize): u64 {
  return mulFold(i64x2.extract_lane(acc, 0) ^ load<u64>(key), i64x2.extract_lane(acc, 1) ^ load<u64>(key + 8));
}

/** Inputs over 240 bytes, with DERIVED as the custom secret. */
function hashLong(p: usize, len: usize): u64 {
  const s = DERIVED;
  let a0 = i64x2(PRIME32_3, PRIME64_1);
  let a1 = i64x2(PRIME64_2, PRIME64_3);
  let a2 = i64x2(PRIME64_4, PRIME32_2);
  let a3 = i64x2(PRIME64_5, PRIME32_1);
  const blocks = (len - 1) / BLOCK_LEN;
  let q = p;
  for (let n: usize = 0; n < blocks; n++) {
    for (let k: usize = 0; k < STRIPES_PER_BLOCK * 8; k += 8, q += STRIPE_LEN) {
      a0 = accumulate2(a0, q, s + k);
      a1 = accumulate2(a1, q + 16, s + k + 16);
      a2 = accumulate2(a2, q + 32, s + k + 32);
      a3 = accumulate2(a3, q + 48, s + k + 48);
    }
    const key = s + SECRET_SIZE - STRIPE_LEN;
    a0 = scramble2(a0, key);
    a1 = scramble2(a1, key + 16);
    a2 = scramble2(a2, key + 32);
    a3 = scramble2(a3, key + 48);
  }
  const stripes = (len - 1 - blocks * BLOCK_LEN) / STRIPE_LEN;
  for (let k: usize = 0; k < stripes * 8; k += 8, q += STRIPE_LEN) {
    a0 = accumulate2(a0, q, s + k);
    a1 = accumulate2(a1, q + 16, s + k + 16);
    a2 = accumulate2(a2, q + 32, s + k + 32);
    a3 = accumulate2(a3, q + 48, s + k + 48);
  }
  q = p + len - STRIPE_LEN;
  const last = s + SECRET_SIZE - STRIPE_LEN - 7;
  a0 = accumulate2(a0, q, last);
  a1 = accumulate2(a1, q + 16, last + 16);
  a2 = accumulate2(a2, q + 32, last + 32);
  a3 = accumulate2(a3, q + 48, last + 48);
  let acc = <u64>len * PRIME64_1;
  acc += merge2(a0, s + 11);
  acc += merge2(a1, s + 27);
  acc += merge2(a2, s + 43);
  acc += merge2(a3, s + 59);
  return avalanche(acc);
}

/** XXH3-64 of len bytes at p; DERIVED must hold `seed`'s keys (see `useSeed`). */
function hashSeeded(p: usize, len: usize, seed: u64): u64 {
  if (len <= 3) return hash0to3(p, len, seed);
  if (len <= 8) return hash4to8(p, len, seed);
  if (len <= 16) return hash9to16(p, len, seed);
  if (len <= 128) return hash17to128(p, len);
  if (len <= 240) return hash129to240(p, len, seed);
  return hashLong(p, len);
}

/** The start of free memory, 16-byte aligned: the JavaScript side's first input goes here. */
export function heapBase(): usize {
  return (__heap_base + 15) & ~(<usize>15);
}

/** XXH3-64 (seed = seedHi:seedLo) of `len` bytes at `input`, stored as a u64 at `output`. */
export function hashBytes(input: usize, len: usize, seedLo: u32, seedHi: u32, output: usize): void {
  const seed = (<u64>seedHi << 32) | <u64>seedLo;
  useSeed(seed);
  store<u64>(output, hashSeeded(input, len, seed));
}

/**
 * XXH3-64 of `count` consecutive inputs of `blockBytes` bytes each from `input`, hash i stored
 * as a u64 at output + 8i. One loop per length class: the dispatch happens once per call.
 */
export function hashBlocks(
  input: usize,
  blockBytes: usize,
  count: usize,
  seedLo: u32,
  seedHi: u32,
  output: usize,
): void {
  const seed = (<u64>seedHi << 32) | <u64>seedLo;
  useSeed(seed);
  const end = output + 8 * count;
  let p = input;
  let o = output;
  if (blockBytes > 240) {
    for (; o < end; o += 8, p += blockBytes) store<u64>(o, hashLong(p, blockBytes));
  } else if (blockBytes > 128) {
    for (; o < end; o += 8, p += blockBytes) store<u64>(o, hash129to240(p, blockBytes, seed));
  } else if (blockBytes > 16) {
    for (; o < end; o += 8, p += blockBytes) store<u64>(o, hash17to128(p, blockBytes));
  } else {
    for (; o < end; o += 8, p += blockBytes) store<u64>(o, hashSeeded(p, blockBytes, seed));
  }
}

/**
 * Dynamo's rolling sequence hash over `count` u64s at `input`, seed 1337:
 * out[0] = in[0], out[i] = XXH3-64(le_u64(out[i-1]) ++ le_u64(in[i])), stored from `output`.
 */
export function sequenceHashes(input: usize, count: usize, output: usize): void {
  if (count == 0) return;
  let previous = load<u64>(input);
  store<u64>(output, previous);
  for (let i: usize = 8; i < 8 * count; i += 8) {
    previous = hash16Words(previous, load<u64>(input + i), 16, 1337);
    store<u64>(output + i, previous);
  }
}
