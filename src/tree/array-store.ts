/**
 * Where a tree keeps the typed arrays that a lookup reads. In-thread trees use plain memory,
 * copied into a larger array on growth. A shard's tree (`RadixTree({ shared: true })`) keeps
 * them in growable SharedArrayBuffers that another thread reads (src/shard/main/tree-reader.ts):
 * growth happens in place (`grow()`, no copy, seen by every thread without a message) and bumps
 * the layout generation so readers rebuild their fixed-length views. Fixed-length views,
 * because length-tracking views measured 5-6x slower per read in Node 20's V8.
 */

/** How a tree allocates and grows one typed array. */
export interface ArrayStore {
  /** `maxBytes`: the most the array may ever grow to (shared memory reserves it; default `MAX_SHARED_BYTES`). */
  int32(capacity: number, fill: number, maxBytes?: number): Int32Array;
  uint32(capacity: number): Uint32Array;
  growInt32(old: Int32Array, capacity: number, fill: number): Int32Array;
  growUint32(old: Uint32Array, capacity: number): Uint32Array;
}

function copyGrow<T extends Int32Array | Uint32Array>(old: T, capacity: number, fill: number): T {
  const next = new (old.constructor as new (n: number) => T)(capacity);
  next.set(old);
  if (fill !== 0) next.fill(fill, old.length);
  return next;
}

/** Plain memory, private to the thread. */
export const LOCAL_STORE: ArrayStore = {
  int32: (capacity, fill) => (fill === 0 ? new Int32Array(capacity) : new Int32Array(capacity).fill(fill)),
  uint32: (capacity) => new Uint32Array(capacity),
  growInt32: (old, capacity, fill) => copyGrow(old, capacity, fill),
  growUint32: (old, capacity) => copyGrow(old, capacity, 0),
};

/**
 * Address space reserved per shared array: 1 GiB (2^28 entries), reserved virtually and backed
 * only as it grows. A buffer may not exceed 4 GiB in Node 20.
 */
export const MAX_SHARED_BYTES = 1 << 30;

/**
 * The node records' reservation: 4 GiB, Node 20's largest buffer, which holds 16-byte records up
 * to the tree's id space (2^28 - 1 nodes). At 1 GiB a shard stopped at 67M nodes: the 2-shard
 * 131M-pair fleet needed 65.5M nodes a shard, past the cap from the 1.25x step at ~54M.
 */
export const MAX_NODE_RECORD_BYTES = 2 ** 32;

/** Growable shared memory; `onGrow` runs after every growth (the layout generation). */
export class SharedStore implements ArrayStore {
  constructor(private readonly onGrow: () => void) {}

  int32(capacity: number, fill: number, maxBytes = MAX_SHARED_BYTES): Int32Array {
    const a = new Int32Array(new SharedArrayBuffer(capacity * 4, { maxByteLength: maxBytes }));
    if (fill !== 0) a.fill(fill);
    return a;
  }

  uint32(capacity: number): Uint32Array {
    return new Uint32Array(new SharedArrayBuffer(capacity * 4, { maxByteLength: MAX_SHARED_BYTES }));
  }

  growInt32(old: Int32Array, capacity: number, fill: number): Int32Array {
    const next = new Int32Array(this.growBuffer(old, capacity), 0, capacity);
    if (fill !== 0) next.fill(fill, old.length);
    this.onGrow();
    return next;
  }

  growUint32(old: Uint32Array, capacity: number): Uint32Array {
    const next = new Uint32Array(this.growBuffer(old, capacity), 0, capacity);
    this.onGrow();
    return next;
  }

  private growBuffer(old: Int32Array | Uint32Array, capacity: number): SharedArrayBuffer {
    const sab = old.buffer as SharedArrayBuffer;
    if (capacity * 4 > sab.byteLength) sab.grow(capacity * 4);
    return sab;
  }
}
