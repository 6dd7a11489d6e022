/**
 * The JavaScript block hashing that `computeBlockHashes` ran before it moved to WebAssembly:
 * a `number[]` checked and copied into a reused scratch, then every block hashed in place by
 * the batched JavaScript xxh3 (`xxh3WordBatchInto`) straight into the result's buffer. The
 * hash benchmark's baseline; the product never uses it. Little-endian hosts only (the bench
 * runs on one); seed 1337, no LoRA or multimodal options.
 */

import { XXH3_SEED } from '../../src/hash/block-hash.js';
import { xxh3Seed, xxh3WordBatchInto } from '../../src/hash/xxh3.js';

const SEED = xxh3Seed(XXH3_SEED);

/** Reused for `number[]` tokens; grows, never shrinks. */
let scratch = new Uint32Array(4096);

function copyTokens(tokens: readonly number[], count: number): Uint32Array {
  if (scratch.length < count) scratch = new Uint32Array(Math.max(count, 2 * scratch.length));
  const words = scratch;
  for (let i = 0; i < count; i++) {
    const t: unknown = tokens[i];
    if (((t as number) >>> 0) !== t) throw new Error(`tokens[${i}] is not a u32`);
    words[i] = t as number;
  }
  for (let i = count; i < tokens.length; i++) {
    const t: unknown = tokens[i];
    if (((t as number) >>> 0) !== t) throw new Error(`tokens[${i}] is not a u32`);
  }
  return words;
}

/** Dynamo's block hashes of full blocks, batched, in JavaScript. */
export function computeBlockHashesJs(tokens: Uint32Array | readonly number[], blockSize: number): BigUint64Array {
  const blocks = Math.floor(tokens.length / blockSize);
  const words = tokens instanceof Uint32Array ? tokens : copyTokens(tokens, blocks * blockSize);
  const result = new BigUint64Array(blocks);
  if (blocks === 0) return result;
  xxh3WordBatchInto(words, 0, blockSize, blocks, SEED, new Uint32Array(result.buffer), 0);
  return result;
}
