/**
 * The shard side of an event batch (wire/event-batch.ts): applies its records to the shard's
 * tree, in order, counting statuses, in write sections under the readers' lock. JSON records
 * are not applied here: the walk stops at one and the shard parses the run of JSON records
 * itself (shard-core.ts).
 */
import { ErrorCode, KvIndexError } from '../../errors.js';
import type { ApplyStatus } from '../../protocol/types.js';
import { u64FromHalves } from '../../protocol/u64-text.js';
import type { RadixTree } from '../../tree/radix-tree.js';
import { REC_CLEARED, REC_JSON, REC_REMOVED, REC_REMOVE_WORKER, REC_STORED, type StatusCounts } from '../wire/event-batch.js';
import { hasWaiter, lockTree, unlockTreeHandoff } from '../wire/tree-lock.js';

/**
 * Steps (blocks published or removed) a write section takes between two looks for a queued
 * reader (hasWaiter); Cleared and worker removals are checked after each. With the check, no
 * section held the lock more than 20 us past a reader's arrival unless its thread was
 * descheduled (offered-load sweep at 5,000x on the 2-core dev VM: ~150 such holds per run,
 * 0.1-8 ms each, when three busy threads share two cores).
 */
export const YIELD_BLOCKS = 8;

/** The u64 of (lo, hi) halves (the shared typed-array split of u64-text.ts: ~7 ns, no shifts). */
const u64 = (lo: number, hi: number): bigint => u64FromHalves(hi, lo);

/**
 * Applies the records of `words` from word `at` up to the first JSON record or the end, in
 * write sections under the readers' lock (`header`: src/tree/shared-layout.ts), and returns
 * the word where it stopped. Stored and Removed events do what needs no lock outside it, one
 * event at a time (storeRecord, removeRecord); Cleared and worker removals are applied together.
 */
export function applyInSections(
  tree: RadixTree, words: Uint32Array, at: number, counts: StatusCounts, header: Int32Array, budget: number,
): number {
  let i = at;
  const end = words.length;
  while (i < end) {
    const kind = words[i]!;
    if (kind === REC_JSON) return i;
    if (kind === REC_STORED) {
      i = storeRecord(tree, words, i, counts, header, budget);
      continue;
    }
    if (kind === REC_REMOVED) {
      i = removeRecord(tree, words, i, counts, header, budget);
      continue;
    }
    // Cleared and worker removals: as many as fit `budget` workers, up to the next other record.
    let j = i;
    let records = 0;
    while (j < end && records < budget) {
      const k = words[j]!;
      if (k === REC_CLEARED || k === REC_REMOVE_WORKER) {
        records++;
        j += 3;
      } else {
        break; // Stored, Removed, JSON, or a malformed record that applyBatch reports
      }
    }
    const stop = j === i ? end : Math.min(j, end);
    lockTree(header);
    try {
      i = applyBatch(tree, words, counts, i, stop, header);
    } finally {
      unlockTreeHandoff(header);
    }
  }
  return i;
}

/**
 * A Stored event: checked and prepared outside the lock (reading the tree, and writing nodes no
 * reader can reach yet, needs none: this thread is the only writer), then published under it in
 * sections of at most `budget` units (radix-tree.ts `prepareStore`). Measured in the offered-load
 * sweep (2 shards, 2,000-10,000x, dev VM) before this split: a shard thread descheduled while
 * holding the lock kept lookups waiting 0.1-8 ms, and stores were half of the locked time.
 */
function storeRecord(tree: RadixTree, words: Uint32Array, i: number, counts: StatusCounts, header: Int32Array, budget: number): number {
  if (i + 7 > words.length) throw truncated(i);
  const n = words[i + 6]!;
  if (i + 7 + 4 * n > words.length) throw truncated(i);
  const worker = u64(words[i + 1]!, words[i + 2]!);
  const status = tree.checkStored(worker, words[i + 3] === 1, words[i + 4]! | 0, words[i + 5]! | 0, words, i + 7, n);
  if (status === null) {
    if (tree.reserveStore(n)) {
      // The edge table was rebuilt aside: switch before new edges go in (rare: it doubles).
      lockTree(header);
      try {
        tree.commitEdges();
      } finally {
        unlockTreeHandoff(header);
      }
    }
    publishInSections(tree, header, tree.prepareStore(worker, words, i + 7, n), budget, false);
  }
  counts[status ?? 'ok']++;
  return i + 7 + 4 * n;
}

