/**
 * Binary batches of KV events for crossing the thread boundary: one growable Uint32Array per
 * shard, transferred (not cloned) when sent. Layout per record, u64 values as (lo, hi) words:
 *   stored:        0, wLo, wHi, hasParent, pLo, pHi, n, n x (bLo, bHi, tLo, tHi)
 *   removed:       1, wLo, wHi, n, n x (lo, hi)
 *   cleared:       2, wLo, wHi
 *   remove worker: 3, wLo, wHi
 * A structured clone of event objects costs ~10x more per block than copying these words
 * (bench/shard.bench.ts measures the whole path).
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { U64_MAX, type ApplyStatus, type RouterEvent } from '../protocol/types.js';
import { assertRouterEvent } from '../protocol/validate.js';
import { u64FromHalves } from '../protocol/u64-text.js';
import type { RadixTree } from '../tree/radix-tree.js';
import { BufferPool } from './buffer-pool.js';

export const REC_STORED = 0;
export const REC_REMOVED = 1;
export const REC_CLEARED = 2;
export const REC_REMOVE_WORKER = 3;

/** Thrown inside `write` when a check fails; `push` turns it into the precise error. */
const INVALID = new Error('invalid event');

/** The largest buffer kept for reuse (4 MiB). */
const MAX_SPARE_WORDS = 1 << 20;

const big = new BigUint64Array(1);
const halves = new Uint32Array(big.buffer);

/** Accumulates records; `take()` hands the filled words over and starts a fresh buffer. */
export class EventBatchWriter {
  private buf: Uint32Array;
  private pos = 0;
  private readonly pool: BufferPool;
  /** Events (records) in the current batch. */
  events = 0;
  /** Blocks (stored + removed hashes) in the current batch. */
  blocks = 0;

  constructor(private readonly initialWords = 16 * 1024) {
    this.buf = new Uint32Array(initialWords);
    this.pool = new BufferPool(initialWords * 4, MAX_SPARE_WORDS * 4);
  }

  get words(): number {
    return this.pos;
  }

