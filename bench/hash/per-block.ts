/**
 * The "one native hash call per block" alternative to `computeBlockHashes`, for the hash
 * benchmark only: what a straight port of Dynamo's loop over `@node-rs/xxhash` looks like, a
 * `Uint8Array` view, a call and a `bigint` per block. The product never uses it.
 */

import { XXH3_SEED } from '../../src/hash/block-hash.js';

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
