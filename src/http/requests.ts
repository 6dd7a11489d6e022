/**
 * The request bodies of the standalone indexer API, read from losslessly parsed JSON
 * (`parseJsonLossless`: integers arrive as `bigint`, so a u64 instance id or an i64 block hash
 * is exact). Fastify's JSON schemas are not used for these routes: they validate the result of
 * `JSON.parse`, which has already rounded every id above 2^53. Every check throws
 * `HttpRequestError` (code `KVX_HTTP_BAD_REQUEST`, answered with 400) naming the field.
 */

import { ErrorCode, KvIndexError } from '../errors.js';
import type { JsonValue } from '../protocol/json-value.js';

export class HttpRequestError extends KvIndexError {
  /** The HTTP status of the answer. */
  readonly statusCode: number;

  constructor(message: string, statusCode = 400) {
    super(ErrorCode.HttpBadRequest, message);
    this.name = 'HttpRequestError';
    this.statusCode = statusCode;
  }
}

export const DEFAULT_TENANT = 'default';

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

export function readRegister(body: unknown): RegisterRequest {
  const o = object(body);
  const blockSize = Number(int(o, 'block_size', 0xffff_ffffn));
  if (blockSize === 0) throw new HttpRequestError('block_size: expected at least 1');
  return {
    instanceId: int(o, 'instance_id', U64_MAX),
    endpoint: str(o, 'endpoint'),
    modelName: str(o, 'model_name'),
    blockSize,
    tenantId: optStr(o, 'tenant_id') ?? DEFAULT_TENANT,
    dpRank: optU32(o, 'dp_rank') ?? 0,
    replayEndpoint: optStr(o, 'replay_endpoint'),
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
