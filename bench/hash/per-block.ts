/**
 * The "one hash call per block" alternatives to `computeBlockHashes`, for the hash benchmark
 * only: what a straight port of Dynamo's loop looks like. Each block gets its own `Uint8Array`
 * view and its own hash call (ours through the byte-range API, or the native
 * `@node-rs/xxhash`, which also returns a `bigint` per block). The product never uses these.
 */

import { XXH3_SEED } from '../../src/hash/block-hash.js';
import { xxh3Into, xxh3Seed } from '../../src/hash/xxh3.js';

const SEED = xxh3Seed(XXH3_SEED);

/** Block hashes of full blocks, one `xxh3Into` call and one byte view per block. */
export function computeBlockHashesPerBlock(tokens: Uint32Array, blockSize: number): BigUint64Array {
  const blocks = Math.floor(tokens.length / blockSize);
  const result = new BigUint64Array(blocks);
  const out = new Uint32Array(result.buffer);
  const bytesPerBlock = blockSize * 4;
  for (let i = 0; i < blocks; i++) {
    const view = new Uint8Array(tokens.buffer, tokens.byteOffset + i * bytesPerBlock, bytesPerBlock);
    xxh3Into(view, 0, bytesPerBlock, SEED, out, 2 * i);
  }
  return result;
}

/** A native XXH3-64: `(bytes, seed) => hash`. */
export type NativeXxh3 = (input: Uint8Array, seed: bigint) => bigint;

/** Block hashes of full blocks, one native call (and one byte view, one bigint) per block. */
export function computeBlockHashesPerBlockNative(
  tokens: Uint32Array,
  blockSize: number,
  xxh3: NativeXxh3,
): BigUint64Array {
  const blocks = Math.floor(tokens.length / blockSize);
  const result = new BigUint64Array(blocks);
  const bytesPerBlock = blockSize * 4;
  for (let i = 0; i < blocks; i++) {
    result[i] = xxh3(new Uint8Array(tokens.buffer, tokens.byteOffset + i * bytesPerBlock, bytesPerBlock), XXH3_SEED);
  }
  return result;
}

/** `@node-rs/xxhash`'s XXH3-64 when the optional dev dependency is installed, else null. */
export async function loadNativeXxh3(): Promise<NativeXxh3 | null> {
  try {
    const mod = await import('@node-rs/xxhash');
    return mod.xxh3.xxh64;
  } catch {
    return null;
  }
}