  private reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.pos + n) cap *= 2;
    const next = new Uint32Array(cap);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }

  private u64(v: bigint): void {
    // The check rides along with the write: a separate validation pass over the event cost
    // about a third of the calling thread's time per event (conversation workload).
    if (typeof v !== 'bigint' || v < 0n || v > U64_MAX) throw INVALID;
    big[0] = v;
    this.buf[this.pos++] = halves[0]!;
    this.buf[this.pos++] = halves[1]!;
  }

  /**
   * Validates and appends an event; a malformed one throws `EventParseError` (naming the field,
   * as `assertRouterEvent`) and leaves the batch as it was.
   */
  push(ev: RouterEvent): void {
    const start = this.pos;
    try {
      this.write(ev);
    } catch (err) {
      this.pos = start;
      assertRouterEvent(ev); // throws the precise error
      throw err instanceof KvIndexError ? err : new KvIndexError(ErrorCode.InvalidField, `event: malformed (${String(err)})`);
    }
    this.events++;
  }

  private write(ev: RouterEvent): void {
    const e = ev.event;
    if (typeof e !== 'object' || e === null) throw INVALID;
    if (typeof e.eventId !== 'bigint' || e.eventId < 0n || e.eventId > U64_MAX) throw INVALID;
    if (e.dpRank !== undefined && !(Number.isInteger(e.dpRank) && e.dpRank >= 0 && e.dpRank <= 0xffffffff)) throw INVALID;
    const data = e.data;
    if (typeof data !== 'object' || data === null) throw INVALID;
    switch (data.type) {
      case 'stored': {
        if (!Array.isArray(data.blocks)) throw INVALID;
        const n = data.blocks.length;
        this.reserve(7 + 4 * n);
        this.buf[this.pos++] = REC_STORED;
        this.u64(ev.workerId);
        if (data.parentHash === null) {
          this.buf[this.pos++] = 0;
          this.buf[this.pos++] = 0;
          this.buf[this.pos++] = 0;
        } else {
          this.buf[this.pos++] = 1;
          this.u64(data.parentHash);
        }
        this.buf[this.pos++] = n;
        for (let i = 0; i < n; i++) {
          const b = data.blocks[i]!;
          if (typeof b !== 'object' || b === null) throw INVALID;
          this.u64(b.blockHash);
          this.u64(b.tokensHash);
        }
        this.blocks += n;
        break;
      }
      case 'removed': {
        if (!Array.isArray(data.blockHashes)) throw INVALID;
        const n = data.blockHashes.length;
        this.reserve(4 + 2 * n);
        this.buf[this.pos++] = REC_REMOVED;
        this.u64(ev.workerId);
        this.buf[this.pos++] = n;
        for (let i = 0; i < n; i++) this.u64(data.blockHashes[i]!);
        this.blocks += n;
        break;
      }
      case 'cleared':
        this.reserve(3);
        this.buf[this.pos++] = REC_CLEARED;
        this.u64(ev.workerId);
        break;
      default:
        throw INVALID;
    }
  }

  /**
   * Appends a Stored record from words already checked (json-words.ts): `n` blocks as
   * (bLo, bHi, tLo, tHi) at `words[0 ..]`.
   */
  pushStoredWords(wLo: number, wHi: number, hasParent: boolean, pLo: number, pHi: number, words: Uint32Array, n: number): void {
    this.reserve(7 + 4 * n);
    const b = this.buf;
    let p = this.pos;
    b[p] = REC_STORED;
    b[p + 1] = wLo;
    b[p + 2] = wHi;
    b[p + 3] = hasParent ? 1 : 0;
    b[p + 4] = hasParent ? pLo : 0;
    b[p + 5] = hasParent ? pHi : 0;
    b[p + 6] = n;
    p += 7;
    b.set(words.subarray(0, 4 * n), p);
    this.pos = p + 4 * n;
    this.blocks += n;
    this.events++;
  }

  /** Appends a Removed record from words already checked: `n` hashes as (lo, hi). */
  pushRemovedWords(wLo: number, wHi: number, words: Uint32Array, n: number): void {
    this.reserve(4 + 2 * n);
    const b = this.buf;
    const p = this.pos;
    b[p] = REC_REMOVED;
    b[p + 1] = wLo;
    b[p + 2] = wHi;
    b[p + 3] = n;
    b.set(words.subarray(0, 2 * n), p + 4);
    this.pos = p + 4 + 2 * n;
    this.blocks += n;
    this.events++;
  }

  /** Appends a Cleared record. */
  pushClearedWords(wLo: number, wHi: number): void {
    this.reserve(3);
    this.buf[this.pos++] = REC_CLEARED;
    this.buf[this.pos++] = wLo;
    this.buf[this.pos++] = wHi;
    this.events++;
  }

  pushRemoveWorker(workerId: bigint): void {
    this.reserve(3);
    this.buf[this.pos++] = REC_REMOVE_WORKER;
    this.u64(workerId);
    this.events++;
  }

  /** Whether the batch just taken should come back for reuse (see BufferPool). */
  askBack(): boolean {
    return this.pool.askBack();
  }

  /** Takes back a buffer that `askBack` asked for. */
  recycle(buffer: ArrayBuffer): void {
    this.pool.recycle(buffer);
  }

  /** The filled words (a view on a buffer the caller may transfer); resets the writer. */
  take(): Uint32Array {
    const out = this.buf.subarray(0, this.pos);
    const spare = this.pool.take();
    this.buf = spare !== null ? new Uint32Array(spare) : new Uint32Array(Math.max(this.initialWords, Math.min(this.pos, MAX_SPARE_WORDS)));
    this.pos = 0;
    this.events = 0;
    this.blocks = 0;
    return out;
  }
}

/** Per-status counters, in the shape of `ShardStats.events`. */
export type StatusCounts = Record<ApplyStatus, number>;

export function emptyCounts(): StatusCounts {
  return { ok: 0, parent_block_not_found: 0, block_not_found: 0, invalid_block_sequence: 0 };
}

/** The u64 of (lo, hi) halves (the shared typed-array split of u64-text.ts: ~7 ns, no shifts). */
const u64 = (lo: number, hi: number): bigint => u64FromHalves(hi, lo);

/**
 * Applies every record of a batch to the tree, counting statuses. Throws `KvIndexError` on a
 * batch that is not well formed (it never is unless memory is corrupt, so the shard then fails).
 */
export function applyBatch(tree: RadixTree, words: Uint32Array, counts: StatusCounts): number {
  let i = 0;
  let events = 0;
  const end = words.length;
  while (i < end) {
    const kind = words[i]!;
    if (i + 3 > end) break;
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
        events++;
        continue;
      default:
        throw new KvIndexError(ErrorCode.ShardFailed, `event batch: unknown record kind ${kind} at word ${i}`);
    }
    counts[status]++;
    events++;
  }
  if (i !== end) throw truncated(i);
  return events;
}

function truncated(at: number): KvIndexError {
  return new KvIndexError(ErrorCode.ShardFailed, `event batch: record at word ${at} is truncated`);
}
