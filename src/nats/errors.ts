/**
 * Errors of the NATS adapter. They extend `KvIndexError` so callers catch one base class; their
 * stable codes are part of `ErrorCode` in src/errors.ts.
 */

import { ErrorCode, KvIndexError } from '../errors.js';

/** The NATS subset of `ErrorCode`, under short names. */
export const NatsErrorCode = {
  Unreachable: ErrorCode.NatsUnreachable,
  JetStreamUnavailable: ErrorCode.NatsJetStreamUnavailable,
  RequestFailed: ErrorCode.NatsRequestFailed,
  BadQuery: ErrorCode.NatsBadQuery,
  AuthFailed: ErrorCode.NatsAuthFailed,
  TlsFailed: ErrorCode.NatsTlsFailed,
} as const;

export type NatsErrorCode = (typeof NatsErrorCode)[keyof typeof NatsErrorCode];

/** A failure talking to NATS; `code` is one of `NatsErrorCode`, `cause` the client's error. */
export class NatsError extends KvIndexError {
  constructor(code: NatsErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'NatsError';
  }
}

/** The message of an unknown thrown value, for wrapping. */
export function reason(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' && code !== '' && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}

/** True for a JetStream API error with this `err_code` (10059 stream, 10014 consumer not found). */
export function isApiError(err: unknown, errCode: number): boolean {
  const api = (err as { api_error?: { err_code?: unknown } } | null)?.api_error;
  return typeof api === 'object' && api !== null && api.err_code === errCode;
}

/** JetStream `err_code`s used here. */
export const API_STREAM_NOT_FOUND = 10059;
export const API_CONSUMER_NOT_FOUND = 10014;
/** `getMessage` of a sequence the stream does not hold. */
export const API_NO_MESSAGE = 10037;
