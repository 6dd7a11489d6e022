/**
 * The reply board's layout in shared memory, which both sides of the thread boundary read
 * (main/reply-board.ts writes lookups and reads replies; thread/reply-writer.ts the reverse).
 *
 * In u32 words:
 * - `SLOTS` Int32 counters, each `generation << 8 | shards counted in`;
 * - per slot and shard, a reply region of `regionWords`: [status, triples, frequencies,
 *   (workerLo, workerHi, score) x triples, frequency x frequencies];
 * - per slot, a request region of `REQUEST_HEAD + 2 * requestHashes`: [n, earlyExit,
 *   generation, (lo, hi) x n].
 * The generation makes a slot safe to reuse while a shard may still write into it: a shard
 * counts itself in only if the slot's counter still carries the generation of the request it
 * served (a compare-and-swap), so a late reply to an abandoned lookup cannot complete the next
 * one. Its reply region is then overwritten by the same shard's reply to the next lookup, which
 * the shard serves later (its port is FIFO), before counting in.
 */

export const SLOTS = 32;
/** Words before a reply region's triples: status, triples, frequencies. */
export const REPLY_HEAD = 3;
/** Words before a request region's hashes: n, earlyExit, generation. */
export const REQUEST_HEAD = 3;
export const STATUS_OK = 1;
export const STATUS_ERROR = 2;
/** Generations wrap within the counter's upper 24 bits. */
export const GENERATION_MASK = 0xff_ffff;

/** The shared buffer and its geometry, as sent to each shard at start. */
export interface ReplyBoardShape {
  sab: SharedArrayBuffer;
  shards: number;
  regionWords: number;
  /** Hashes a request region holds (4,096: 256 KiB of tokens at block size 16). */
  requestHashes: number;
}

export function createBoardShape(shards: number, regionWords = 3 * 256 + 64 + REPLY_HEAD, requestHashes = 4096): ReplyBoardShape {
  const bytes = 4 * (SLOTS + SLOTS * shards * regionWords + SLOTS * (REQUEST_HEAD + 2 * requestHashes));
  return { sab: new SharedArrayBuffer(bytes), shards, regionWords, requestHashes };
}

/** Word offset (in the board after the counters) of a slot's request region. */
export function requestAt(shape: ReplyBoardShape, slot: number): number {
  return SLOTS * shape.shards * shape.regionWords + slot * (REQUEST_HEAD + 2 * shape.requestHashes);
}

/** Word offset (in the board after the counters) of a shard's reply region in a slot. */
export function replyAt(shape: ReplyBoardShape, slot: number, shard: number): number {
  return (slot * shape.shards + shard) * shape.regionWords;
}
