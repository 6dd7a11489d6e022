/**
 * A slow, obviously-correct XXH3-64 written with `bigint`, transcribed from the public xxHash
 * specification (doc/xxhash_spec.md) one section at a time. It shares no code with
 * `src/hash/xxh3.ts` and exists only to cross-check it: every 64-bit operation is a plain
 * bigint expression reduced modulo 2^64, every read goes through `DataView`.
 */

const MASK64 = (1n << 64n) - 1n;

const PRIME32_1 = 0x9e3779b1n;
const PRIME32_2 = 0x85ebca77n;
const PRIME32_3 = 0xc2b2ae3dn;
const PRIME64_1 = 0x9e3779b185ebca87n;
const PRIME64_2 = 0xc2b2ae3d27d4eb4fn;
const PRIME64_3 = 0x165667b19e3779f9n;
const PRIME64_4 = 0x85ebca77c2b2ae63n;
const PRIME64_5 = 0x27d4eb2f165667c5n;
const PRIME_MX1 = 0x165667919e3779f9n;
const PRIME_MX2 = 0x9fb21c651e98df25n;

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

const u64 = (x: bigint): bigint => x & MASK64;
const mul = (a: bigint, b: bigint): bigint => (a * b) & MASK64;
const rotl = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (64n - r))) & MASK64;

function bswap32(x: bigint): bigint {
  let r = 0n;
  for (let i = 0n; i < 4n; i++) r = (r << 8n) | ((x >> (8n * i)) & 0xffn);
  return r;
}

function bswap64(x: bigint): bigint {
  let r = 0n;
  for (let i = 0n; i < 8n; i++) r = (r << 8n) | ((x >> (8n * i)) & 0xffn);
  return r;
}

function read32(bytes: Uint8Array, at: number): bigint {
  return BigInt(new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(at, true));
}

function read64(bytes: Uint8Array, at: number): bigint {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getBigUint64(at, true);
}

function avalanche(x: bigint): bigint {
  x ^= x >> 37n;
  x = mul(x, PRIME_MX1);
  x ^= x >> 32n;
  return x;
}

function avalancheXxh64(x: bigint): bigint {
  x ^= x >> 33n;
  x = mul(x, PRIME64_2);
  x ^= x >> 29n;
  x = mul(x, PRIME64_3);
  x ^= x >> 32n;
  return x;
}

function mulFold(a: bigint, b: bigint): bigint {
  const product = a * b; // full 128-bit product
  return (product & MASK64) ^ (product >> 64n);
}

function mixStep(input: Uint8Array, at: number, secret: Uint8Array, secretAt: number, seed: bigint): bigint {
  const lo = read64(input, at) ^ u64(read64(secret, secretAt) + seed);
  const hi = read64(input, at + 8) ^ u64(read64(secret, secretAt + 8) - seed);
  return mulFold(lo, hi);
}

function deriveSecret(seed: bigint): Uint8Array {
  const out = new Uint8Array(192);
  const view = new DataView(out.buffer);
  for (let i = 0; i < 24; i++) {
    const word = read64(DEFAULT_SECRET, i * 8);
    view.setBigUint64(i * 8, i % 2 === 0 ? u64(word + seed) : u64(word - seed), true);
  }
  return out;
}

