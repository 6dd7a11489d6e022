/**
 * A shard's batch ring: one SharedArrayBuffer of fixed size per shard into which the calling
 * thread copies each event batch's words (wire/event-batch.ts layout). Only the batch's place
 * crosses the port (`{ t: 'ring', at, n, end, events }`); the shard applies straight from a view
 * of the ring and then publishes how far it has consumed, so the writer can reuse the space.
 *
 * Why: a transferred ArrayBuffer per batch lives in the calling thread's malloc heap and, when a
 * shard drops it, is freed there from another thread; what bursts leave in glibc's arenas stays
 * in the RSS (docs/layout.md: 10-25 MiB of brk heap at 16.4M pairs, 2 shards; with
 * `MALLOC_MMAP_THRESHOLD_=65536`, which keeps batches out of the heap, RSS fell 0.4-0.9 bytes a
 * pair). The ring is allocated once as a growable SharedArrayBuffer (created at its maximum
 * size), which V8 maps with its page allocator, never malloc: its pages are faulted in once, as
 * batches first reach them, and stay the same pages.
 *
 * Layout, u32 words: `HEADER_WORDS` of header (word `CONSUMED`: the count of ring words the shard
 * is done with, a wrapping int32, padding included), then `words` data words. A batch is
 * contiguous: one that does not fit before the end starts again at word 0, the words skipped
 * counted as consumed with it (its `end` covers them). Batches are consumed in the order
 * posted (the port is FIFO), so `CONSUMED` only moves forward, to each batch's `end`.
 *
 * When a batch does not fit (the shard lags, or the batch is larger than the ring) the outbox
 * sends it the old way, in a transferred buffer (outbox.ts): order and every guarantee hold,
 * and the shard counts such batches (`ShardStats.transferredBatches`).
 */

/** Header words (one 64-byte line, so the data starts on a line of its own). */
export const HEADER_WORDS = 16;
/** Header word: ring words the shard has consumed (wrapping int32). */
export const CONSUMED = 0;

/** A ring as sent to its shard at start. */
export interface BatchRingShape {
  sab: SharedArrayBuffer;
  /** Data words after the header. */
  words: number;
}

/** Allocates a ring of `bytes` data bytes (rounded down to whole words), outside malloc. */
export function createBatchRing(bytes: number): BatchRingShape {
  const words = Math.max(1, Math.floor(bytes / 4));
  const total = (HEADER_WORDS + words) * 4;
  // Growable, created at its maximum: V8 reserves and commits it with mmap (as the trees'
  // arrays, array-store.ts), so it neither comes from nor returns to a malloc arena.
  return { sab: new SharedArrayBuffer(total, { maxByteLength: total }), words };
}

/** The calling thread's side: places batches in the ring. */
export class BatchRingWriter {
  private readonly header: Int32Array;
  private readonly data: Uint32Array;
  private readonly size: number;
  /** Ring words handed out so far, padding included (wrapping int32). */
  private written = 0;
  /** Where the next batch goes if it fits before the end. */
  private pos = 0;
  /** The `end` of the batch last placed by `place` (what the shard stores as `CONSUMED`). */
  end = 0;

  constructor(shape: BatchRingShape) {
    this.header = new Int32Array(shape.sab, 0, HEADER_WORDS);
    this.data = new Uint32Array(shape.sab, HEADER_WORDS * 4, shape.words);
    this.size = shape.words;
  }

  /** Ring words the shard has not consumed yet (padding included). */
  get used(): number {
    return (this.written - Atomics.load(this.header, CONSUMED)) | 0;
  }

  /** Data words of the ring. */
  get capacity(): number {
    return this.size;
  }

  /**
   * Reserves `n` contiguous words for a batch and returns where they start, or -1 if they do not
   * fit now (or ever: `n` over the ring's size). `end` then names the batch's end. The caller
   * writes the words at the returned offset of `data` before posting the batch.
   */
  place(n: number): number {
    if (n > this.size) return -1;
    const used = this.used;
    // An empty ring starts over at word 0: a light load keeps touching the ring's first pages only.
    if (used === 0) this.pos = 0;
    let at = this.pos;
    let pad = 0;
    if (at + n > this.size) {
      pad = this.size - at;
      at = 0;
    }
    if (used + pad + n > this.size) return -1;
    this.written = (this.written + pad + n) | 0;
    this.pos = at + n;
    this.end = this.written;
    return at;
  }

  /** The ring's data words (write a placed batch here). */
  get words(): Uint32Array {
    return this.data;
  }
}

/** The shard's side: views of the ring's batches, and the consumed count it publishes. */
export class BatchRingReader {
  private readonly header: Int32Array;
  private readonly data: Uint32Array;

  constructor(shape: BatchRingShape) {
    this.header = new Int32Array(shape.sab, 0, HEADER_WORDS);
    this.data = new Uint32Array(shape.sab, HEADER_WORDS * 4, shape.words);
  }

  /** A view of a batch's words (valid until `consumed` is called for it: do not keep it). */
  batch(at: number, n: number): Uint32Array {
    return this.data.subarray(at, at + n);
  }

  /** The shard is done with every batch up to `end`: the writer may reuse their words. */
  consumed(end: number): void {
    Atomics.store(this.header, CONSUMED, end);
  }
}
