/**
 * Batches of raw JSON events for the shard that owns their worker: the calling thread reads only
 * the worker id (serde writes it first: `{"worker_id":N,`), the shard parses the rest. Parsing
 * measured ~170 ns per block on the conversation workload, about half the cost of applying the
 * block, so leaving it on the calling thread would cap ingestion from NATS or files at one
 * core (bench/shard.bench.ts compares both paths).
 */
import { parseRouterEvent } from '../protocol/json-parse.js';
import type { RouterEvent } from '../protocol/types.js';

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
  private buf = new Uint8Array(256 * 1024);
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

  take(): { bytes: Uint8Array; ends: Uint32Array; tags: Float64Array } {
    const out = { bytes: this.buf.subarray(0, this.pos), ends: Uint32Array.from(this.ends), tags: Float64Array.from(this.tags) };
    this.buf = new Uint8Array(Math.max(256 * 1024, Math.min(this.pos, 8 << 20)));
    this.pos = 0;
    this.ends = [];
    this.tags = [];
    return out;
  }
}

/** Parses each event of a batch; `onEvent` gets the valid ones, `onError` the failures in order. */
export function forEachJsonEvent(
  bytes: Uint8Array, ends: Uint32Array,
  onEvent: (e: RouterEvent) => void, onError: (err: unknown, index: number) => void,
): void {
  let start = 0;
  for (let i = 0; i < ends.length; i++) {
    const end = ends[i]!;
    let ev: RouterEvent | null = null;
    try {
      ev = parseRouterEvent(bytes.subarray(start, end));
    } catch (err) {
      onError(err, i);
    }
    if (ev !== null) onEvent(ev);
    start = end;
  }
}
