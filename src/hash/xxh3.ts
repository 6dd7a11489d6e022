/**
 * XXH3-64 with a 64-bit seed, in plain JavaScript number arithmetic.
 *
 * This is the hash Dynamo uses for KV blocks (`xxh3_64_with_seed`, seed 1337). The product
 * hashes in WebAssembly (wasm-xxh3.ts, ~10x faster per block); this file is the reference the
 * tests compare the WebAssembly module with, and the JavaScript baseline of the hash benchmark.
 * It was the product's hasher, on every request on the router's main thread, and is shaped
 * for that:
 * - every 64-bit value is a pair of u32 halves (`lo`, `hi`). Products are built from 16-bit
 *   limbs, so every partial product is below 2^32 and every weighted sum of them below 2^53:
 *   exact in a double, reduced with `>>> 0`. No `bigint` outside seed set-up (a bigint op
 *   allocates).
 * - everything that depends only on the seed (the derived secret for inputs > 240 bytes, the
 *   secret words xor/plus/minus the seed for shorter ones) is computed once per seed in
 *   `Xxh3Seed`; `xxh3Seed(seed)` caches those objects.
 * - input is read as little-endian u32 words. A token block already is such words, so token
 *   arrays are hashed in place with no byte view and no copy (`xxh3WordBatchInto`).
 * - results go into a caller's `Uint32Array` (lo at `index`, hi at `index + 1`), which on a
 *   little-endian host is exactly a `BigUint64Array` element viewed as two u32s.
 * - nothing is allocated per hash: helpers return their two halves through one shared
 *   `Uint32Array`, the long-hash state lives in one shared `Float64Array`.
 *
 * Timings in comments are ns per 64-token (256-byte) block, batched, 8192 tokens, on the
 * shared 2-core development box (Node 20): noisy, compare them with each other only.
 *
 * Algorithm: the public xxHash specification (doc/xxhash_spec.md, "XXH3 Algorithm
 * Description"). The independent bigint transcription in `test/support/xxh3-reference.ts`
 * and the native `@node-rs/xxhash` check this file for every length 0..2048 and several seeds.
 */

import { ErrorCode, KvIndexError } from '../errors.js';

// Constants of the specification, as u32 halves.
const PRIME32_1 = 0x9e3779b1;
const PRIME32_2 = 0x85ebca77;
const PRIME32_3 = 0xc2b2ae3d;
const PRIME64_1_LO = 0x85ebca87;
const PRIME64_1_HI = 0x9e3779b1;
const PRIME64_2_LO = 0x27d4eb4f;
const PRIME64_2_HI = 0xc2b2ae3d;
const PRIME64_3_LO = 0x9e3779f9;
const PRIME64_3_HI = 0x165667b1;
const PRIME64_4_LO = 0xc2b2ae63;
const PRIME64_4_HI = 0x85ebca77;
const PRIME64_5_LO = 0x165667c5;
const PRIME64_5_HI = 0x27d4eb2f;
const PRIME_MX1_LO = 0x9e3779f9;
const PRIME_MX1_HI = 0x16566791;
const PRIME_MX2_LO = 0x1e98df25;
const PRIME_MX2_HI = 0x9fb21c65;