/**
 * A Removed event: its pairs found outside the lock (resolving only reads), dropped under it
 * in sections of at most `budget` hashes (a part of its removals is a valid state for readers),
 * then forgotten in the worker's lookup outside it again (radix-tree.ts `resolveRemoved`).
 */
function removeRecord(tree: RadixTree, words: Uint32Array, i: number, counts: StatusCounts, header: Int32Array, budget: number): number {
  if (i + 4 > words.length) throw truncated(i);
  const n = words[i + 3]!;
  if (i + 4 + 2 * n > words.length) throw truncated(i);
  const worker = u64(words[i + 1]!, words[i + 2]!);
  const resolved = tree.resolveRemoved(worker, words, i + 4, n);
  const missing = resolved < 0 ? n : publishInSections(tree, header, resolved, budget, true);
  if (resolved > 0) tree.forgetResolved();
  counts[missing > 0 ? 'block_not_found' : 'ok']++;
  return i + 4 + 2 * n;
}

/**
 * The locked part of the event prepared last, `units` steps (`commitStore`, or with `removal`
 * `dropResolved`), in sections of at most `budget` steps that end early once a reader queues
 * (hasWaiter, every YIELD_BLOCKS steps); a store's last section enforces the pair budget.
 * Returns the hashes a removal found the worker no longer held.
 */
function publishInSections(tree: RadixTree, header: Int32Array, units: number, budget: number, removal: boolean): number {
  let missing = 0;
  let from = 0;
  while (from < units) {
    lockTree(header);
    try {
      const limit = Math.min(units, from + budget);
      do {
        const to = Math.min(limit, from + YIELD_BLOCKS);
        if (removal) missing += tree.dropResolved(from, to);
        else tree.commitStore(from, to);
        from = to;
      } while (from < limit && !hasWaiter(header));
      if (!removal && from >= units) tree.enforceBudget(); // the pair budget, once the event is whole
    } finally {
      unlockTreeHandoff(header);
    }
  }
  return missing;
}

/**
 * Applies the records of `words` from word `at` up to `end` or the first JSON record, and
 * returns the word where it stopped. Throws `KvIndexError` on a batch that is not well formed
 * (it never is unless memory is corrupt, so the shard then fails). With `yieldTo` (the header
 * of the lock held) it also stops after a record when a reader queued for the lock.
 */
export function applyBatch(
  tree: RadixTree, words: Uint32Array, counts: StatusCounts, at = 0, end = words.length, yieldTo: Int32Array | null = null,
): number {
  let i = at;
  while (i < end) {
    const kind = words[i]!;
    if (kind === REC_JSON) return i;
    if (i + 3 > end) throw truncated(i);
    const worker = u64(words[i + 1]!, words[i + 2]!);
    let status: ApplyStatus;
    switch (kind) {
      case REC_STORED: {
        const n = words[i + 6]!;
        if (i + 7 + 4 * n > end) throw truncated(i);
        status = tree.applyStored(worker, words[i + 3] === 1, words[i + 4]! | 0, words[i + 5]! | 0, words, i + 7, n);
        i += 7 + 4 * n;
        break;
      }
      case REC_REMOVED: {
        const n = words[i + 3]!;
        if (i + 4 + 2 * n > end) throw truncated(i);
        status = tree.applyRemoved(worker, words, i + 4, n);
        i += 4 + 2 * n;
        break;
      }
      case REC_CLEARED:
        tree.clearWorker(worker);
        status = 'ok';
        i += 3;
        break;
      case REC_REMOVE_WORKER:
        tree.removeWorker(worker);
        i += 3;
        if (yieldTo !== null && i < end && hasWaiter(yieldTo)) return i;
        continue;
      default:
        throw new KvIndexError(ErrorCode.ShardFailed, `event batch: unknown record kind ${kind} at word ${i}`);
    }
    counts[status]++;
    if (yieldTo !== null && i < end && hasWaiter(yieldTo)) return i;
  }
  if (i !== end && end === words.length) throw truncated(i);
  return i;
}

function truncated(at: number): KvIndexError {
  return new KvIndexError(ErrorCode.ShardFailed, `event batch: record at word ${at} is truncated`);
}
