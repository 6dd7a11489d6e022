/**
 * Reader of the replay workload format (shared/workloads/README.md): gzip or plain JSON lines of
 * `{"op":"meta",...}`, `{"op":"match","seq":[...],"expect":{...}}` and
 * `{"op":"event","event":<RouterEvent>}`. Unknown ops are returned as `other` so callers can
 * ignore them, as the format asks.
 */
import { ErrorCode, EventParseError } from '../errors.js';
import { parseRouterEvent } from '../protocol/json-parse.js';
import { parseJsonLossless, parseU64Array, type JsonObject } from '../protocol/json-value.js';
import type { RouterEvent } from '../protocol/types.js';
import { showValue } from '../protocol/show-value.js';
import { openLineSource, overlongReason } from './line-source.js';

export type WorkloadOp =
  | { op: 'meta'; meta: JsonObject }
  | { op: 'match'; seq: BigUint64Array; expect: Map<bigint, number> }
  | { op: 'event'; event: RouterEvent; text: string }
  | { op: 'other' };

const EVENT_PREFIX = '{"op":"event","event":';
const EXPECT_KEY = '"expect":';

const U64_MAX = 0xffff_ffff_ffff_ffffn;

function bad(line: number, what: string): never {
  throw new EventParseError(ErrorCode.InvalidJson, `workload line ${line}: ${what}`);
}

/** Parses one workload line (1-based `lineNo` for messages). Throws `EventParseError`. */
export function parseWorkloadLine(line: string, lineNo: number): WorkloadOp {
  // Whitespace around the object is JSON's: an event line with a trailing space was refused
  // as an "unexpected layout" (found by fuzzing).
  const text = line.trim();
  if (text.startsWith(EVENT_PREFIX) && text.endsWith('}')) {
    // The generator writes compact JSON with `op` first: the event is the rest of the object.
    const inner = text.slice(EVENT_PREFIX.length, -1);
    return { op: 'event', event: parseRouterEvent(inner), text: inner };
  }
  if (text.startsWith('{"op":"match"')) {
    const seq = parseU64Array(text, 'seq');
    const at = text.indexOf(EXPECT_KEY);
    if (at < 0) bad(lineNo, 'match without expect');
    const end = text.indexOf('}', at);
    if (end < 0) bad(lineNo, 'unterminated expect');
    const obj = parseJsonLossless(text.slice(at + EXPECT_KEY.length, end + 1));
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) bad(lineNo, 'expect is not an object');
    const expect = new Map<bigint, number>();
    for (const [k, v] of Object.entries(obj as JsonObject)) {
      // A worker id is a u64 and a score a block count: an id past 2^64-1 was taken, and
      // counted as a lookup mismatch instead of a bad line (found by fuzzing).
      if (!/^[0-9]{1,20}$/.test(k) || BigInt(k) > U64_MAX || typeof v !== 'bigint' || v < 0n || v > 0xffff_ffffn) {
        bad(lineNo, `bad expect entry ${showValue(k)}: ${showValue(v)}`);
      }
      expect.set(BigInt(k), Number(v));
    }
    return { op: 'match', seq, expect };
  }
  const value = parseJsonLossless(text);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) bad(lineNo, 'not an object');
  const obj = value as JsonObject;
  if (obj['op'] === 'meta') return { op: 'meta', meta: obj };
  if (obj['op'] === 'match' || obj['op'] === 'event') bad(lineNo, `unexpected layout of a ${String(obj['op'])} line`);
  return { op: 'other' };
}

/**
 * Streams a workload file, plain or gzip (told by its magic bytes, line-source.ts); `limit` caps
 * the lines read. A bad line throws `EventParseError`, a corrupt gzip `KVX_CORRUPT_INPUT`.
 */
export async function* readWorkload(path: string, limit = Infinity): AsyncGenerator<WorkloadOp> {
  const source = await openLineSource(path);
  for await (const { text, line, overlong } of source.lines(limit)) {
    if (overlong !== undefined) bad(line, overlongReason(overlong));
    if (text.length === 0) continue;
    yield parseWorkloadLine(text, line);
  }
}
