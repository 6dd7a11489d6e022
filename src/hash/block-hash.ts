/**
 * Dynamo's block hashes (`compute_block_hash_for_seq`, `compute_seq_hash_for_block`): a
 * request's tokens cut into full blocks, each block's little-endian u32 bytes hashed with
 * XXH3-64 seed 1337, and the rolling "sequence hash" over those.
 *
 * One call hashes every block of a request and writes the u32 halves straight into the
 * result's `BigUint64Array` buffer: no `bigint` per block, no buffer per block. The hasher
 * reads little-endian u32 words, which for a token array are simply the tokens, so a
 * `Uint32Array` is hashed in place (on any host) and a `number[]` is checked and copied into a
 * reused scratch array first.
 */

import { ErrorCode, KvIndexError } from '../errors.js';
import { xxh3Into, xxh3PairInto, xxh3Seed, xxh3WordBatchInto } from './xxh3.js';
import type { Xxh3Seed } from './xxh3.js';

/** Dynamo's `XXH3_SEED`. */
export const XXH3_SEED = 1337n;

const SEED: Xxh3Seed = xxh3Seed(XXH3_SEED);

/** The result's u32 view holds (lo, hi) per u64 only on a little-endian host. */
const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/** Reused for `number[]` tokens; grows, never shrinks. */
let scratch = new Uint32Array(4096);

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
    `tokens[${index}] must be an integer in 0..4294967295, got ${String(value)}`,
  );
}

/**
 * A `number[]`'s tokens checked (all of them, the ignored partial block too: a bad token is a
 * bug upstream) and the first `count` copied into the scratch.
 */
function copyTokens(tokens: readonly number[], count: number): Uint32Array {
  if (scratch.length < count) scratch = new Uint32Array(Math.max(count, 2 * scratch.length));
  const words = scratch;
  // `t >>> 0 === t` holds exactly for integers in 0..2^32-1 (and -0): never for strings, NaN, 1.5.
  for (let i = 0; i < count; i++) {
    const t: unknown = tokens[i];
    if (((t as number) >>> 0) !== t) throw badToken(i, t);
    words[i] = t as number;
  }
  for (let i = count; i < tokens.length; i++) {
    const t: unknown = tokens[i];
    if (((t as number) >>> 0) !== t) throw badToken(i, t);
  }
  return words;
}

/** On a big-endian host the halves of each u64 sit hi-first in memory: swap what xxh3 wrote. */
function fixHalves(words: Uint32Array): void {
  if (LITTLE_ENDIAN) return;
  for (let i = 0; i < words.length; i += 2) {
    const lo = words[i]!;
    words[i] = words[i + 1]!;
    words[i + 1] = lo;
  }
}

/**
 * Dynamo's `compute_block_hash_for_seq`: the XXH3-64 (seed 1337) of each FULL block of
 * `blockSize` tokens, every token serialised as a little-endian u32. A trailing partial block
 * is ignored, so the result has floor(tokens.length / blockSize) entries.
 *
 * Throws `KvIndexError`: `InvalidOption` when `blockSize` is not a positive integer,
 * `InvalidField` when `tokens` is neither a `Uint32Array` nor an array, or holds a value that
 * is not an integer in 0..2^32-1 (in the ignored partial block too).
 */
export function computeBlockHashes(tokens: Uint32Array | readonly number[], blockSize: number): BigUint64Array {
  checkBlockSize(blockSize);
  const isWords = tokens instanceof Uint32Array;
  if (!isWords && !Array.isArray(tokens)) {
    throw new KvIndexError(ErrorCode.InvalidField, 'tokens must be a Uint32Array or an array of numbers');
  }
  const blocks = Math.floor(tokens.length / blockSize);
  const words = isWords ? tokens : copyTokens(tokens, blocks * blockSize);
  const result = new BigUint64Array(blocks);
  if (blocks === 0) return result;
  const out = new Uint32Array(result.buffer);
  xxh3WordBatchInto(words, 0, blockSize, blocks, SEED, out, 0);
  fixHalves(out);
  return result;
}

/**
 * Dynamo's `compute_seq_hash_for_block`: seq[0] = local[0],
 * seq[i] = XXH3-64(seed 1337, le_u64(seq[i-1]) ++ le_u64(local[i])).
 */
export function computeSequenceHashes(local: BigUint64Array): BigUint64Array {
  const n = local.length;
  const result = new BigUint64Array(n);
  if (n === 0) return result;
  const input = new Uint32Array(local.buffer, local.byteOffset, n * 2);
  const out = new Uint32Array(result.buffer);
  // Work in (lo, hi) order; on a big-endian host the input halves are read swapped and the
  // output fixed at the end.
  const lo = LITTLE_ENDIAN ? 0 : 1;
  const hi = 1 - lo;
  out[0] = input[lo]!;
  out[1] = input[hi]!;
  for (let i = 1; i < n; i++) {
    const k = 2 * i;
    xxh3PairInto(SEED, out[k - 2]!, out[k - 1]!, input[k + lo]!, input[k + hi]!, out, k);
  }
  fixHalves(out);
  return result;
}

const oneHash = new Uint32Array(2);

/**
 * XXH3-64 of `bytes` with `seed` (a u64, default Dynamo's 1337) as a bigint: Dynamo's
 * `compute_hash`. For tests and one-off use; the hot paths above avoid the bigint.
 * Throws `KvIndexError` (`InvalidOption`) when the seed is not a u64.
 */
export function hashBytes(bytes: Uint8Array, seed: bigint = XXH3_SEED): bigint {
  xxh3Into(bytes, 0, bytes.length, seed === XXH3_SEED ? SEED : xxh3Seed(seed), oneHash, 0);
  return (BigInt(oneHash[1]!) << 32n) | BigInt(oneHash[0]!);
}
