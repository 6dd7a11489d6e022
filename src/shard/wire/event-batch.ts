/**
 * Binary batches of KV events for crossing the thread boundary: one growable Uint32Array per
 * shard, copied into the shard's batch ring when sent (batch-ring.ts), or, when the ring has no
 * room, transferred (not cloned). It is the shard's one ordered queue of events:
 * binary events, raw JSON events and worker removals are records of the same batch, in call
 * order. Layout per record, u64 values as (lo, hi) words:
 *   stored:        0, wLo, wHi, hasParent, pLo, pHi, n, n x (bLo, bHi, tLo, tHi)
 *   removed:       1, wLo, wHi, n, n x (lo, hi)
 *   cleared:       2, wLo, wHi
 *   remove worker: 3, wLo, wHi
 *   JSON event:    4, bytes, tagLo, tagHi, ceil(bytes / 4) words of UTF-8 text (parsed by the
 *                  shard; tag + 1 as a u53 in two halves, 0 for none)
 * A structured clone of event objects costs ~10x more per block than copying these words
 * (bench/shard.bench.ts measures the whole path).
 */
import { ErrorCode, KvIndexError } from '../../errors.js';
import { U64_MAX, type ApplyStatus, type RouterEvent } from '../../protocol/types.js';
import { assertRouterEvent } from '../../protocol/validate.js';
import { BufferPool } from './buffer-pool.js';

export const REC_STORED = 0;
export const REC_REMOVED = 1;
export const REC_CLEARED = 2;
export const REC_REMOVE_WORKER = 3;
export const REC_JSON = 4;

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

  /** `poolBytes`: spare buffers held at most (buffer-pool.ts). */
  constructor(private readonly initialWords = 16 * 1024, poolBytes = 4 * MAX_SPARE_WORDS * 4) {
    this.buf = new Uint32Array(initialWords);
    this.pool = new BufferPool(initialWords * 4, MAX_SPARE_WORDS * 4, poolBytes);
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

  /**
   * Appends one event's serde JSON text, unparsed: the shard parses it (json-words.ts, or the
   * full parser) and reports it with `tag` (>= 0, e.g. a stream sequence; -1: none) if malformed.
   */
  pushJson(text: Uint8Array, tag: number): void {
    const n = text.length;
    const words = (n + 3) >>> 2;
    this.reserve(4 + words);
    const b = this.buf;
    const p = this.pos;
    const t = tag >= 0 ? tag + 1 : 0;
    b[p] = REC_JSON;
    b[p + 1] = n;
    b[p + 2] = t % 0x1_0000_0000;
    b[p + 3] = Math.floor(t / 0x1_0000_0000);
    new Uint8Array(b.buffer, b.byteOffset + 4 * (p + 4), n).set(text);
    this.pos = p + 4 + words;
    this.events++;
  }

  pushRemoveWorker(workerId: bigint): void {
    this.reserve(3);
    this.buf[this.pos++] = REC_REMOVE_WORKER;
    this.u64(workerId);
    this.events++;
  }

  /** Whether the batch just taken (`words`) should come back for reuse (see BufferPool). */
  askBack(words: Uint32Array): boolean {
    return this.pool.askBack(words.buffer.byteLength);
  }

  /** Takes back a buffer that `askBack` asked for. */
  recycle(buffer: ArrayBuffer): void {
    this.pool.recycle(buffer);
  }

  /**
   * Copies the filled words to `dst` at word `at` and resets the writer, keeping its buffer
   * (the batch ring's path: one scratch per shard, reused for every batch).
   */
  copyInto(dst: Uint32Array, at: number): void {
    dst.set(this.buf.subarray(0, this.pos), at);
    this.pos = 0;
    this.events = 0;
    this.blocks = 0;
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

/** The tag of a JSON record from its two words (-1: none). */
export function jsonTag(lo: number, hi: number): number {
  return hi * 0x1_0000_0000 + lo - 1;
}

/** Per-status counters, in the shape of `ShardStats.events`. */
export type StatusCounts = Record<ApplyStatus, number>;

export function emptyCounts(): StatusCounts {
  return { ok: 0, parent_block_not_found: 0, block_not_found: 0, invalid_block_sequence: 0 };
}

