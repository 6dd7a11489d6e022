/**
 * The shard side of the reply board (wire/board-layout.ts): reads a lookup in place, writes
 * this shard's scores into the slot and counts itself in; the last shard wakes the main thread.
 */
import {
  GENERATION_MASK, REPLY_HEAD, REQUEST_HEAD, SLOTS, STATUS_ERROR, STATUS_OK, replyAt, requestAt, type ReplyBoardShape,
} from '../wire/board-layout.js';

/** A lookup read from its request region: `n` hashes at `words[off ..]` as (lo, hi). */
export interface BoardRequest {
  words: Uint32Array;
  off: number;
  n: number;
  earlyExit: boolean;
  generation: number;
}

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
    const w = this.words;
    return { words: w, off: at + REQUEST_HEAD, n: w[at]!, earlyExit: w[at + 1] === 1, generation: w[at + 2]! };
  }

  /**
   * Writes the scores (or an error status, for null) of the lookup of `generation`, and wakes
   * the main thread if this is the last shard. A reply to a lookup the main thread abandoned
   * (the slot has moved on to another generation) is not counted.
   */
  write(slot: number, generation: number, scores: Map<bigint, number> | null, frequencies: readonly number[]): void {
    const w = this.words;
    const at = replyAt(this.shape, slot, this.shard);
    if (scores === null || REPLY_HEAD + 3 * scores.size + frequencies.length > this.shape.regionWords) {
      // The main thread sized the request to fit; reaching this means a bug: report an error
      // rather than write past the region.
      w[at] = STATUS_ERROR;
    } else {
      let k = at + REPLY_HEAD;
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
    for (;;) {
      const c = Atomics.load(this.counters, slot);
      if (c >>> 8 !== (generation & GENERATION_MASK)) return;
      if (Atomics.compareExchange(this.counters, slot, c, c + 1) !== c) continue;
      if ((c & 0xff) + 1 === this.shape.shards) Atomics.notify(this.counters, slot);
      return;
    }
  }
}
