/**
 * Dynamo's block hashes (`compute_block_hash_for_seq`, `compute_seq_hash_for_block`): a
 * request's tokens cut into full blocks, each block's little-endian u32 bytes hashed with
 * XXH3-64, and the rolling "sequence hash" over those. The block identity is Dynamo's
 * `LocalBlockHash`: the seed is 1337, or 1337 + XXH3-64(LoRA adapter name) for a LoRA
 * request, and a block that carries multimodal objects hashes its tokens followed by their
 * `mm_hash` values.
 *
 * The hashing runs in WebAssembly (wasm-xxh3.ts): a prompt's tokens are copied into the
 * module's memory once, every block is hashed in one call, and the hashes are copied out once
 * into the result. Measured per block, 8,192-token prompt, one run of bench/hash.bench.ts on
 * the shared 2-core dev VM: 75 -> 9.7 ns at block size 16 and 204 -> 27 ns at block size 64
 * against the batched JavaScript xxh3 (xxh3.ts, kept as the tests' reference). A `number[]`
 * adds ~1.2 ns per token for the check and copy; a `Uint32Array` is one memcpy.
 */

import { ErrorCode, KvIndexError } from '../errors.js';
import {
  HEAP,
  align16,
  copyU64s,
  ensureMemory,
  hashBlocksAt,
  hashBytesAt,
  readU64,
  readU64Into,
  readU64sInto,
  sequenceHashesAt,
  u32,
  u8,
  wordsToLittleEndian,
  writeU64s,
  type SeedHalves,
} from './wasm-xxh3.js';
import { showValue } from '../protocol/show-value.js';

/** Dynamo's `XXH3_SEED`. */
export const XXH3_SEED = 1337n;

const U64_MAX = (1n << 64n) - 1n;

/** Per block, the u64 `mm_hash` values of its multimodal objects (see `BlockHashOptions`). */
export type BlockMmHashes = ReadonlyArray<readonly bigint[] | BigUint64Array | null | undefined>;

/**
 * The block identity options of Dynamo's `compute_block_hash_for_seq` (`BlockHashOptions`):
 * both change the hashes, so a request must use the same options as the engine that stored
 * the blocks.
 */
export interface BlockHashOptions {
  /**
   * The LoRA adapter serving the request. A non-empty name makes the seed
   * 1337 + XXH3-64(UTF-8 bytes of the name, seed 0), wrapping at 2^64; absent, null or '' is
   * the base model (seed 1337).
   */
  loraName?: string | null | undefined;
  /**
   * `blockMmHashes[i]`: the `mm_hash` (u64) of every multimodal object in block i. Block i
   * then hashes its tokens' bytes followed by these values sorted ascending, each as 8
   * little-endian bytes. An absent, null or empty entry (or a block past the end of the
   * array) hashes its tokens only; entries past the last full block are checked and unused.
   */
  blockMmHashes?: BlockMmHashes | null | undefined;
}

function halves(seed: bigint): SeedHalves {
  return { lo: Number(seed & 0xffffffffn), hi: Number(seed >> 32n) };
}

const DEFAULT_SEED = halves(XXH3_SEED);
const NO_SEED = halves(0n);

/** LoRA name -> seed. A miss costs ~0.2 us; a fleet serves a bounded set of adapters. */
const loraSeeds = new Map<string, SeedHalves>();
const LORA_SEED_CACHE_LIMIT = 1024;
/** Longest name kept in the cache (at most ~256 KB of keys in all). */
const LORA_CACHED_NAME_MAX = 256;

const encoder = new TextEncoder();

