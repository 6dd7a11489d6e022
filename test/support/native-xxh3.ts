/** `@node-rs/xxhash`'s xxh3-64 (a native baseline for hashing tests), or null when it cannot load. */
export type NativeXxh3 = (input: Uint8Array, seed: bigint) => bigint;

export async function loadNativeXxh3(): Promise<NativeXxh3 | null> {
  try {
    return (await import('@node-rs/xxhash')).xxh3.xxh64;
  } catch {
    return null;
  }
}
