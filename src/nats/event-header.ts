/**
 * The header of a serde-compact RouterEvent (worker id, event id, event type, DP rank), read from
 * the message bytes without parsing the blocks, for per-worker bookkeeping on the NATS path
 * (event-id gaps, last event time, events by type). serde writes
 * `{"worker_id":W,"event":{"event_id":E,"data":{"stored":...}},"dp_rank":R}}` with `dp_rank`
 * last when present, so the rank is read from the end. Text in any other layout is not
 * tracked (`readEventHeader` returns false); the indexer still parses and applies it.
 *
 * Cost, measured on the shared 2-core VM (noisy): 200-230 ns per message with a 19-digit worker
 * id, 200-300 ns with `WorkerActivity.observe`; `bench/serve-overhead.bench.ts` (`--only
 * serve-overhead`) measured 454-487 ns on 7,255-8,149 ns per message applied on the caller
 * (+5.6-6.7 %, two runs).
 */

/** Event types, as indexes into per-type counters. */
export const EVENT_TYPES = ['stored', 'removed', 'cleared'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Reused by the caller: one object, overwritten by each successful read. */
export interface EventHeader {
  workerId: bigint;
  eventId: bigint;
  /** Index into `EVENT_TYPES`. */
  type: number;
  dpRank: number;
}

const WORKER = ascii('{"worker_id":');
const EVENT = ascii(',"event":{"event_id":');
const DATA = ascii(',"data":');
const DP = ascii(',"dp_rank":');
const U64_MAX = 0xffff_ffff_ffff_ffffn;
const E15 = 1_000_000_000_000_000n;

function ascii(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

function at(b: Uint8Array, i: number, lit: Uint8Array): boolean {
  if (i + lit.length > b.length) return false;
  for (let k = 0; k < lit.length; k++) if (b[i + k] !== lit[k]) return false;
  return true;
}

/** End index of the run of digits from `i` (i itself when none). */
function digitsEnd(b: Uint8Array, i: number): number {
  while (i < b.length && b[i]! >= 0x30 && b[i]! <= 0x39) i++;
  return i;
}

/** The u64 in b[from, to) (at most 20 digits, no leading zero), or null. */
function u64(b: Uint8Array, from: number, to: number): bigint | null {
  const n = to - from;
  if (n === 0 || n > 20 || (n > 1 && b[from] === 0x30)) return null;
  // Up to 15 digits are exact in a double. Longer ones (real worker ids) are two doubles joined
  // in BigInt rather than a string built for BigInt(): 250-280 -> 200-230 ns per message.
  const split = n > 15 ? to - 15 : from;
  let hi = 0;
  for (let i = from; i < split; i++) hi = hi * 10 + (b[i]! - 0x30);
  let lo = 0;
  for (let i = split; i < to; i++) lo = lo * 10 + (b[i]! - 0x30);
  if (split === from) return BigInt(lo);
  const v = BigInt(hi) * E15 + BigInt(lo);
  return v > U64_MAX ? null : v;
}

/** Fills `out` from the bytes; false when the text is not in serde's compact layout. */
export function readEventHeader(b: Uint8Array, out: EventHeader): boolean {
  if (!at(b, 0, WORKER)) return false;
  let i = WORKER.length;
  let j = digitsEnd(b, i);
  const worker = u64(b, i, j);
  if (worker === null || !at(b, j, EVENT)) return false;
  i = j + EVENT.length;
  j = digitsEnd(b, i);
  const eventId = u64(b, i, j);
  if (eventId === null || !at(b, j, DATA)) return false;
  i = j + DATA.length;
  // {"stored": / {"removed": / "cleared"
  const c = b[i] === 0x7b ? b[i + 2] : b[i + 1];
  const type = c === 0x73 ? 0 : c === 0x72 ? 1 : c === 0x63 ? 2 : -1;
  if (type < 0) return false;
  // Tail: ...,"dp_rank":R}} or ...}}
  let dpRank = 0;
  let e = b.length - 1;
  if (b[e] !== 0x7d || b[e - 1] !== 0x7d) return false;
  e -= 2;
  // At most 11 digits are looked at (a u32 has 10): a message ending in a run of digits any
  // longer is not a header this reads, whatever its length (a 200 KB run once overflowed the
  // stack here, before the event's own parser could reject it).
  let d = e;
  while (d >= 0 && e - d <= 10 && b[d]! >= 0x30 && b[d]! <= 0x39) d--;
  if (d < e) {
    // Digits before the closing braces: only a compact `,"dp_rank":R` is read; anything else
    // (an escaped key, whitespace, another field) is not serde's layout.
    if (e - d > 10 || d - DP.length + 1 < 0 || !at(b, d - DP.length + 1, DP)) return false;
    let r = 0;
    for (let k = d + 1; k <= e; k++) r = r * 10 + (b[k]! - 0x30);
    if (r > 0xffff_ffff) return false;
    dpRank = r;
  }
  out.workerId = worker;
  out.eventId = eventId;
  out.type = type;
  out.dpRank = dpRank;
  return true;
}