/** 1337 + XXH3-64(name, seed 0), wrapping: Dynamo's seed for LoRA `name` (non-empty). */
function loraSeed(name: string): SeedHalves {
  let seed = loraSeeds.get(name);
  if (seed !== undefined) return seed;
  // UTF-8 takes at most 3 bytes per UTF-16 unit; the hash goes after the name.
  const out = align16(HEAP + 3 * name.length);
  ensureMemory(out + 8);
  const { written } = encoder.encodeInto(name, u8.subarray(HEAP, out));
  hashBytesAt(HEAP, written, NO_SEED, out);
  seed = halves((XXH3_SEED + readU64(out)) & U64_MAX);
  // Only short names are kept: the cache holds its keys, and a request may bring an 8 MB name
  // (1,024 such kept 8.6 GB outside the JS heap; a fuzzed server grew to 5.7 GB). LoRA names are
  // short; a long one is hashed again each time, linear in its length as the request is.
  if (name.length > LORA_CACHED_NAME_MAX) return seed;
  if (loraSeeds.size >= LORA_SEED_CACHE_LIMIT) loraSeeds.clear();
  loraSeeds.set(name, seed);
  return seed;
}

/** @internal LoRA seeds kept in the cache (tests). */
export function cachedLoraSeeds(): number {
  return loraSeeds.size;
}

function checkBlockSize(blockSize: number): void {
  if (!Number.isSafeInteger(blockSize) || blockSize <= 0) {
    throw new KvIndexError(
      ErrorCode.InvalidOption,
      `blockSize must be a positive integer, got ${String(blockSize)}`,
    );
  }
}

function badToken(index: number, value: unknown): KvIndexError {
  return new KvIndexError(
    ErrorCode.InvalidField,
    `tokens[${index}] must be an integer in 0..4294967295, got ${showValue(value)}`,
  );
}

function badOption(message: string): KvIndexError {
  return new KvIndexError(ErrorCode.InvalidOption, message);
}

/** The seed for `options.loraName`; throws `InvalidOption` for a name that is not a string. */
function seedOf(options: BlockHashOptions): SeedHalves {
  if (typeof options !== 'object' || options === null) throw badOption('block hash options must be an object');
  const name: unknown = options.loraName;
  if (name === undefined || name === null || name === '') return DEFAULT_SEED;
  if (typeof name !== 'string') throw badOption(`loraName must be a string, got ${String(name)}`);
  return loraSeed(name);
}

/** `options.blockMmHashes` checked (every entry, every value), or null when there is none. */
function mmHashesOf(options: BlockHashOptions): BlockMmHashes | null {
  const mm: unknown = options.blockMmHashes;
  if (mm === undefined || mm === null) return null;
  if (!Array.isArray(mm)) throw badOption('blockMmHashes must be an array');
  for (let i = 0; i < mm.length; i++) {
    const entry: unknown = mm[i];
    if (entry === undefined || entry === null || entry instanceof BigUint64Array) continue;
    if (!Array.isArray(entry)) throw badOption(`blockMmHashes[${i}] must be an array of u64 bigints or null`);
    for (let j = 0; j < entry.length; j++) {
      const h: unknown = entry[j];
      if (typeof h !== 'bigint' || h < 0n || h > U64_MAX) {
        throw badOption(`blockMmHashes[${i}][${j}] must be a u64 bigint, got ${showValue(h)}`);
      }
    }
  }
  return mm as BlockMmHashes;
}

/**
 * A `number[]`'s tokens checked (all of them, the ignored partial block too: a bad token is a
 * bug upstream) and the first `count` written from `address` in the module's memory.
 */
function stageNumbers(tokens: readonly number[], count: number, address: number): void {
  const words = u32;
  const at = address >>> 2;
  // `t >>> 0 === t` holds exactly for integers in 0..2^32-1 (and -0): never for strings, NaN, 1.5.
  for (let i = 0; i < count; i++) {
    const t: unknown = tokens[i];
    if (((t as number) >>> 0) !== t) throw badToken(i, t);
    words[at + i] = t as number;
  }
  for (let i = count; i < tokens.length; i++) {
    const t: unknown = tokens[i];
    if (((t as number) >>> 0) !== t) throw badToken(i, t);
  }
}

/**
 * Re-hashes every block that carries multimodal hashes: its token bytes (already staged at
 * `input`) copied after the outputs, the sorted hashes appended, one hash call per block. Such
 * blocks are the few that hold an image, so the batch's first hash of them is simply replaced.
 */
