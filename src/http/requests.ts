/**
 * The request bodies of the standalone indexer API, read from losslessly parsed JSON
 * (`parseJsonLossless`: integers arrive as `bigint`, so a u64 instance id or an i64 block hash
 * is exact). Fastify's JSON schemas are not used for these routes: they validate the result of
 * `JSON.parse`, which has already rounded every id above 2^53. Every check throws
 * `HttpRequestError` (code `KVX_HTTP_BAD_REQUEST`, answered with 400) naming the field.
 */

import type { RouteOverrides } from '../router/select-worker.js';
import { showValue } from '../protocol/show-value.js';
import { ErrorCode, KvIndexError } from '../errors.js';
import { codeForStatus } from './error-answers.js';
import type { JsonValue } from '../protocol/json-value.js';

export class HttpRequestError extends KvIndexError {
  /** The HTTP status of the answer. */
  readonly statusCode: number;

  /** `code` defaults to the status's (`KVX_HTTP_NOT_FOUND` for 404, ...: error-answers.ts). */
  constructor(message: string, statusCode = 400, code: ErrorCode = codeForStatus(statusCode)) {
    super(code, message);
    this.name = 'HttpRequestError';
    this.statusCode = statusCode;
  }
}

export const DEFAULT_TENANT = 'default';

/**
 * "model "m" tenant "t"" for a message, each name cut at 40 characters: a 404 once echoed a
 * 7 MB model name whole (found by fuzzing).
 */
export function modelTenant(modelName: string, tenantId: string): string {
  return `model ${showValue(modelName)} tenant ${showValue(tenantId)}`;
}

export interface RegisterRequest {
  instanceId: bigint;
  endpoint: string;
  modelName: string;
  blockSize: number;
  tenantId: string;
  dpRank: number;
  replayEndpoint: string | null;
}

export interface UnregisterRequest {
  instanceId: bigint;
  modelName: string;
  /** null: every tenant. */
  tenantId: string | null;
  /** null: every rank. */
  dpRank: number | null;
}

export interface QueryRequest {
  tokenIds: Uint32Array;
  modelName: string;
  tenantId: string;
  loraName: string | null;
}

export interface QueryByHashRequest {
  /** Local (tokens) hashes, sent as signed i64 and read back as the same 64 bits. */
  blockHashes: BigUint64Array;
  modelName: string;
  tenantId: string;
}

type Obj = { [k: string]: JsonValue };

function object(body: unknown): Obj {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpRequestError('body: expected a JSON object');
  return body as Obj;
}

function str(o: Obj, key: string): string {
  const v = o[key];
  if (typeof v !== 'string' || v === '') throw new HttpRequestError(`${key}: expected a non-empty string`);
  return v;
}