function hashLarge(input: Uint8Array, secret: Uint8Array): bigint {
  const len = input.length;
  const acc = [PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1];
  const accumulate = (at: number, secretAt: number): void => {
    for (let i = 0; i < 8; i++) {
      const lane = read64(input, at + 8 * i);
      const value = lane ^ read64(secret, secretAt + 8 * i);
      acc[i ^ 1] = u64(acc[i ^ 1]! + lane);
      acc[i] = u64(acc[i]! + (value & 0xffffffffn) * (value >> 32n));
    }
  };
  const stripesPerBlock = (secret.length - 64) / 8;
  const blockSize = 64 * stripesPerBlock;
  let at = 0;
  while (len - at > blockSize) {
    for (let n = 0; n < stripesPerBlock; n++) accumulate(at + n * 64, n * 8);
    for (let i = 0; i < 8; i++) {
      let a = acc[i]!;
      a ^= a >> 47n;
      a ^= read64(secret, secret.length - 64 + 8 * i);
      acc[i] = mul(a, PRIME32_1);
    }
    at += blockSize;
  }
  const lastBlockLength = len - at;
  const fullStripes = Math.floor((lastBlockLength - 1) / 64);
  for (let n = 0; n < fullStripes; n++) accumulate(at + n * 64, n * 8);
  accumulate(len - 64, secret.length - 71);

  let result = mul(BigInt(len), PRIME64_1);
  for (let i = 0; i < 4; i++) {
    const a = acc[2 * i]! ^ read64(secret, 11 + 16 * i);
    const b = acc[2 * i + 1]! ^ read64(secret, 11 + 16 * i + 8);
    result = u64(result + mulFold(a, b));
  }
  return avalanche(result);
}

/** XXH3-64 of `input` with a u64 `seed`, computed the slow and plain way. */
export function xxh3Reference(input: Uint8Array, seed: bigint): bigint {
  seed = u64(seed);
  const len = input.length;
  const secret = DEFAULT_SECRET;
  if (len === 0) {
    return avalancheXxh64(seed ^ read64(secret, 56) ^ read64(secret, 64));
  }
  if (len <= 3) {
    const combined =
      BigInt(input[len - 1]!) |
      (BigInt(len) << 8n) |
      (BigInt(input[0]!) << 16n) |
      (BigInt(input[len >> 1]!) << 24n);
    const value = u64((read32(secret, 0) ^ read32(secret, 4)) + seed) ^ combined;
    return avalancheXxh64(value);
  }
  if (len <= 8) {
    const first = read32(input, 0);
    const last = read32(input, len - 4);
    const modifiedSeed = seed ^ (bswap32(seed & 0xffffffffn) << 32n);
    const combined = last | (first << 32n);
    let value = u64((read64(secret, 8) ^ read64(secret, 16)) - modifiedSeed) ^ combined;
    value = value ^ rotl(value, 49n) ^ rotl(value, 24n);
    value = mul(value, PRIME_MX2);
    value = value ^ ((value >> 35n) + BigInt(len));
    value = mul(value, PRIME_MX2);
    value = value ^ (value >> 28n);
    return value;
  }
  if (len <= 16) {
    const low = u64((read64(secret, 24) ^ read64(secret, 32)) + seed) ^ read64(input, 0);
    const high = u64((read64(secret, 40) ^ read64(secret, 48)) - seed) ^ read64(input, len - 8);
    const value = u64(BigInt(len) + bswap64(low) + high + mulFold(low, high));
    return avalanche(value);
  }
  if (len <= 128) {
    let acc = mul(BigInt(len), PRIME64_1);
    const rounds = ((len - 1) >> 5) + 1;
    for (let i = rounds - 1; i >= 0; i--) {
      acc = u64(acc + mixStep(input, i * 16, secret, i * 32, seed));
      acc = u64(acc + mixStep(input, len - i * 16 - 16, secret, i * 32 + 16, seed));
    }
    return avalanche(acc);
  }
  if (len <= 240) {
    let acc = mul(BigInt(len), PRIME64_1);
    const chunks = len >> 4;
    for (let i = 0; i < 8; i++) acc = u64(acc + mixStep(input, i * 16, secret, i * 16, seed));
    acc = avalanche(acc);
    for (let i = 8; i < chunks; i++) {
      acc = u64(acc + mixStep(input, i * 16, secret, (i - 8) * 16 + 3, seed));
    }
    acc = u64(acc + mixStep(input, len - 16, secret, 119, seed));
    return avalanche(acc);
  }
  return hashLarge(input, seed === 0n ? DEFAULT_SECRET : deriveSecret(seed));
}
