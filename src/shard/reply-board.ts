/**
 * Lookups through shared memory. The main thread writes a lookup's hashes into a slot of one
 * SharedArrayBuffer and sends every shard just the slot number over its port (so the lookup
 * stays ordered after the event batches sent before it); the shards write their scores into
 * the slot and count themselves in; the last one wakes the main thread with `Atomics.notify`.
 * - Replies: the main thread wakes once per lookup instead of once per shard reply. On the
 *   2-core dev VM a 2-shard round trip measured p50 55 / p99 170 us this way against
 *   61 / 285-430 us with a port message per reply.
 * - Requests: a bare number crosses the port faster than a request object with its hashes. A
 *   bare ping-pong (no indexer) measured p99 133-169 us with a number against 214-223 us with
 *   the request object, on 2 threads.
 * bench/shard.bench.ts has the lookup figures of the product.
 *
 * Layout, in u32 words:
 * - `SLOTS` Int32 counters;
 * - per slot and shard, a reply region of `regionWords`: [status, triples, frequencies,
 *   (workerLo, workerHi, score) x triples, frequency x frequencies];
 * - per slot, a request region of `2 + 2 * requestHashes`: [n, earlyExit, (lo, hi) x n].
 * A lookup that could not fit (more hashes than a request region holds, more workers than a
 * reply region holds, long frequency trails) takes the port path instead; so does one that
 * finds every slot busy.
 */
import type { FindReply } from './messages.js';

export const SLOTS = 32;
const HEAD = 3;
export const STATUS_OK = 1;
export const STATUS_ERROR = 2;

/** The shared buffer and its geometry, as sent to each shard at start. */
export interface ReplyBoardShape {
  sab: SharedArrayBuffer;
  shards: number;
  regionWords: number;
  /** Hashes a request region holds (4,096: 256 KiB of tokens at block size 16). */
  requestHashes: number;
}

export function createBoardShape(shards: number, regionWords = 3 * 256 + 64 + HEAD, requestHashes = 4096): ReplyBoardShape {
  const bytes = 4 * (SLOTS + SLOTS * shards * regionWords + SLOTS * (2 + 2 * requestHashes));
  return { sab: new SharedArrayBuffer(bytes), shards, regionWords, requestHashes };
}

/** Word offset (in the board after the counters) of a slot's request region. */
function requestAt(shape: ReplyBoardShape, slot: number): number {
  return SLOTS * shape.shards * shape.regionWords + slot * (2 + 2 * shape.requestHashes);
}

/** A lookup read from its request region: `n` hashes at `words[off ..]` as (lo, hi). */
export interface BoardRequest {
  words: Uint32Array;
  off: number;
  n: number;
  earlyExit: boolean;
}

/** The shard side: writes one shard's reply into a slot and counts it in. */
export class ReplyWriter {
  private readonly counters: Int32Array;
  private readonly words: Uint32Array;

  constructor(private readonly shape: ReplyBoardShape, private readonly shard: number) {
    this.counters = new Int32Array(shape.sab, 0, SLOTS);
    this.words = new Uint32Array(shape.sab, 4 * SLOTS);
  }

  /** The lookup the main thread wrote into the slot (read in place, not copied). */
  request(slot: number): BoardRequest {
    const at = requestAt(this.shape, slot);
    return { words: this.words, off: at + 2, n: this.words[at]!, earlyExit: this.words[at + 1] === 1 };
  }

  /** Writes the scores (or an error status) and wakes the main thread if this is the last shard. */
  write(slot: number, scores: Map<bigint, number> | null, frequencies: readonly number[]): void {
    const w = this.words;
    const at = (slot * this.shape.shards + this.shard) * this.shape.regionWords;
    if (scores === null || HEAD + 3 * scores.size + frequencies.length > this.shape.regionWords) {
      // The main thread sized the request to fit; reaching this means a bug or a race with a
      // worker assignment: report an error rather than write past the region.
      w[at] = STATUS_ERROR;
    } else {
      let k = at + HEAD;
      for (const [id, s] of scores) {
        w[k++] = Number(id & 0xffffffffn);
        w[k++] = Number(id >> 32n);
        w[k++] = s;
      }
      for (let i = 0; i < frequencies.length; i++) w[k++] = frequencies[i]!;
      w[at + 1] = scores.size;
      w[at + 2] = frequencies.length;
      w[at] = STATUS_OK;
    }
    if (Atomics.add(this.counters, slot, 1) + 1 === this.shape.shards) Atomics.notify(this.counters, slot);
  }
}

/** The main-thread side: slots, waiting, and reading the replies back. */
export class ReplyBoard {
  readonly shape: ReplyBoardShape;
  private readonly counters: Int32Array;
  private readonly words: Uint32Array;
  private readonly free: number[] = [];

  constructor(shards: number) {
    this.shape = createBoardShape(shards);
    this.counters = new Int32Array(this.shape.sab, 0, SLOTS);
    this.words = new Uint32Array(this.shape.sab, 4 * SLOTS);
    for (let i = SLOTS - 1; i >= 0; i--) this.free.push(i);
  }

  /**
   * Whether a lookup of `hashes` fits a request region and a reply of up to `workers` scores
   * and `frequencies` entries fits a reply region.
   */
  fits(hashes: number, workers: number, frequencies: number): boolean {
    return hashes <= this.shape.requestHashes && HEAD + 3 * workers + frequencies <= this.shape.regionWords;
  }

  /** Writes a lookup (`n` hashes as (lo, hi) words) into the slot's request region. */
  writeRequest(slot: number, words: Uint32Array, n: number, earlyExit: boolean): void {
    const at = requestAt(this.shape, slot);
    this.words[at] = n;
    this.words[at + 1] = earlyExit ? 1 : 0;
    this.words.set(words.subarray(0, 2 * n), at + 2);
  }

  /** A free slot with its counter reset, or -1 when all are in use. */
  take(): number {
    const slot = this.free.pop();
    if (slot === undefined) return -1;
    Atomics.store(this.counters, slot, 0);
    return slot;
  }

  release(slot: number): void {
    this.free.push(slot);
  }

  /** Resolves when every shard has written into the slot, or `aborted()` turns true. */
  async wait(slot: number, aborted: () => boolean): Promise<void> {
    const shards = this.shape.shards;
    for (;;) {
      const seen = Atomics.load(this.counters, slot);
      if (seen >= shards || aborted()) return;
      const r = Atomics.waitAsync(this.counters, slot, seen);
      if (r.async) await r.value;
    }
  }

  /** Wakes every waiter (a shard failed or the indexer closed). */
  wakeAll(): void {
    for (let s = 0; s < SLOTS; s++) Atomics.notify(this.counters, s);
  }

  /** The replies of a completed slot, one per shard, or the index of a shard that failed. */
  read(slot: number): FindReply[] | number {
    const out: FindReply[] = [];
    const { shards, regionWords } = this.shape;
    for (let sh = 0; sh < shards; sh++) {
      const at = (slot * shards + sh) * regionWords;
      if (this.words[at] !== STATUS_OK) return sh;
      const k = this.words[at + 1]!;
      const f = this.words[at + 2]!;
      const triples = this.words.slice(at + HEAD, at + HEAD + 3 * k);
      const frequencies = Array.from(this.words.subarray(at + HEAD + 3 * k, at + HEAD + 3 * k + f));
      out.push({ triples, frequencies });
    }
    return out;
  }
}
