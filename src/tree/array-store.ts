/**
 * Where a tree keeps its typed arrays. Every tree's large arrays live in growable
 * SharedArrayBuffers, grown in place (`grow()`, no copy): a shard's tree (`RadixTree({ shared:
 * true })`) because another thread reads them (src/shard/main/tree-reader.ts; growth is seen by
 * every thread without a message and bumps the layout generation so readers rebuild their
 * fixed-length views), an in-thread tree because growing in place lets the step be small.
 * In-thread arrays used to be plain memory copied into a 1.25x larger array on growth: a copy
 * touches every page of the new array (3-6 ms per MB on the dev VM), so the step could not be
 * small, and the last step's unused quarter was 4.8 bytes of a fleet pair's 39.4 (16.4M pairs).
 * Fixed-length views, because length-tracking views measured 5-6x slower per read in Node 20's
 * V8; fixed-length views of a growable buffer read as fast as plain ones (a random-read loop
 * over 128 MiB: 647 / 650 ms against 633 ms, one process). `process.memoryUsage()` does not
 * count SharedArrayBuffers: `bytes` counts what a store holds, for the memory figures.
 */

/** How a tree allocates and grows one typed array. */
export interface ArrayStore {
  /** `maxBytes`: the most the array may ever grow to (shared memory reserves it; default `MAX_SHARED_BYTES`). */
  int32(capacity: number, fill: number, maxBytes?: number): Int32Array;
  uint32(capacity: number): Uint32Array;
  uint8(capacity: number): Uint8Array;
  uint16(capacity: number): Uint16Array;
  growInt32(old: Int32Array, capacity: number, fill: number): Int32Array;
  growUint32(old: Uint32Array, capacity: number): Uint32Array;
  growUint8(old: Uint8Array, capacity: number): Uint8Array;
  growUint16(old: Uint16Array, capacity: number): Uint16Array;
  /** Whether growth is in place (no copy): callers may then grow in small steps. */
  readonly inPlace: boolean;
  /**
   * Whether only the writer's thread reads this memory (an in-thread tree): arrays may then be
   * replaced by smaller ones (member-sets.ts compaction) with no reader to tell.
   */
  readonly solo: boolean;
  /** Forgets an array replaced by another of this store (its bytes no longer held). */
  release(old: Int32Array | Uint32Array | Uint16Array | Uint8Array): void;
}

/**
 * The next capacity of an array at `cap` entries that must hold `atLeast`. In place, 1/16 more
 * (at least `minStep`): growth costs no copy and only the pages written are backed, so the step
 * only decides the unused tail, ~3 % on average instead of ~12 % at 1.25x (the conversation
 * tree: 66,560 node slots for 63,604 nodes instead of 71,100). By copy, 1.25x: each step writes
 * the whole new array.
 */
export function nextCapacity(store: ArrayStore, cap: number, atLeast: number, minStep: number): number {
  const step = store.inPlace ? Math.max(minStep, Math.ceil(cap / 16)) : Math.ceil(cap / 4);
  return Math.max(atLeast, cap + step);
}

function copyGrow<T extends Int32Array | Uint32Array | Uint16Array | Uint8Array>(old: T, capacity: number, fill: number): T {
  const next = new (old.constructor as new (n: number) => T)(capacity);
  next.set(old);
  if (fill !== 0) next.fill(fill, old.length);
  return next;
}

/** Plain memory, private to the thread. */
export const LOCAL_STORE: ArrayStore = {
  inPlace: false,
  solo: true,
  release: () => {},
  int32: (capacity, fill) => (fill === 0 ? new Int32Array(capacity) : new Int32Array(capacity).fill(fill)),
  uint32: (capacity) => new Uint32Array(capacity),
  uint8: (capacity) => new Uint8Array(capacity),
  uint16: (capacity) => new Uint16Array(capacity),
  growInt32: (old, capacity, fill) => copyGrow(old, capacity, fill),
  growUint32: (old, capacity) => copyGrow(old, capacity, 0),
  growUint8: (old, capacity) => copyGrow(old, capacity, 0),
  growUint16: (old, capacity) => copyGrow(old, capacity, 0),
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

/**
 * Growable shared memory; `onGrow` runs after every growth (a shard tree's layout generation;
 * nothing for memory no other thread reads). Each array reserves its maximum as address space
 * only (5,000 reservations of 4 GiB were accepted in one Node 20 process); pages are backed
 * when first written.
 */
export class SharedStore implements ArrayStore {
  readonly inPlace = true;
  readonly solo: boolean;
  /** Bytes of the arrays this store holds (their current lengths). */
  bytes = 0;

  private readonly onGrow: () => void;

  /** Without `onGrow`, memory no other thread reads (`solo`). */
  constructor(onGrow?: () => void) {
    this.solo = onGrow === undefined;
    this.onGrow = onGrow ?? (() => {});
  }

  release(old: Int32Array | Uint32Array | Uint16Array | Uint8Array): void {
    this.bytes -= old.buffer.byteLength;
  }

  int32(capacity: number, fill: number, maxBytes = MAX_SHARED_BYTES): Int32Array {
    // A view with its length given: without one it tracks the buffer's length, and reads
    // through it are several times slower (a tree whose node arrays never grew answered the
    // 4,096-worker prompt lookup in 7.2-7.4 us instead of 2.6-3.0).
    const a = new Int32Array(new SharedArrayBuffer(capacity * 4, { maxByteLength: maxBytes }), 0, capacity);
    this.bytes += capacity * 4;
    if (fill !== 0) a.fill(fill);
    return a;
  }

  uint32(capacity: number): Uint32Array {
    this.bytes += capacity * 4;
    return new Uint32Array(new SharedArrayBuffer(capacity * 4, { maxByteLength: MAX_SHARED_BYTES }), 0, capacity);
  }

  uint8(capacity: number): Uint8Array {
    this.bytes += capacity;
    return new Uint8Array(new SharedArrayBuffer(capacity, { maxByteLength: MAX_SHARED_BYTES }), 0, capacity);
  }

  uint16(capacity: number): Uint16Array {
    this.bytes += capacity * 2;
    return new Uint16Array(new SharedArrayBuffer(capacity * 2, { maxByteLength: MAX_SHARED_BYTES }), 0, capacity);
  }

  growUint16(old: Uint16Array, capacity: number): Uint16Array {
    const next = new Uint16Array(this.growBuffer(old, capacity, 2), 0, capacity);
    this.onGrow();
    return next;
  }

  growUint8(old: Uint8Array, capacity: number): Uint8Array {
    const next = new Uint8Array(this.growBuffer(old, capacity, 1), 0, capacity);
    this.onGrow();
    return next;
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

  private growBuffer(old: Int32Array | Uint32Array | Uint16Array | Uint8Array, capacity: number, width = 4): SharedArrayBuffer {
    const sab = old.buffer as SharedArrayBuffer;
    if (capacity * width > sab.byteLength) {
      this.bytes += capacity * width - sab.byteLength;
      sab.grow(capacity * width);
    }
    return sab;
  }
}
