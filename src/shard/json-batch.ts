/**
 * Batches of raw JSON events for the shard that owns their worker: the calling thread reads only
 * the worker id (serde writes it first: `{"worker_id":N,`), the shard parses the rest, straight
 * into batch words when the text has serde's canonical layout (json-words.ts). Parsing to event
 * objects measured ~170 ns per block on the conversation workload, about half the cost of
 * applying the block (bench/shard.bench.ts compares parsing on the calling thread with parsing
 * in the shards).
 */
import { parseRouterEvent } from '../protocol/json-parse.js';
import { BufferPool } from './buffer-pool.js';
import type { EventBatchWriter } from './event-batch.js';
import type { JsonEventEncoder } from './json-words.js';

/** Text buffer sizes: the initial one, and the largest kept for reuse. */
const MIN_BYTES = 256 * 1024;
const MAX_BYTES = 8 << 20;

const PREFIX = [0x7b, 0x22, 0x77, 0x6f, 0x72, 0x6b, 0x65, 0x72, 0x5f, 0x69, 0x64, 0x22, 0x3a]; // {"worker_id":

/**
 * The worker id of a serde-compact RouterEvent, read from its leading `{"worker_id":N` without
 * parsing the rest; null when the text does not start that way (the caller then parses it all).
 */
export function peekWorkerId(bytes: Uint8Array): bigint | null {
  if (bytes.length < PREFIX.length + 2) return null;
  for (let i = 0; i < PREFIX.length; i++) if (bytes[i] !== PREFIX[i]) return null;
  let i = PREFIX.length;
  const start = i;
  // Up to 15 digits fit a double exactly; longer ids (most real ones) go through BigInt once.
  let small = 0;
  while (i < bytes.length && bytes[i]! >= 0x30 && bytes[i]! <= 0x39) {
    small = small * 10 + (bytes[i]! - 0x30);
    i++;
  }
  const digits = i - start;
  if (digits === 0 || digits > 20 || (digits > 1 && bytes[start] === 0x30)) return null;
  if (bytes[i] !== 0x2c && bytes[i] !== 0x7d && bytes[i] !== 0x20) return null;
  if (digits <= 15) return BigInt(small);
  let text = '';
  for (let k = start; k < i; k++) text += String.fromCharCode(bytes[k]!);
  const v = BigInt(text);
  return v > 0xffff_ffff_ffff_ffffn ? null : v;
}

/** Concatenated event texts plus their end offsets; `take()` hands both over for transfer. */
export class JsonBatchWriter {
  private buf = new Uint8Array(MIN_BYTES);
  private readonly pool = new BufferPool(MIN_BYTES, MAX_BYTES);
  private pos = 0;
  private ends: number[] = [];
  private tags: number[] = [];

  get events(): number {
    return this.ends.length;
  }

  get bytes(): number {
    return this.pos;
  }

  /** Appends one event's text; `tag` (e.g. a stream sequence) comes back with a rejection. */
  push(text: Uint8Array, tag: number): void {
    if (this.pos + text.length > this.buf.length) {
      let cap = this.buf.length * 2;
      while (cap < this.pos + text.length) cap *= 2;
      const next = new Uint8Array(cap);
      next.set(this.buf.subarray(0, this.pos));
      this.buf = next;
    }
    this.buf.set(text, this.pos);
    this.pos += text.length;
    this.ends.push(this.pos);
    this.tags.push(tag);
  }

  /** Whether the batch just taken should come back for reuse (see BufferPool). */
  askBack(): boolean {
    return this.pool.askBack();
  }

  /** Takes back a text buffer that `askBack` asked for. */
  recycle(buffer: ArrayBuffer): void {
    this.pool.recycle(buffer);
  }

  take(): { bytes: Uint8Array; ends: Uint32Array; tags: Float64Array } {
    const out = { bytes: this.buf.subarray(0, this.pos), ends: Uint32Array.from(this.ends), tags: Float64Array.from(this.tags) };
    const spare = this.pool.take();
    this.buf = spare !== null ? new Uint8Array(spare) : new Uint8Array(Math.max(MIN_BYTES, Math.min(this.pos, MAX_BYTES)));
    this.pos = 0;
    this.ends = [];
    this.tags = [];
    return out;
  }
}

/**
 * Encodes each event of a JSON batch into `writer`: the canonical layout through `encoder`
 * (no event object), anything else through `parseRouterEvent`. A malformed event writes
 * nothing and goes to `onError` with its index; the others keep their order.
 */
export function encodeJsonBatch(
  bytes: Uint8Array, ends: Uint32Array, encoder: JsonEventEncoder, writer: EventBatchWriter,
  onError: (err: unknown, index: number) => void,
): void {
  let start = 0;
  for (let i = 0; i < ends.length; i++) {
    const end = ends[i]!;
    if (!encoder.encode(bytes, start, end, writer)) {
      try {
        writer.push(parseRouterEvent(bytes.subarray(start, end)));
      } catch (err) {
        onError(err, i);
      }
    }
    start = end;
  }
}
