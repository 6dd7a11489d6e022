/**
 * Messages between the main thread and a shard thread over the shard's dedicated MessagePort.
 * Only the shard's outbox (main/outbox.ts) posts to that port, and it posts in call order: the
 * event batch queued so far first, then the request. The port is FIFO, so a request is served
 * after every event queued before it and before every event queued after it.
 */
import type { SnapshotEncoding } from '../../protocol/types.js';
import type { SharedTreeLayout } from '../../tree/shared-layout.js';
import type { BatchRingShape } from './batch-ring.js';
import type { ReplyBoardShape } from './board-layout.js';
import type { StatusCounts } from './event-batch.js';

export interface ShardInit {
  shard: number;
  expirationMs: number | null;
  /** This shard's share of the indexer's `maxPairs`, or null for no budget. */
  maxPairs: number | null;
  /** Shared memory for lookup replies (board-layout.ts). */
  board: ReplyBoardShape;
  /** This shard's batch ring (batch-ring.ts). */
  ring: BatchRingShape;
  /** This shard's share of the indexer's `expectedPairs` (its node arrays sized for it), or null. */
  expectedPairs: number | null;
  /** Initial node and edge capacity of the tree (null: the default; tests force growth). */
  initialCapacity: number | null;
  /** Niceness the thread gives itself (0: unchanged; Linux only). */
  nice: number;
  /** Run the warm-up (thread/warm-up.ts) before reporting started. */
  warmUp: boolean;
}

/** What a shard thread's start task returns. */
export interface ShardStarted {
  threadId: number;
  /** The niceness the thread runs at, or null when it could not be set (not Linux). */
  nice: number | null;
  /** The tree's shared memory, read by lookups on the calling thread. */
  layout: SharedTreeLayout;
}

export type ShardRequest =
  | { op: 'find'; words: Uint32Array; n: number; earlyExit: boolean }
  /** The whole dump in one step, as bytes transferred back. */
  | { op: 'dump'; encoding: SnapshotEncoding }
  /** Dump into a warm buffer, kept as part `dump` of a two-step dump; replies `DumpPrepared`. */
  | { op: 'dumpPrepare'; dump: number; encoding: 'bincode' | 'bincode-dp' }
  /** Copy prepared part `dump` into `target` at byte `at`, event ids from `firstId`; frees it. */
  | { op: 'dumpCopy'; dump: number; target: SharedArrayBuffer; at: number; firstId: number }
  /** Frees prepared part `dump` (another shard failed to prepare its part). */
  | { op: 'dumpDrop'; dump: number }
  | { op: 'stats' }
  | { op: 'flush' }
  /**
   * Size the tree for a bulk restore (src/tree/bulk-load.ts `reserveLoad`): `nodes` more
   * nodes, and the lookups of the workers given as (lo, hi, blocks) triples.
   */
  | { op: 'reserve'; nodes: number; workers: Uint32Array };

export type ToShard =
  /** A lookup written into this slot of the reply board; the reply goes there too. */
  | number
  /**
   * An event batch (wire/event-batch.ts) of `events` records. `back`: hand the buffer back in
   * the ack, to be refilled (see EventBatchWriter.recycle).
   */
  | { t: 'events'; words: Uint32Array; events: number; back: boolean }
  /**
   * An event batch of `events` records in the shard's batch ring: `n` words from word `at`;
   * once applied, the ring's consumed count becomes `end` (batch-ring.ts).
   */
  | { t: 'ring'; at: number; n: number; end: number; events: number }
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
  /**
   * Of `bytes`, those in SharedArrayBuffers, which `process.memoryUsage().arrayBuffers` does
   * not count (and counts, in an isolate that maps another's, at the size it had then).
   */
  sharedBytes: number;
  /**
   * The shard thread's JS heap in use (its isolate's `used_heap_size`), bytes; null in-thread,
   * where the tree's heap is the caller's.
   */
  heapBytes: number | null;
  /** Pairs evicted by the `maxPairs` budget (each as if its worker removed the block). */
  evicted: number;
  /**
   * Wall time this shard thread spent applying event batches, ms (from receiving a batch to its
   * last event applied; preemption included): how busy the shard is. Null in-thread
   * (`shards: 0`), where applying is the caller's own time inside `applyEvent`.
   */
  applyMs: number | null;
  /**
   * Event batches that reached this shard through its batch ring (shared memory, no buffer
   * transferred), and those that came in a transferred buffer because the ring had no room
   * (the shard lags past the backpressure mark, or one batch is larger than the ring). Null
   * in-thread. Steady ingestion that honours `needsDrain` transfers none.
   */
  ringBatches: number | null;
  transferredBatches: number | null;
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
   * A batch was applied; `rejected` lists the JSON events it could not parse. `words` hands the
   * batch buffer back, transferred, for the main thread to refill.
   */
  | { t: 'ack'; events: number; bytes: number; malformed: number; rejected: Rejected[]; words?: ArrayBuffer }
  | { t: 'res'; id: number; value: unknown }
  | { t: 'err'; id: number; code: string; message: string }
  /** The shard can no longer be trusted (a batch failed to apply): everything fails from now. */
  | { t: 'fatal'; code: string; message: string };
