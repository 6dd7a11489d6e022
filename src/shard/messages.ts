/**
 * Messages between the main thread and a shard thread over the shard's dedicated MessagePort.
 * One FIFO port per shard carries event batches and requests alike, so a request sent after an
 * event batch is served after that batch is applied (read-your-writes without waiting).
 */
import type { SnapshotEncoding } from '../protocol/types.js';
import type { StatusCounts } from './event-batch.js';
import type { ReplyBoardShape } from './reply-board.js';

export interface ShardInit {
  shard: number;
  expirationMs: number | null;
  /** Test-only: the shard throws while applying an event of this worker (crash tests). */
  failOnWorker: string | null;
  /** Shared memory for lookup replies (reply-board.ts). */
  board: ReplyBoardShape;
}

export type ShardRequest =
  | { op: 'find'; words: Uint32Array; n: number; earlyExit: boolean }
  | { op: 'dump'; encoding: SnapshotEncoding }
  /** Dump into the shard's reusable buffer; replies `DumpPrepared`. */
  | { op: 'dumpPrepare'; encoding: 'bincode' | 'bincode-dp' }
  /** Copy the prepared dump into `target` at byte `at`, event ids from `firstId`. */
  | { op: 'dumpCopy'; target: SharedArrayBuffer; at: number; firstId: number }
  | { op: 'stats' }
  | { op: 'flush' }
  /** Test-only: the thread exits abruptly. */
  | { op: 'exit' };

export type ToShard =
  /** A lookup written into this slot of the reply board; the reply goes there too. */
  | number
  /** `back`: hand the buffer back in the ack, to be refilled (see EventBatchWriter.recycle). */
  | { t: 'events'; words: Uint32Array; back: boolean }
  /**
   * Raw serde-JSON events, parsed in the shard: `ends[i]` is where event i ends in `bytes`,
   * `tags[i]` the caller's tag for it (-1: none), returned with a rejection.
   */
  | { t: 'json'; bytes: Uint8Array; ends: Uint32Array; tags: Float64Array; back: boolean }
  | ({ t: 'req'; id: number } & ShardRequest);

export interface ShardStats {
  /** Workers holding at least one block on this shard. */
  workers: number;
  /** (worker, block) pairs. */
  pairs: number;
  /** Live tree nodes, the root included. */
  nodes: number;
  /** Applied events by status. */
  events: StatusCounts;
  /** JSON events (from `applyEventJson`) the shard could not parse; they changed nothing. */
  malformed: number;
  /** Bytes held by the shard tree's typed arrays. */
  bytes: number;
}

/** Scores of one shard: (workerLo, workerHi, score) triples, plus the frequency trail. */
export interface FindReply {
  triples: Uint32Array;
  frequencies: number[];
}

export interface DumpPrepared {
  /** Bytes of the prepared part, its 8-byte count included. */
  bytes: number;
  events: number;
}

/** A JSON event a shard could not parse, with the tag its caller gave it (-1: none). */
export interface Rejected {
  code: string;
  message: string;
  tag: number;
}

export type FromShard =
  /**
   * A batch was applied; `rejected` lists the JSON events it could not parse (first few).
   * `words` (an event batch's) or `json` (a JSON batch's text) hands the batch buffer back,
   * transferred, for the main thread to refill.
   */
  | { t: 'ack'; events: number; malformed: number; rejected: Rejected[]; words?: ArrayBuffer; json?: ArrayBuffer }
  | { t: 'res'; id: number; value: unknown }
  | { t: 'err'; id: number; code: string; message: string }
  /** The shard can no longer be trusted (a batch failed to apply): everything fails from now. */
  | { t: 'fatal'; code: string; message: string };
