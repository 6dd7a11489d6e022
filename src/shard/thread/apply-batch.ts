/**
 * The shard side of an event batch (wire/event-batch.ts): applies its records to the shard's
 * tree, in order, counting statuses. JSON records are not applied here: the walk stops at one
 * and the shard parses the run of JSON records itself (shard-core.ts).
 */
import { ErrorCode, KvIndexError } from '../../errors.js';
import type { ApplyStatus } from '../../protocol/types.js';
import { u64FromHalves } from '../../protocol/u64-text.js';
import type { RadixTree } from '../../tree/radix-tree.js';
import { REC_CLEARED, REC_JSON, REC_REMOVED, REC_REMOVE_WORKER, REC_STORED, type StatusCounts } from '../wire/event-batch.js';

/** The u64 of (lo, hi) halves (the shared typed-array split of u64-text.ts: ~7 ns, no shifts). */
const u64 = (lo: number, hi: number): bigint => u64FromHalves(hi, lo);

/**
 * Where a write section starting at record word `at` ends: after the records that bring its
 * blocks to `budget` (at least one record), before a JSON record, or at the end. Its Stored
 * blocks (the most edges it can add) go to `stored[0]`.
 */
export function sectionEnd(words: Uint32Array, at: number, budget: number, stored: Int32Array): number {
  let i = at;
  let blocks = 0;
  let edges = 0;
  const end = words.length;
  while (i < end && blocks < budget) {
    const kind = words[i]!;
    if (kind === REC_STORED && i + 6 < end) {
      const n = words[i + 6]!;
      blocks += n;
      edges += n;
      i += 7 + 4 * n;
    } else if (kind === REC_REMOVED && i + 3 < end) {
      const n = words[i + 3]!;
      blocks += n;
      i += 4 + 2 * n;
    } else if (kind === REC_CLEARED || kind === REC_REMOVE_WORKER) {
      blocks += 1; // a clear can touch many blocks, but counts as one record here
      i += 3;
    } else {
      break; // a JSON record, or a malformed one that applyBatch reports
    }
  }
  stored[0] = edges;
  return i === at ? Math.min(end, at + 1) : Math.min(i, end);
}

/**
 * Applies the records of `words` from word `at` up to `end` or the first JSON record, and
 * returns the word where it stopped. Throws `KvIndexError` on a batch that is not well formed
 * (it never is unless memory is corrupt, so the shard then fails).
 */
export function applyBatch(tree: RadixTree, words: Uint32Array, counts: StatusCounts, at = 0, end = words.length): number {
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
        status = tree.applyStored(worker, words[i + 3] === 1, words[i + 4]!, words[i + 5]!, words, i + 7, n);
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
        continue;
      default:
        throw new KvIndexError(ErrorCode.ShardFailed, `event batch: unknown record kind ${kind} at word ${i}`);
    }
    counts[status]++;
  }
  if (i !== end && end === words.length) throw truncated(i);
  return i;
}

function truncated(at: number): KvIndexError {
  return new KvIndexError(ErrorCode.ShardFailed, `event batch: record at word ${at} is truncated`);
}