/** The specification's 192-byte default secret. */
const DEFAULT_SECRET = Uint8Array.from([
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

const SECRET_SIZE = 192;
const STRIPE_LEN = 64;
/** (SECRET_SIZE - STRIPE_LEN) / 8 stripes per block with the 192-byte secret. */
const STRIPES_PER_BLOCK = 16;
const BLOCK_LEN = STRIPE_LEN * STRIPES_PER_BLOCK;
/** Secret offsets used by the long hash (specification, "large inputs"). */
const SCRAMBLE_OFFSET = SECRET_SIZE - STRIPE_LEN;
const LAST_STRIPE_OFFSET = SECRET_SIZE - STRIPE_LEN - 7;
const MERGE_OFFSET = 11;

const U64_MAX = (1n << 64n) - 1n;

/** Everything XXH3-64 needs that depends only on the seed, computed once per seed. */
export class Xxh3Seed {
  /** The seed, a u64. */
  readonly seed: bigint;
  /** seed ^ secret[56..64] ^ secret[64..72]: the pre-avalanche hash of empty input. */
  readonly emptyLo: number;
  readonly emptyHi: number;
  /** (secret32[0] ^ secret32[4]) + seed, for 1-3 byte inputs. */
  readonly key1to3Lo: number;
  readonly key1to3Hi: number;
  /** (secret[8..16] ^ secret[16..24]) - modifiedSeed, for 4-8 byte inputs. */
  readonly key4to8Lo: number;
  readonly key4to8Hi: number;
  /** (secret[24..32] ^ secret[32..40]) + seed and (secret[40..48] ^ secret[48..56]) - seed. */
  readonly key9to16FirstLo: number;
  readonly key9to16FirstHi: number;
  readonly key9to16LastLo: number;
  readonly key9to16LastHi: number;
  /**
   * For every secret byte offset `o` (0..176), the 16-byte mixing key of 17-240 byte inputs:
   * words `[4o .. 4o+3]` are (secret64(o) + seed) and (secret64(o+8) - seed) as lo, hi, lo, hi.
   * Indexed by byte offset because the 129-240 path reads the secret at offsets 3 + 16k and 119.
   */
  readonly mixKeys: Uint32Array;
  /**
   * The secret derived from the seed (inputs > 240 bytes) as the u32 starting at every byte
   * offset 0..188, so the unaligned offsets 121 and 11 + 16k read like the aligned ones.
   */
  readonly longSecret: Uint32Array;

  constructor(seed: bigint) {
    if (typeof seed !== 'bigint' || seed < 0n || seed > U64_MAX) {
      throw new KvIndexError(ErrorCode.InvalidOption, `xxh3 seed must be a u64 bigint, got ${String(seed)}`);
    }
    this.seed = seed;
    const secret = new DataView(DEFAULT_SECRET.buffer);
    const s64 = (at: number): bigint => secret.getBigUint64(at, true);
    const s32 = (at: number): bigint => BigInt(secret.getUint32(at, true));
    const plus = (x: bigint): bigint => (x + seed) & U64_MAX;
    const minus = (x: bigint): bigint => (x - seed) & U64_MAX;

    const empty = seed ^ s64(56) ^ s64(64);
    this.emptyLo = lo32(empty);
    this.emptyHi = hi32(empty);
    const key1to3 = plus(s32(0) ^ s32(4));
    this.key1to3Lo = lo32(key1to3);
    this.key1to3Hi = hi32(key1to3);
    const modifiedSeed = seed ^ (BigInt(bswap32(lo32(seed))) << 32n);
    const key4to8 = ((s64(8) ^ s64(16)) - modifiedSeed) & U64_MAX;
    this.key4to8Lo = lo32(key4to8);
    this.key4to8Hi = hi32(key4to8);
    const first = plus(s64(24) ^ s64(32));
    const last = minus(s64(40) ^ s64(48));
    this.key9to16FirstLo = lo32(first);
    this.key9to16FirstHi = hi32(first);
    this.key9to16LastLo = lo32(last);
    this.key9to16LastHi = hi32(last);

    const mixOffsets = SECRET_SIZE - 16 + 1;
    this.mixKeys = new Uint32Array(mixOffsets * 4);
    for (let o = 0; o < mixOffsets; o++) {
      const a = plus(s64(o));
      const b = minus(s64(o + 8));
      this.mixKeys.set([lo32(a), hi32(a), lo32(b), hi32(b)], o * 4);
    }

    const derived = new DataView(new ArrayBuffer(SECRET_SIZE));
    for (let i = 0; i < SECRET_SIZE / 16; i++) {
      derived.setBigUint64(16 * i, plus(s64(16 * i)), true);
      derived.setBigUint64(16 * i + 8, minus(s64(16 * i + 8)), true);
    }
    this.longSecret = new Uint32Array(SECRET_SIZE - 4 + 1);
    for (let o = 0; o < this.longSecret.length; o++) this.longSecret[o] = derived.getUint32(o, true);
  }
}

function lo32(x: bigint): number {
  return Number(x & 0xffffffffn);
}

function hi32(x: bigint): number {
  return Number((x >> 32n) & 0xffffffffn);
}

const seedCache = new Map<bigint, Xxh3Seed>();
/** Distinct seeds kept; a process uses one or two, tests a handful. */
const SEED_CACHE_LIMIT = 64;

/**
 * The precomputed state for `seed` (a u64 bigint), cached: call once and keep the result.
 * Throws `KvIndexError` (`InvalidOption`) when the seed is not a bigint in 0..2^64-1.
 */
export function xxh3Seed(seed: bigint): Xxh3Seed {
  let state = seedCache.get(seed);
  if (state === undefined) {
    state = new Xxh3Seed(seed);
    if (seedCache.size >= SEED_CACHE_LIMIT) seedCache.clear();
    seedCache.set(seed, state);
  }
  return state;
}

/**
 * Second results of the helpers below (a u64 comes back as R[0] = lo, R[1] = hi). A typed
 * array, not module-level `let`s: V8 boxes a non-Smi number stored in a module variable, and
 * u32 halves >= 2^31 are not Smis. Measured on a 32x32->64 product in a loop: 16-26 ns per
 * call returning through two `let`s, 4 ns through this array.
 */
const R = new Uint32Array(2);

/** 2^-32: turns a multiple of 2^32 held in a double into its carry count, exactly. */
const INV_2_32 = 1 / 4294967296;

/**
 * Long-hash accumulators, 8 lanes of 3 doubles: lane i holds its u64 as
 * acc[3i] + acc[3i+1] * 2^16 + acc[3i+2] * 2^32 (mod 2^64), unnormalised. A stripe adds the
 * input halves and the four 16-bit limb products of lo32(x) * hi32(x) into the matching
 * coefficient with no carry handling; each coefficient stays below 2^39 over the <= 17
 * stripes between normalisations, so the doubles stay exact. Carries are resolved once per
 * lane at scramble and merge time instead of twice per lane per stripe. Measured together with
 * the `R` array above: 750 -> 435 ns per block; reading words instead of assembling bytes
 * then took it to 300.
 */
const LANES = new Float64Array(24);
const LANES_INIT = Float64Array.of(
  PRIME32_3, 0, 0,
  PRIME64_1_LO, 0, PRIME64_1_HI,
  PRIME64_2_LO, 0, PRIME64_2_HI,
  PRIME64_3_LO, 0, PRIME64_3_HI,
  PRIME64_4_LO, 0, PRIME64_4_HI,
  PRIME32_2, 0, 0,
  PRIME64_5_LO, 0, PRIME64_5_HI,
  PRIME32_1, 0, 0,
);

function bswap32(x: number): number {
  return ((x << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;
}

/**
 * (aLo, aHi) * (kLo, kHi) mod 2^64 into R. The low 32x32 product is built from 16-bit limbs
 * (each partial product < 2^32, their weighted sum < 2^50: exact in a double); the cross
 * terms only need their low 32 bits, which Math.imul gives.
 */
function mul64(aLo: number, aHi: number, kLo: number, kHi: number): void {
  const a0 = aLo & 0xffff;
  const a1 = aLo >>> 16;
  const k0 = kLo & 0xffff;
  const k1 = kLo >>> 16;
  const t = a0 * k0 + (a1 * k0 + a0 * k1) * 65536;
  const lo = t >>> 0;
  R[0] = lo;
  R[1] = a1 * k1 + (t - lo) * INV_2_32 + Math.imul(aLo, kHi) + Math.imul(aHi, kLo);
}

/**
 * The full 128-bit product of two u64s folded to 64 bits (low64 ^ high64) into R. Schoolbook
 * over 16-bit limbs: 16 partial products below 2^32, summed by 16-bit column in pairs of
 * columns (< 2^51), so every double is exact and only three carries are taken. Measured
 * against four 32x32->64 products recombined: 25 vs 65 ns per call in a tight loop.
 */
function mulFold(aLo: number, aHi: number, bLo: number, bHi: number): void {
  const a0 = aLo & 0xffff;
  const a1 = aLo >>> 16;
  const a2 = aHi & 0xffff;
  const a3 = aHi >>> 16;
  const b0 = bLo & 0xffff;
  const b1 = bLo >>> 16;
  const b2 = bHi & 0xffff;
  const b3 = bHi >>> 16;
  const t0 = a0 * b0 + (a1 * b0 + a0 * b1) * 65536;
  const w0 = t0 >>> 0;
  const t1 = (t0 - w0) * INV_2_32 + (a2 * b0 + a1 * b1 + a0 * b2) + (a3 * b0 + a2 * b1 + a1 * b2 + a0 * b3) * 65536;
  const w1 = t1 >>> 0;
  const t2 = (t1 - w1) * INV_2_32 + (a3 * b1 + a2 * b2 + a1 * b3) + (a3 * b2 + a2 * b3) * 65536;
  const w2 = t2 >>> 0;
  const w3 = (t2 - w2) * INV_2_32 + a3 * b3;
  R[0] = w0 ^ w2;
  R[1] = w1 ^ w3;
}

/** XXH3 avalanche of (lo, hi), stored at out[index], out[index + 1]. `hi` may be unreduced. */
function avalancheInto(lo: number, hi: number, out: Uint32Array, index: number): void {
  mul64(lo ^ (hi >>> 5), hi, PRIME_MX1_LO, PRIME_MX1_HI);
  const h = R[1]!;
  out[index] = R[0]! ^ h;
  out[index + 1] = h;
}

/** XXH64's avalanche of (lo, hi), stored at out[index], out[index + 1]. */
function avalancheXxh64Into(lo: number, hi: number, out: Uint32Array, index: number): void {
  mul64(lo ^ (hi >>> 1), hi, PRIME64_2_LO, PRIME64_2_HI);
  const l = R[0]!;
  const h = R[1]!;
  mul64(l ^ ((l >>> 29) | (h << 3)), h ^ (h >>> 29), PRIME64_3_LO, PRIME64_3_HI);
  const h2 = R[1]!;
  out[index] = R[0]! ^ h2;
  out[index + 1] = h2;
}

/*
 * The hash functions below read their input as little-endian u32 words from `w`, through two
 * indexes: `start`, the word holding input bytes 0..3, and `end`, one past the word holding
 * the last four input bytes. XXH3 only ever reads 4-byte-multiples at offsets counted from the
 * start or back from the end, so every read is one aligned array load. For an input whose
 * length is a multiple of 4 (every token block), end = start + length / 4 in the same words;
 * other lengths are laid out twice by `xxh3Into`, once start-aligned and once end-aligned.
 */

/**
 * The 9-16 byte hash from its two keyed 64-bit words: low = first ^ key, high = last ^ key.
 * value = len + bswap64(low) + high + fold(low * high).
 */
function finish9to16(
  len: number,
  lowLo: number,
  lowHi: number,
  highLo: number,
  highHi: number,
  out: Uint32Array,
  index: number,
): void {
  mulFold(lowLo, lowHi, highLo, highHi);
  // bswap64(low) swaps the halves and byte-swaps each. Four u64s summed, carry in a double.
  const sumLo = len + bswap32(lowHi) + (highLo >>> 0) + R[0]!;
  const lo = sumLo >>> 0;
  avalancheInto(lo, bswap32(lowLo) + (highHi >>> 0) + R[1]! + (sumLo - lo) * INV_2_32, out, index);
}

/** Inputs of 0..16 bytes. */
function hashSmall(
  w: Uint32Array,
  start: number,
  end: number,
  len: number,
  s: Xxh3Seed,
  out: Uint32Array,
  index: number,
): void {
  if (len > 8) {
    finish9to16(
      len,
      w[start]! ^ s.key9to16FirstLo,
      w[start + 1]! ^ s.key9to16FirstHi,
      w[end - 2]! ^ s.key9to16LastLo,
      w[end - 1]! ^ s.key9to16LastHi,
      out,
      index,
    );
  } else if (len >= 4) {
    // value = (inputLast | inputFirst << 32) ^ key
    const lo = w[end - 1]! ^ s.key4to8Lo;
    const hi = w[start]! ^ s.key4to8Hi;
    // value ^= rotl(value, 49) ^ rotl(value, 24); value *= PRIME_MX2
    mul64(
      lo ^ ((hi << 17) | (lo >>> 15)) ^ ((lo << 24) | (hi >>> 8)),
      hi ^ ((lo << 17) | (hi >>> 15)) ^ ((hi << 24) | (lo >>> 8)),
      PRIME_MX2_LO,
      PRIME_MX2_HI,
    );
    // value ^= (value >> 35) + len (the sum stays below 2^32); value *= PRIME_MX2
    const h = R[1]!;
    mul64(R[0]! ^ ((h >>> 3) + len), h, PRIME_MX2_LO, PRIME_MX2_HI);
    // value ^= value >> 28
    const l2 = R[0]!;
    const h2 = R[1]!;
    out[index] = l2 ^ ((l2 >>> 28) | (h2 << 4));
    out[index + 1] = h2 ^ (h2 >>> 28);
  } else if (len > 0) {
    // Bytes 0, len >> 1 (both in the first word) and len - 1 (the top byte of the last word).
    const first = w[start]!;
    const combined =
      (w[end - 1]! >>> 24) | (len << 8) | ((first & 0xff) << 16) | (((first >>> ((len >>> 1) << 3)) & 0xff) << 24);
    avalancheXxh64Into(combined ^ s.key1to3Lo, s.key1to3Hi, out, index);
  } else {
    avalancheXxh64Into(s.emptyLo, s.emptyHi, out, index);
  }
}

/** fold((input64 ^ key0) * (input64' ^ key1)) into R for the 16 bytes at word i, keys at secret byte o. */
function mixStep(w: Uint32Array, i: number, keys: Uint32Array, o: number): void {
  const k = o << 2;
  mulFold(w[i]! ^ keys[k]!, w[i + 1]! ^ keys[k + 1]!, w[i + 2]! ^ keys[k + 2]!, w[i + 3]! ^ keys[k + 3]!);
}

function hash17to128(
  w: Uint32Array,
  start: number,
  end: number,
  len: number,
  s: Xxh3Seed,
  out: Uint32Array,
  index: number,
): void {
  const keys = s.mixKeys;
  // The accumulator as two doubles (sum of lo halves, sum of hi halves): at most 9 u32 terms
  // each, exact; the carry is taken once at the end.
  mul64(len, 0, PRIME64_1_LO, PRIME64_1_HI);
  let lo = R[0]!;
  let hi = R[1]!;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        mixStep(w, start + 12, keys, 96);
        lo += R[0]!;
        hi += R[1]!;
        mixStep(w, end - 16, keys, 112);
        lo += R[0]!;
        hi += R[1]!;
      }
      mixStep(w, start + 8, keys, 64);
      lo += R[0]!;
      hi += R[1]!;
      mixStep(w, end - 12, keys, 80);
      lo += R[0]!;
      hi += R[1]!;
    }
    mixStep(w, start + 4, keys, 32);
    lo += R[0]!;
    hi += R[1]!;
    mixStep(w, end - 8, keys, 48);
    lo += R[0]!;
    hi += R[1]!;
  }
  mixStep(w, start, keys, 0);
  lo += R[0]!;
  hi += R[1]!;
  mixStep(w, end - 4, keys, 16);
  lo += R[0]!;
  hi += R[1]!;
  const lo32 = lo >>> 0;
  avalancheInto(lo32, hi + (lo - lo32) * INV_2_32, out, index);
}

function hash129to240(
  w: Uint32Array,
  start: number,
  end: number,
  len: number,
  s: Xxh3Seed,
  out: Uint32Array,
  index: number,
): void {
  const keys = s.mixKeys;
  mul64(len, 0, PRIME64_1_LO, PRIME64_1_HI);
  let lo = R[0]!;
  let hi = R[1]!;
  for (let i = 0; i < 8; i++) {
    mixStep(w, start + 4 * i, keys, 16 * i);
    lo += R[0]!;
    hi += R[1]!;
  }
  // Intermediate avalanche: x ^= x >> 37; x *= PRIME_MX1; x ^= x >> 32.
  let lo32 = lo >>> 0;
  hi = (hi + (lo - lo32) * INV_2_32) >>> 0;
  mul64(lo32 ^ (hi >>> 5), hi, PRIME_MX1_LO, PRIME_MX1_HI);
  hi = R[1]!;
  lo = (R[0]! ^ hi) >>> 0;
  const chunks = len >>> 4;
  for (let i = 8; i < chunks; i++) {
    mixStep(w, start + 4 * i, keys, 16 * (i - 8) + 3);
    lo += R[0]!;
    hi += R[1]!;
  }
  mixStep(w, end - 4, keys, 119);
  lo += R[0]!;
  hi += R[1]!;
  lo32 = lo >>> 0;
  avalancheInto(lo32, hi + (lo - lo32) * INV_2_32, out, index);
}

/**
 * `stripes` consecutive 64-byte stripes from word i, stripe n keyed with the secret at byte
 * o + 8n. Per stripe and lane: acc[lane ^ 1] += input; acc[lane] += lo32(x) * hi32(x) with
 * x = input ^ key. Lanes 2m and 2m+1 only touch each other, so the loop runs pair by pair
 * over all stripes with the pair's six coefficients in locals, touching LANES once per pair
 * per call instead of every stripe (interleaved A/B, best of 41 runs: 280 -> 230 ns per block).
 */
function accumulate(w: Uint32Array, i: number, stripes: number, secret: Uint32Array, o: number): void {
  const acc = LANES;
  for (let pair = 0; pair < 4; pair++) {
    const k = 6 * pair;
    let evenLo = acc[k]!;
    let evenMid = acc[k + 1]!;
    let evenHi = acc[k + 2]!;
    let oddLo = acc[k + 3]!;
    let oddMid = acc[k + 4]!;
    let oddHi = acc[k + 5]!;
    let q = i + 4 * pair;
    let key = o + 16 * pair;
    for (let n = 0; n < stripes; n++, q += 16, key += 8) {
      const d0 = w[q]!;
      const d1 = w[q + 1]!;
      const d2 = w[q + 2]!;
      const d3 = w[q + 3]!;
      oddLo += d0;
      oddHi += d1;
      evenLo += d2;
      evenHi += d3;
      let x = d0 ^ secret[key]!;
      let y = d1 ^ secret[key + 4]!;
      let x0 = x & 0xffff;
      let x1 = x >>> 16;
      let y0 = y & 0xffff;
      let y1 = y >>> 16;
      evenLo += x0 * y0;
      evenMid += x1 * y0 + x0 * y1;
      evenHi += x1 * y1;
      x = d2 ^ secret[key + 8]!;
      y = d3 ^ secret[key + 12]!;
      x0 = x & 0xffff;
      x1 = x >>> 16;
      y0 = y & 0xffff;
      y1 = y >>> 16;
      oddLo += x0 * y0;
      oddMid += x1 * y0 + x0 * y1;
      oddHi += x1 * y1;
    }
    acc[k] = evenLo;
    acc[k + 1] = evenMid;
    acc[k + 2] = evenHi;
    acc[k + 3] = oddLo;
    acc[k + 4] = oddMid;
    acc[k + 5] = oddHi;
  }
}

/** Lane k (a LANES index, 3i) reduced to its u64 value mod 2^64, into R. */
function normaliseLane(k: number): void {
  const acc = LANES;
  const mid = acc[k + 1]!;
  const mid0 = mid & 0xffff; // ToInt32 wraps exactly: mid < 2^39
  const t = acc[k]! + mid0 * 65536;
  const lo = t >>> 0;
  R[0] = lo;
  R[1] = acc[k + 2]! + (mid - mid0) * (1 / 65536) + (t - lo) * INV_2_32;
}

/**
 * acc[i] = (acc[i] ^ (acc[i] >> 47) ^ key[i]) * PRIME32_1 with the last 64 secret bytes. The
 * product goes back as limb coefficients, unnormalised.
 */
function scramble(secret: Uint32Array): void {
  const acc = LANES;
  for (let lane = 0; lane < 8; lane++) {
    const k = 3 * lane;
    normaliseLane(k);
    const hi = R[1]!;
    const x = R[0]! ^ (hi >>> 15) ^ secret[SCRAMBLE_OFFSET + 8 * lane]!;
    const x0 = x & 0xffff;
    const x1 = x >>> 16;
    acc[k] = x0 * (PRIME32_1 & 0xffff);
    acc[k + 1] = x1 * (PRIME32_1 & 0xffff) + x0 * (PRIME32_1 >>> 16);
    const y = hi ^ secret[SCRAMBLE_OFFSET + 8 * lane + 4]!;
    acc[k + 2] = x1 * (PRIME32_1 >>> 16) + (Math.imul(y, PRIME32_1) >>> 0);
  }
}

function hashLong(
  w: Uint32Array,
  start: number,
  end: number,
  len: number,
  s: Xxh3Seed,
  out: Uint32Array,
  index: number,
): void {
  const secret = s.longSecret;
  LANES.set(LANES_INIT);
  const blocks = Math.floor((len - 1) / BLOCK_LEN);
  let i = start;
  for (let n = 0; n < blocks; n++) {
    accumulate(w, i, STRIPES_PER_BLOCK, secret, 0);
    scramble(secret);
    i += BLOCK_LEN / 4;
  }
  const stripes = (len - 1 - blocks * BLOCK_LEN) >>> 6;
  accumulate(w, i, stripes, secret, 0);
  accumulate(w, end - STRIPE_LEN / 4, 1, secret, LAST_STRIPE_OFFSET);

  // Merge: result = len * PRIME64_1 + sum of fold((acc[2i] ^ key) * (acc[2i+1] ^ key)).
  mul64(len >>> 0, Math.floor(len * INV_2_32), PRIME64_1_LO, PRIME64_1_HI);
  let lo = R[0]!;
  let hi = R[1]!;
  for (let pair = 0; pair < 4; pair++) {
    const o = MERGE_OFFSET + 16 * pair;
    normaliseLane(6 * pair);
    const aLo = R[0]! ^ secret[o]!;
    const aHi = R[1]! ^ secret[o + 4]!;
    normaliseLane(6 * pair + 3);
    mulFold(aLo, aHi, R[0]! ^ secret[o + 8]!, R[1]! ^ secret[o + 12]!);
    lo += R[0]!;
    hi += R[1]!;
  }
  const lo32 = lo >>> 0;
  avalancheInto(lo32, hi + (lo - lo32) * INV_2_32, out, index);
}

/** The specification's dispatch on input length. */
function hashWords(
  w: Uint32Array,
  start: number,
  end: number,
  len: number,
  s: Xxh3Seed,
  out: Uint32Array,
  index: number,
): void {
  if (len <= 16) hashSmall(w, start, end, len, s, out, index);
  else if (len <= 128) hash17to128(w, start, end, len, s, out, index);
  else if (len <= 240) hash129to240(w, start, end, len, s, out, index);
  else hashLong(w, start, end, len, s, out, index);
}

/** Scratch words for `xxh3Into`; grows, never shrinks. */
let scratch = new Uint32Array(256);

/** Little-endian u32 of bytes[p .. p+3], bytes outside lo..hi-1 read as zero. */
function wordAt(bytes: Uint8Array, p: number, lo: number, hi: number): number {
  if (p >= lo && p + 4 <= hi) return bytes[p]! | (bytes[p + 1]! << 8) | (bytes[p + 2]! << 16) | (bytes[p + 3]! << 24);
  let word = 0;
  for (let k = 0; k < 4; k++) if (p + k >= lo && p + k < hi) word |= bytes[p + k]! << (8 * k);
  return word;
}

/**
 * XXH3-64 of `bytes[offset .. offset + length)` with `seed`, written as u32 halves:
 * out[outIndex] = low 32 bits, out[outIndex + 1] = high 32 bits.
 *
 * The bytes are first copied into a reused word scratch (once, or twice when `length` is not a
 * multiple of 4: see above), which costs about as much as reading them in place would; it
 * allocates only when an input is larger than every earlier one. Batches of whole-word inputs
 * (token blocks) should use `xxh3WordBatchInto`, which reads the words where they are.
 * Throws `KvIndexError` (`InvalidOption`) when the range is outside `bytes`.
 */
export function xxh3Into(
  bytes: Uint8Array,
  offset: number,
  length: number,
  seed: Xxh3Seed,
  out: Uint32Array,
  outIndex: number,
): void {
  const valid = Number.isSafeInteger(offset) && Number.isSafeInteger(length) && offset >= 0 && length >= 0;
  if (!valid || offset + length > bytes.length) {
    throw new KvIndexError(
      ErrorCode.InvalidOption,
      `xxh3 range offset=${offset} length=${length} is outside the ${bytes.length}-byte input`,
    );
  }
  const words = Math.ceil(length / 4);
  const pad = 4 * words - length;
  const need = pad === 0 ? words : 2 * words;
  if (scratch.length < need) scratch = new Uint32Array(Math.max(need, 2 * scratch.length));
  const w = scratch;
  const stop = offset + length;
  for (let k = 0; k < words; k++) w[k] = wordAt(bytes, offset + 4 * k, offset, stop);
  if (pad === 0) {
    hashWords(w, 0, words, length, seed, out, outIndex);
    return;
  }
  // End-aligned copy: `pad` zero bytes, then the input, ending on a word boundary.
  for (let k = 0; k < words; k++) w[words + k] = wordAt(bytes, offset - pad + 4 * k, offset, stop);
  hashWords(w, 0, 2 * words, length, seed, out, outIndex);
}

/**
 * XXH3-64 of `count` consecutive inputs of `wordsPerInput` u32 words each, every word
 * serialised little-endian (so input i is the bytes of
 * `words[offset + i * wordsPerInput .. offset + (i + 1) * wordsPerInput)` as Dynamo lays out
 * tokens, on any host). Hash i goes to out[outIndex + 2i] (low half) and
 * out[outIndex + 2i + 1] (high half). Reads the words in place and allocates nothing; the
 * length dispatch happens once per batch.
 * Throws `KvIndexError` (`InvalidOption`) when the inputs run past `words`.
 */
export function xxh3WordBatchInto(
  words: Uint32Array,
  offset: number,
  wordsPerInput: number,
  count: number,
  seed: Xxh3Seed,
  out: Uint32Array,
  outIndex: number,
): void {
  if (
    !(Number.isSafeInteger(offset) && Number.isSafeInteger(wordsPerInput) && Number.isSafeInteger(count)) ||
    offset < 0 || wordsPerInput < 0 || count < 0 ||
    offset + wordsPerInput * count > words.length
  ) {
    throw new KvIndexError(
      ErrorCode.InvalidOption,
      `xxh3 batch offset=${offset} wordsPerInput=${wordsPerInput} count=${count} ` +
        `is outside the ${words.length}-word input`,
    );
  }
  const len = 4 * wordsPerInput;
  const stop = outIndex + 2 * count;
  let i = offset;
  let o = outIndex;
  // One loop per length class: each call site stays monomorphic.
  if (len > 240) {
    for (; o < stop; o += 2, i += wordsPerInput) hashLong(words, i, i + wordsPerInput, len, seed, out, o);
  } else if (len > 128) {
    for (; o < stop; o += 2, i += wordsPerInput) hash129to240(words, i, i + wordsPerInput, len, seed, out, o);
  } else if (len > 16) {
    for (; o < stop; o += 2, i += wordsPerInput) hash17to128(words, i, i + wordsPerInput, len, seed, out, o);
  } else {
    for (; o < stop; o += 2, i += wordsPerInput) hashSmall(words, i, i + wordsPerInput, len, seed, out, o);
  }
}

/**
 * XXH3-64 of the 16 bytes le_u64(a) ++ le_u64(b), given as u32 halves, written to
 * out[outIndex], out[outIndex + 1]. The shape of Dynamo's rolling sequence hash; no byte
 * buffer involved.
 */
export function xxh3PairInto(
  seed: Xxh3Seed,
  aLo: number,
  aHi: number,
  bLo: number,
  bHi: number,
  out: Uint32Array,
  outIndex: number,
): void {
  finish9to16(
    16,
    aLo ^ seed.key9to16FirstLo,
    aHi ^ seed.key9to16FirstHi,
    bLo ^ seed.key9to16LastLo,
    bHi ^ seed.key9to16LastHi,
    out,
    outIndex,
  );
}