function optStr(o: Obj, key: string): string | null {
  const v = o[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw new HttpRequestError(`${key}: expected a string`);
  return v;
}

function int(o: Obj, key: string, max: bigint): bigint {
  const v = o[key];
  if (typeof v !== 'bigint' || v < 0n || v > max) throw new HttpRequestError(`${key}: expected an integer 0..${max}`);
  return v;
}

function optU32(o: Obj, key: string): number | null {
  return o[key] === undefined || o[key] === null ? null : Number(int(o, key, 0xffff_ffffn));
}

const U64_MAX = (1n << 64n) - 1n;

/**
 * Longest string a registration keeps, in characters. What /register stores is printed again and
 * again: in /workers, in log lines, and as Prometheus label values (`model`, `tenant`) of every
 * scrape; a tcp endpoint is at most a 253-character host name and a port, an ipc path at most
 * 107 bytes on Linux (sun_path), and model names are tens of characters. Dynamo sets no limit.
 */
export const REGISTER_MAX_CHARS = 1024;

/** `str`/`optStr`, at most `REGISTER_MAX_CHARS` characters. */
function bounded<T extends string | null>(key: string, v: T): T {
  if (v !== null && v.length > REGISTER_MAX_CHARS) throw new HttpRequestError(`${key}: expected at most ${REGISTER_MAX_CHARS} characters, got ${showValue(v)}`);
  return v;
}

export function readRegister(body: unknown): RegisterRequest {
  const o = object(body);
  const blockSize = Number(int(o, 'block_size', 0xffff_ffffn));
  if (blockSize === 0) throw new HttpRequestError('block_size: expected at least 1');
  return {
    instanceId: int(o, 'instance_id', U64_MAX),
    endpoint: bounded('endpoint', str(o, 'endpoint')),
    modelName: bounded('model_name', str(o, 'model_name')),
    blockSize,
    tenantId: bounded('tenant_id', optStr(o, 'tenant_id')) ?? DEFAULT_TENANT,
    dpRank: optU32(o, 'dp_rank') ?? 0,
    replayEndpoint: bounded('replay_endpoint', optStr(o, 'replay_endpoint')),
  };
}

export function readUnregister(body: unknown): UnregisterRequest {
  const o = object(body);
  return { instanceId: int(o, 'instance_id', U64_MAX), modelName: str(o, 'model_name'), tenantId: optStr(o, 'tenant_id'), dpRank: optU32(o, 'dp_rank') };
}

export function readQuery(body: unknown): QueryRequest {
  const o = object(body);
  const t = o.token_ids;
  if (!Array.isArray(t)) throw new HttpRequestError('token_ids: expected an array of u32');
  const tokenIds = new Uint32Array(t.length);
  for (let i = 0; i < t.length; i++) {
    // Numbers from JSON.parse (exact below 2^53, and a u32 is far below) or bigints.
    const v = t[i];
    const n = typeof v === 'bigint' ? (v >= 0n && v <= 0xffff_ffffn ? Number(v) : -1) : v;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 0xffff_ffff) throw new HttpRequestError(`token_ids[${i}]: expected a u32`);
    tokenIds[i] = n;
  }
  return { tokenIds, modelName: str(o, 'model_name'), tenantId: optStr(o, 'tenant_id') ?? DEFAULT_TENANT, loraName: optStr(o, 'lora_name') };
}

export interface RouteRequest extends QueryRequest {
  requestId: string | null;
  expectedOutputTokens: number | null;
  overrides: RouteOverrides | null;
}

/** The in-flight request a `/mark_prefill` or `/free` names. */
export interface RequestRef {
  requestId: string;
  modelName: string;
  tenantId: string;
}

function optNumber(o: Obj, key: string, min: number): number | null {
  const v = o[key];
  if (v === undefined || v === null) return null;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < min) throw new HttpRequestError(`${key}: expected a number >= ${min}`);
  return n;
}

/** `/route`: a `/query` body plus the request's id, its expected output and selector overrides. */
export function readRoute(body: unknown): RouteRequest {
  const o = object(body);
  const q = readQuery(o);
  let overrides: RouteOverrides | null = null;
  const ov = o.overrides;
  if (ov !== undefined && ov !== null) {
    const v = object(ov);
    overrides = {};
    const credit = optNumber(v, 'overlap_score_credit', 0);
    const scale = optNumber(v, 'prefill_load_scale', 0);
    const temperature = optNumber(v, 'router_temperature', 0);
    if (credit !== null) overrides.overlapScoreCredit = credit;
    if (scale !== null) overrides.prefillLoadScale = scale;
    if (temperature !== null) overrides.temperature = temperature;
  }
  const out = optNumber(o, 'expected_output_tokens', 0);
  return { ...q, requestId: optStr(o, 'request_id'), expectedOutputTokens: out === null ? null : Math.floor(out), overrides };
}

export function readRequestRef(body: unknown): RequestRef {
  const o = object(body);
  return { requestId: str(o, 'request_id'), modelName: str(o, 'model_name'), tenantId: optStr(o, 'tenant_id') ?? DEFAULT_TENANT };
}

export function readQueryByHash(body: unknown): QueryByHashRequest {
  const o = object(body);
  const h = o.block_hashes;
  if (!Array.isArray(h)) throw new HttpRequestError('block_hashes: expected an array of i64');
  const blockHashes = new BigUint64Array(h.length);
  for (let i = 0; i < h.length; i++) {
    const v = h[i];
    // Dynamo sends i64; a u64 above 2^63 is the same 64 bits and accepted too.
    if (typeof v !== 'bigint' || v < -(1n << 63n) || v > U64_MAX) throw new HttpRequestError(`block_hashes[${i}]: expected a 64-bit integer`);
    blockHashes[i] = BigInt.asUintN(64, v);
  }
  return { blockHashes, modelName: str(o, 'model_name'), tenantId: optStr(o, 'tenant_id') ?? DEFAULT_TENANT };
}
