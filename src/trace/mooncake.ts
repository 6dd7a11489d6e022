/**
 * Mooncake request traces (shared/traces/README.md): JSON lines of
 * `{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [id, ...]}`, each id
 * naming a 512-token prompt block. Parsed losslessly: ids may exceed 2^53 in other traces.
 *
 * A line that is not valid JSON, is not an object, or whose `hash_ids` is missing or not a list
 * of non-negative integers (u64) is a bad line. Missing optional fields get defaults
 * (`timestamp`: the previous request's, `input_length`: 512 per id, `output_length`: 0);
 * present ones must be non-negative numbers, else the line is bad too.
 */
import { parseJsonLossless, type JsonObject, type JsonValue } from '../protocol/json-value.js';
import { openLineSource, overlongReason } from './line-source.js';
import { TRACE_BLOCK_TOKENS } from './synthetic-tokens.js';
import { showValue } from '../protocol/show-value.js';

const U64_MAX = 0xffff_ffff_ffff_ffffn;

/**
 * Blocks a trace request may have: 8,192 x 512 = 4M tokens, 11x the longest request of the
 * shipped traces (374 blocks, shared/traces/README.md). The simulation materialises a
 * request's tokens: one line of 2M ids asked for 1G tokens, held 4.2 GB for 35-55 s and then
 * failed the whole run (found by fuzzing). A longer request is a bad line.
 */
export const MAX_TRACE_BLOCKS = 8192;

/** One request of a trace. */
export interface TraceRequest {
  /** Arrival time, milliseconds from the start of the trace. */
  timestamp: number;
  inputLength: number;
  outputLength: number;
  /** Ids of the prompt's 512-token blocks, in prefix order. */
  hashIds: BigUint64Array;
  /** 1-based line number in its file. */
  line: number;
}

/** The outcome of parsing one trace line: a request, or why the line is bad. */
export type TraceLineResult = { ok: true; request: TraceRequest } | { ok: false; reason: string };

/** True when a parsed JSON value looks like a trace request (it has `hash_ids`). */
export function isTraceObject(value: JsonValue): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && 'hash_ids' in value;
}

/**
 * Parses one trace line. `previousTimestamp` fills a missing `timestamp`. Never throws: bad
 * lines come back as `{ ok: false, reason }`.
 */
export function parseTraceLine(text: string, line: number, previousTimestamp = 0): TraceLineResult {
  let value: JsonValue;
  try {
    value = parseJsonLossless(text);
  } catch (err) {
    return { ok: false, reason: `not valid JSON (${(err as Error).message})` };
  }
  return traceRequestFrom(value, line, previousTimestamp);
}

/** A request from an already parsed JSON value (see `parseTraceLine`). */
export function traceRequestFrom(value: JsonValue, line: number, previousTimestamp = 0): TraceLineResult {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, reason: 'not a JSON object' };
  const obj = value as JsonObject;
  const ids = obj['hash_ids'];
  if (!Array.isArray(ids)) return { ok: false, reason: 'hash_ids: expected a list of non-negative integers' };
  if (ids.length > MAX_TRACE_BLOCKS) {
    return { ok: false, reason: `hash_ids: ${ids.length} blocks, more than the ${MAX_TRACE_BLOCKS} a request may have` };
  }
  const hashIds = new BigUint64Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (typeof id !== 'bigint' || id < 0n || id > U64_MAX) {
      return { ok: false, reason: `hash_ids[${i}]: expected a non-negative integer, got ${showValue(id)}` };
    }
    hashIds[i] = id;
  }
  const timestamp = numberField(obj, 'timestamp', previousTimestamp);
  const inputLength = numberField(obj, 'input_length', ids.length * TRACE_BLOCK_TOKENS);
  const outputLength = numberField(obj, 'output_length', 0);
  if (typeof timestamp === 'string') return { ok: false, reason: timestamp };
  if (typeof inputLength === 'string') return { ok: false, reason: inputLength };
  if (typeof outputLength === 'string') return { ok: false, reason: outputLength };
  return { ok: true, request: { timestamp, inputLength, outputLength, hashIds, line } };
}

/** The field as a finite non-negative number, the default when absent, or an error message. */
function numberField(obj: JsonObject, key: string, fallback: number): number | string {
  const v = obj[key];
  if (v === undefined) return fallback;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) return `${key}: expected a non-negative number, got ${showValue(v)}`;
  return n;
}

/** A whole trace in memory: its valid requests and its bad lines (line number, reason). */
export interface TraceFile {
  requests: TraceRequest[];
  bad: Array<{ line: number; reason: string }>;
}

/**
 * Reads a trace file (plain or gzip) into memory, at most `limit` lines. Blank lines are
 * skipped; bad lines are collected, never thrown. For tests and benchmarks: the replay command
 * streams instead.
 */
export async function readTraceFile(path: string, limit = Infinity): Promise<TraceFile> {
  const source = await openLineSource(path);
  const requests: TraceRequest[] = [];
  const bad: Array<{ line: number; reason: string }> = [];
  let previous = 0;
  for await (const { text, line, overlong } of source.lines(limit)) {
    if (overlong !== undefined) {
      bad.push({ line, reason: overlongReason(overlong) });
      continue;
    }
    if (text.trim().length === 0) continue;
    const r = parseTraceLine(text, line, previous);
    if (r.ok) {
      requests.push(r.request);
      previous = r.request.timestamp;
    } else {
      bad.push({ line, reason: r.reason });
    }
  }
  return { requests, bad };
}
