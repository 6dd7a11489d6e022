/**
 * Lookups through shared memory, the main-thread side (layout in wire/board-layout.ts). The
 * main thread writes a lookup's hashes into a slot of one SharedArrayBuffer and sends every
 * shard just the slot number through its outbox (so the lookup stays ordered after the events
 * queued before it); the shards write their scores into the slot and count themselves in; the
 * last one wakes the main thread with `Atomics.notify`.
 * - Replies: the main thread wakes once per lookup instead of once per shard reply. On the
 *   2-core dev VM a 2-shard round trip measured p50 55 / p99 170 us this way against
 *   61 / 285-430 us with a port message per reply.
 * - Requests: a bare number crosses the port faster than a request object with its hashes. A
 *   bare ping-pong (no indexer) measured p99 133-169 us with a number against 214-223 us with
 *   the request object, on 2 threads.
 * bench/shard.bench.ts has the lookup figures of the product. A lookup that could not fit (more
 * hashes than a request region holds, more workers than a reply region holds, long frequency
 * trails) takes the port path instead; so does one that finds every slot busy.
 */
import {
  GENERATION_MASK, REPLY_HEAD, REQUEST_HEAD, SLOTS, STATUS_OK, createBoardShape, replyAt, requestAt, type ReplyBoardShape,
} from '../wire/board-layout.js';
import type { FindReply } from '../wire/messages.js';

export class ReplyBoard {
  readonly shape: ReplyBoardShape;
  private readonly counters: Int32Array;
  private readonly words: Uint32Array;
  private readonly free: number[] = [];
  private readonly generations = new Uint32Array(SLOTS);

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
    return hashes <= this.shape.requestHashes && REPLY_HEAD + 3 * workers + frequencies <= this.shape.regionWords;
  }

  /**
   * A free slot, opened for a new generation with its counter reset and the lookup (`n`
   * hashes as (lo, hi) words) written into its request region; -1 when all are in use.
   */
  open(words: Uint32Array, n: number, earlyExit: boolean): number {
    const slot = this.free.pop();
    if (slot === undefined) return -1;
    const gen = (this.generations[slot]! + 1) & GENERATION_MASK;
    this.generations[slot] = gen;
    Atomics.store(this.counters, slot, gen << 8);
    const at = requestAt(this.shape, slot);
    this.words[at] = n;
    this.words[at + 1] = earlyExit ? 1 : 0;
    this.words[at + 2] = gen;
    this.words.set(words.subarray(0, 2 * n), at + REQUEST_HEAD);
    return slot;
  }

  /** Gives the slot back; safe even if a shard has yet to reply (see the generation). */
  release(slot: number): void {
    this.free.push(slot);
  }

  /** Resolves when every shard has answered the slot's lookup, or `aborted()` turns true. */
  async wait(slot: number, aborted: () => boolean): Promise<void> {
    const shards = this.shape.shards;
    for (;;) {
      const seen = Atomics.load(this.counters, slot);
      if ((seen & 0xff) >= shards || aborted()) return;
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
    for (let sh = 0; sh < this.shape.shards; sh++) {
      const at = replyAt(this.shape, slot, sh);
      if (this.words[at] !== STATUS_OK) return sh;
      const k = this.words[at + 1]!;
      const f = this.words[at + 2]!;
      const triples = this.words.slice(at + REPLY_HEAD, at + REPLY_HEAD + 3 * k);
      const frequencies = Array.from(this.words.subarray(at + REPLY_HEAD + 3 * k, at + REPLY_HEAD + 3 * k + f));
      out.push({ triples, frequencies });
    }
    return out;
  }
}
