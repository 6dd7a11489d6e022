/**
 * Errors of the ZMQ adapter. They extend `KvIndexError` so callers catch one base class; their
 * stable codes are part of `ErrorCode` in src/errors.ts. Malformed engine input is not thrown
 * out of a source: it is counted and logged with the endpoint and seq (see source.ts).
 */

import { ErrorCode, KvIndexError } from '../errors.js';

/** The ZMQ subset of `ErrorCode`, under short names. */
export const ZmqErrorCode = {
  DependencyMissing: ErrorCode.ZmqDependencyMissing,
  BadEndpoint: ErrorCode.ZmqBadEndpoint,
  BadFrame: ErrorCode.ZmqBadFrame,
  BadPayload: ErrorCode.ZmqBadPayload,
  BadEvent: ErrorCode.ZmqBadEvent,
  ReplayFailed: ErrorCode.ZmqReplayFailed,
} as const;

export type ZmqErrorCode = (typeof ZmqErrorCode)[keyof typeof ZmqErrorCode];

/** A ZMQ adapter failure; `code` is one of `ZmqErrorCode`. */
export class ZmqError extends KvIndexError {
  constructor(code: ZmqErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'ZmqError';
  }
}
