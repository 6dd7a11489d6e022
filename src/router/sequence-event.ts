/**
 * The replica-sync message of `ActiveSequences`, in Dynamo's `ActiveSequenceEvent` JSON shape
 * (serde's externally tagged enum: `"data": {"AddRequest": {...}}`, `"data": "Free"`,
 * `"data": "MarkPrefillCompleted"`; the worker as `{"worker_id", "dp_rank"}`). Worker ids,
 * router ids and block hashes are u64 and read losslessly (never through a JS number).
 */
import { ErrorCode, EventParseError } from '../errors.js';
import { parseJsonLossless, type JsonObject, type JsonValue } from '../protocol/json-value.js';
import { formatU64 } from '../protocol/u64-text.js';

/**
 * Largest token count an event may carry (u32). Loads are sums of these in doubles: with counts
 * up to 2^53 a sum rounded, and after the Free events a worker's prefill load stayed at -1, so
 * every later route failed on it (a replica's hostile events, found by fuzzing). Below 2^32 the
 * sums of up to 2^21 requests in flight are exact.
 */
export const MAX_TOKEN_COUNT = 0xffff_ffff;

/** What an event does to the request. */
export type ActiveSequenceEventData =
  | {
    type: 'add_request';
    /** The prompt's sequence hashes (u64). */
    blockHashes: BigUint64Array;
    /** Whether the request's prefill tokens count in the worker's load. */
    trackPrefillTokens: boolean;
    expectedOutputTokens: number | null;
    /** Prefill tokens net of the overlap (Dynamo's `initial_effective_prefill_tokens`); null: the whole prompt. */
    prefillTokens: number | null;
  }
  | { type: 'free' }
  | { type: 'mark_prefill_completed' };

export interface ActiveSequenceEvent {
  requestId: string;
  workerId: bigint;
  dpRank: number;
  data: ActiveSequenceEventData;
  /** u64 id of the router replica that made the change (replicas skip their own). */
  routerId: bigint;
  loraName: string | null;
}

/** The event as one line of Dynamo-shaped JSON. Throws `EventParseError` for out-of-range ids. */
export function formatActiveSequenceEvent(e: ActiveSequenceEvent): string {
  const worker = `{"worker_id":${formatU64(e.workerId, 'worker.worker_id')},"dp_rank":${e.dpRank >>> 0}}`;
  let data: string;
  const d = e.data;
  if (d.type === 'add_request') {
    const hashes: string[] = [];
    for (let i = 0; i < d.blockHashes.length; i++) hashes.push(d.blockHashes[i]!.toString());
    const hint = d.prefillTokens === null ? 'null' : `{"initial_effective_prefill_tokens":${d.prefillTokens},"expected_prefill_duration":null}`;
    data = `{"AddRequest":{"token_sequence":[${hashes.join(',')}],"track_prefill_tokens":${d.trackPrefillTokens},` +
      `"expected_output_tokens":${d.expectedOutputTokens === null ? 'null' : d.expectedOutputTokens},"prefill_load_hint":${hint}}}`;
  } else {
    data = d.type === 'free' ? '"Free"' : '"MarkPrefillCompleted"';
  }
  return `{"request_id":${JSON.stringify(e.requestId)},"worker":${worker},"data":${data},` +
    `"router_id":${formatU64(e.routerId, 'router_id')},"lora_name":${e.loraName === null ? 'null' : JSON.stringify(e.loraName)}}`;
}

const bad = (field: string, what: string): never => {
  throw new EventParseError(ErrorCode.InvalidField, `${field}: ${what}`);
};

function obj(v: JsonValue | undefined, field: string): JsonObject {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad(field, 'expected an object');
  return v as JsonObject;
}

function u64(v: JsonValue | undefined, field: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > 0xffff_ffff_ffff_ffffn) return bad(field, 'expected a u64 integer');
  return v;
}

function count(v: JsonValue | undefined, field: string, max: number): number {
  const n = u64(v, field);
  if (n > BigInt(max)) bad(field, `expected at most ${max}`);
  return Number(n);
}

function parseData(v: JsonValue | undefined): ActiveSequenceEventData {
  if (v === 'Free') return { type: 'free' };
  if (v === 'MarkPrefillCompleted') return { type: 'mark_prefill_completed' };
  const o = obj(v, 'data');
  const add = o['AddRequest'];
  if (add === undefined || Object.keys(o).length !== 1) {
    throw new EventParseError(ErrorCode.UnknownVariant, `data: expected "Free", "MarkPrefillCompleted" or {"AddRequest": ...}`);
  }
  const a = obj(add, 'data.AddRequest');
  const seq = a['token_sequence'];
  let blockHashes: BigUint64Array;
  if (seq === null || seq === undefined) blockHashes = new BigUint64Array(0);
  else if (Array.isArray(seq)) blockHashes = BigUint64Array.from(seq, (h, i) => u64(h, `data.AddRequest.token_sequence[${i}]`));
  else return bad('data.AddRequest.token_sequence', 'expected an array of u64');
  const track = a['track_prefill_tokens'] ?? true;
  if (typeof track !== 'boolean') bad('data.AddRequest.track_prefill_tokens', 'expected a boolean');
  const out = a['expected_output_tokens'] ?? null;
  const hint = a['prefill_load_hint'] ?? null;
  const prefillTokens = hint === null ? null : count(obj(hint, 'data.AddRequest.prefill_load_hint')['initial_effective_prefill_tokens'], 'data.AddRequest.prefill_load_hint.initial_effective_prefill_tokens', MAX_TOKEN_COUNT);
  return {
    type: 'add_request',
    blockHashes,
    trackPrefillTokens: track as boolean,
    expectedOutputTokens: out === null ? null : count(out, 'data.AddRequest.expected_output_tokens', MAX_TOKEN_COUNT),
    prefillTokens,
  };
}

/**
 * Reads one event from Dynamo-shaped JSON. Throws `EventParseError`: `InvalidJson` for text
 * that is not JSON, `InvalidField` naming a missing or malformed field, `UnknownVariant` for
 * an unknown `data`.
 */
export function parseActiveSequenceEvent(text: string | Uint8Array): ActiveSequenceEvent {
  const o = obj(parseJsonLossless(text), 'event');
  const id = o['request_id'];
  if (typeof id !== 'string') bad('request_id', 'expected a string');
  const worker = obj(o['worker'], 'worker');
  const lora = o['lora_name'] ?? null;
  if (lora !== null && typeof lora !== 'string') bad('lora_name', 'expected a string or null');
  return {
    requestId: id as string,
    workerId: u64(worker['worker_id'], 'worker.worker_id'),
    dpRank: worker['dp_rank'] === undefined ? 0 : count(worker['dp_rank'], 'worker.dp_rank', 0xffff_ffff),
    data: parseData(o['data']),
    routerId: o['router_id'] === undefined ? 0n : u64(o['router_id'], 'router_id'),
    loraName: lora as string | null,
  };
}