function hashMultimodalBlocks(
  mm: BlockMmHashes,
  first: number,
  blocks: number,
  blockBytes: number,
  input: number,
  output: number,
  seed: SeedHalves,
): void {
  const stage = align16(output + 8 * blocks);
  const limit = Math.min(mm.length - first, blocks);
  for (let i = 0; i < limit; i++) {
    const hashes = mm[first + i];
    if (hashes === undefined || hashes === null || hashes.length === 0) continue;
    const sorted = BigUint64Array.from(hashes).sort();
    ensureMemory(stage + blockBytes + 8 * sorted.length);
    u8.copyWithin(stage, input + i * blockBytes, input + (i + 1) * blockBytes);
    writeU64s(sorted, stage + blockBytes);
    hashBytesAt(stage, blockBytes + 8 * sorted.length, seed, output + 8 * i);
  }
}

/**
 * Dynamo's `compute_block_hash_for_seq`: the XXH3-64 of each FULL block of `blockSize`
 * tokens, every token serialised as a little-endian u32, seed 1337, or as `options` say (LoRA
 * seed, multimodal hashes: see `BlockHashOptions`). A trailing partial block is ignored, so
 * the result has floor(tokens.length / blockSize) entries.
 *
 * Throws `KvIndexError`: `InvalidOption` when `blockSize` is not a positive integer or an
 * option has the wrong type or a value outside u64; `InvalidField` when `tokens` is neither a
 * `Uint32Array` nor an array, or holds a value that is not an integer in 0..2^32-1 (in the
 * ignored partial block too).
 */
export function computeBlockHashes(
  tokens: Uint32Array | readonly number[],
  blockSize: number,
  options?: BlockHashOptions,
): BigUint64Array {
  checkBlockSize(blockSize);
  const isWords = tokens instanceof Uint32Array;
  if (!isWords && !Array.isArray(tokens)) {
    throw new KvIndexError(ErrorCode.InvalidField, 'tokens must be a Uint32Array or an array of numbers');
  }
  // The seed before the tokens are staged: a LoRA name's first use hashes it where they go.
  const seed = options === undefined ? DEFAULT_SEED : seedOf(options);
  const mm = options === undefined ? null : mmHashesOf(options);
  const blocks = Math.floor(tokens.length / blockSize);
  const count = blocks * blockSize;
  const input = HEAP;
  const output = align16(input + 4 * count);
  ensureMemory(output + 8 * blocks);
  if (isWords) u32.set(count === tokens.length ? tokens : tokens.subarray(0, count), input >>> 2);
  else stageNumbers(tokens, count, input);
  if (blocks === 0) return new BigUint64Array(0);
  wordsToLittleEndian(input, count);
  hashBlocksAt(input, 4 * blockSize, blocks, seed, output);
  if (mm !== null) hashMultimodalBlocks(mm, 0, blocks, 4 * blockSize, input, output, seed);
  return copyU64s(output, blocks);
}

/**
 * `computeBlockHashes(tokens, blockSize, options)[0]` stored into `out[0]`, hashing that block
 * alone and allocating nothing: a tokens lookup asks whether any worker holds the first block
 * before it hashes the rest (src/indexer/sharded-indexer.ts). The options are checked whole,
 * as `computeBlockHashes` checks them. `tokens` holds at least one block (`InvalidField`
 * otherwise). ~0.1 us for a 64-token block against ~0.23 through `computeBlockHashes`, whose
 * result and views are allocated (dev VM).
 */
