/** Counters of one ZMQ source, every outcome of an engine message counted once. */

import type { ApplyStatus } from '../protocol/types.js';

export interface ZmqSourceStats {
  /** Live messages received (any shape). */
  messages: number;
  /** Batches applied (live and replayed). */
  batches: number;
  /** Events applied to a tree (any status). */
  events: number;
  /** Blocks of applied Stored events. */
  storedBlocks: number;
  /** Messages that are not `[topic, seq(8 bytes), payload]`: dropped. */
  badFrames: number;
  /** Payloads that are not msgpack `[ts, events, rank?]`: dropped (their seq still counts). */
  badPayloads: number;
  /** Single malformed events inside a batch: skipped, the rest of the batch applied. */
  badEvents: number;
  /** Stored events whose block_size differs from the index's: nothing stored. */
  blockSizeMismatch: number;
  /** Stored events that repeat a hash (or their parent): rejected whole. */
  duplicateHash: number;
  /** Events of KV cache groups that are not full attention: skipped. */
  nonFullAttention: number;
  /** Events applied to a lower tier (not counted in device scores). */
  lowerTier: number;
  /** Seq gaps detected. */
  gaps: number;
  /** Gaps healed by replay. */
  gapsReplayed: number;
  /** Gaps that could not be replayed: the (worker, rank) was cleared and excluded from scores. */
  gapsUnreplayable: number;
  /** Batches applied from replays. */
  replayedBatches: number;
  /** Seq went backwards: engine restarts, the (worker, rank) cleared. */
  restarts: number;
  /** Exclusions after an unreplayable gap ended by the readmission delay (not by the engine). */
  readmissions: number;
  /** Apply outcomes, by the tree's status. */
  statuses: Record<ApplyStatus, number>;
}

export function emptyStats(): ZmqSourceStats {
  return {
    messages: 0,
    batches: 0,
    events: 0,
    storedBlocks: 0,
    badFrames: 0,
    badPayloads: 0,
    badEvents: 0,
    blockSizeMismatch: 0,
    duplicateHash: 0,
    nonFullAttention: 0,
    lowerTier: 0,
    gaps: 0,
    gapsReplayed: 0,
    gapsUnreplayable: 0,
    replayedBatches: 0,
    restarts: 0,
    readmissions: 0,
    statuses: { ok: 0, parent_block_not_found: 0, block_not_found: 0, invalid_block_sequence: 0 },
  };
}
