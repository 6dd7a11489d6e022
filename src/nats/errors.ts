/**
 * Errors of the NATS adapter. They extend `KvIndexError` so callers catch one base class; their
 * stable codes are part of `ErrorCode` in src/errors.ts.
 */

import { ErrorCode, KvIndexError } from '../errors.js';
import { clipText } from '../protocol/show-value.js';

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

/**
 * The text of an unknown thrown value, for a message that wraps it or a log field. A library's
 * error (nats.js: `TIMEOUT`, `503`; Node: `ECONNREFUSED`) gets its code appended, which its
 * message often lacks. A kvindex error is its message alone: its `KVX_` code is printed once, in
 * its own place (the CLI's `[code]`, a log line's `code` field: `errorFields`, a reply's
 * `error.code`: `errorReply`), and the code of a wrapped kvindex error stays on `cause`. (It was
 * appended here too, so every such line printed it twice: `"code":"KVX_NATS_UNREACHABLE",
 * "err":"cannot reach NATS ... (KVX_NATS_UNREACHABLE)"`, and each reply's `message` ended with the
 * `code` beside it.)
 */
export function reason(err: unknown): string {
  if (err instanceof KvIndexError) return err.message;
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' && code !== '' && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}

/** The fields of a log line about `err`: `code` for a kvindex error, and `err`, its text (`reason`). */
export function errorFields(err: unknown): { code?: ErrorCode; err: string } {
  return err instanceof KvIndexError ? { code: err.code, err: err.message } : { err: reason(err) };
}

/**
 * The error reply of the NATS request/reply services (findMatches, route, admin):
 * `{"error":{"code":"KVX_...","message":"..."}}`, `KVX_INTERNAL` for an error that is not
 * kvindex's. The message is clipped (a request's values are quoted clipped where they are
 * quoted; this is the net under any that is not: a reply past max_payload is not sent).
 */
export function errorReply(err: unknown): string {
  const code = err instanceof KvIndexError ? err.code : ErrorCode.Internal;
  return JSON.stringify({ error: { code, message: clipText(reason(err), 1024) } });
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