export function firstBlockHashInto(tokens: Uint32Array, blockSize: number, options: BlockHashOptions | undefined, out: BigUint64Array): void {
  checkBlockSize(blockSize);
  if (tokens.length < blockSize) throw new KvIndexError(ErrorCode.InvalidField, `tokens: a block needs ${blockSize}, got ${tokens.length}`);
  const seed = options === undefined ? DEFAULT_SEED : seedOf(options);
  const mm = options === undefined ? null : mmHashesOf(options);
  const input = HEAP;
  const output = align16(input + 4 * blockSize);
  ensureMemory(output + 8);
  const words = u32;
  const at = input >>> 2;
  for (let i = 0; i < blockSize; i++) words[at + i] = tokens[i]!; // no view made (a block is short)
  wordsToLittleEndian(input, blockSize);
  hashBlocksAt(input, 4 * blockSize, 1, seed, output);
  if (mm !== null) hashMultimodalBlocks(mm, 0, 1, 4 * blockSize, input, output, seed);
  readU64Into(output, out);
}

/**
 * Blocks `from` to `to` (exclusive) of `computeBlockHashes(tokens, blockSize, options)` stored
 * into `out[from..to)`: a tokens lookup hashes a prefix of a long prompt first, and the rest
 * only when the prefix's scores do not settle it (src/indexer/sharded-indexer.ts). Multimodal
 * hashes stay with their block (`blockMmHashes[i]` for block i). The options are checked whole,
 * as `computeBlockHashes` checks them. Throws `InvalidField` when `tokens` holds fewer than `to`
 * blocks or the range is not one.
 */
export function blockHashesInto(
  tokens: Uint32Array,
  blockSize: number,
  options: BlockHashOptions | undefined,
  from: number,
  to: number,
  out: BigUint64Array,
): void {
  checkBlockSize(blockSize);
  if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || to < from || to * blockSize > tokens.length || to > out.length) {
    throw new KvIndexError(ErrorCode.InvalidField, `blocks ${from}..${to}: not a range of the ${Math.floor(tokens.length / blockSize)} blocks of the tokens (${out.length} outputs)`);
  }
  const seed = options === undefined ? DEFAULT_SEED : seedOf(options);
  const mm = options === undefined ? null : mmHashesOf(options);
  const blocks = to - from;
  if (blocks === 0) return;
  const count = blocks * blockSize;
  const input = HEAP;
  const output = align16(input + 4 * count);
  ensureMemory(output + 8 * blocks);
  u32.set(tokens.subarray(from * blockSize, to * blockSize), input >>> 2);
  wordsToLittleEndian(input, count);
  hashBlocksAt(input, 4 * blockSize, blocks, seed, output);
  if (mm !== null) hashMultimodalBlocks(mm, from, blocks, 4 * blockSize, input, output, seed);
  readU64sInto(output, blocks, out, from);
}

/**
 * Dynamo's `compute_seq_hash_for_block`: seq[0] = local[0],
 * seq[i] = XXH3-64(seed 1337, le_u64(seq[i-1]) ++ le_u64(local[i])).
 */
export function computeSequenceHashes(local: BigUint64Array): BigUint64Array {
  const n = local.length;
  if (n === 0) return new BigUint64Array(0);
  const output = align16(HEAP + 8 * n);
  ensureMemory(output + 8 * n);
  writeU64s(local, HEAP);
  sequenceHashesAt(HEAP, n, output);
  return copyU64s(output, n);
}

/**
 * XXH3-64 of `bytes` with `seed` (a u64, default Dynamo's 1337) as a bigint: Dynamo's
 * `compute_hash`. For tests and one-off use; the batched calls above avoid the bigint.
 * Throws `KvIndexError` (`InvalidOption`) when the seed is not a u64.
 */
export function hashBytes(bytes: Uint8Array, seed: bigint = XXH3_SEED): bigint {
  if (typeof seed !== 'bigint' || seed < 0n || seed > U64_MAX) {
    throw badOption(`xxh3 seed must be a u64 bigint, got ${String(seed)}`);
  }
  const output = align16(HEAP + bytes.length);
  ensureMemory(output + 8);
  u8.set(bytes, HEAP);
  hashBytesAt(HEAP, bytes.length, seed === XXH3_SEED ? DEFAULT_SEED : halves(seed), output);
  return readU64(output);
}
