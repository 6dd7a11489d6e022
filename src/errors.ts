/**
 * The error hierarchy of kvindex. Every error carries a stable string `code` that callers can
 * switch on; messages name the offending field or value and may change between versions.
 * Routine engine inconsistencies (unknown parent, unknown block) are not errors: the tree
 * returns them as counted statuses (see `ApplyStatus`).
 */

/** Stable error codes. Never rename one: callers and logs depend on them. */
export const ErrorCode = {
  /** Input is not JSON, or JSON of the wrong shape for a RouterEvent / recorder line. */
  InvalidJson: 'KVX_INVALID_JSON',
  /** A field is missing, has the wrong type, or holds an out-of-range number. */
  InvalidField: 'KVX_INVALID_FIELD',
  /** `data` names a variant that is not `stored`, `removed` or `cleared`. */
  UnknownVariant: 'KVX_UNKNOWN_VARIANT',
  /** Snapshot bytes end before the structure they announce is complete. */
  SnapshotTruncated: 'KVX_SNAPSHOT_TRUNCATED',
  /** Snapshot bytes continue after the last announced event. */
  SnapshotTrailingBytes: 'KVX_SNAPSHOT_TRAILING_BYTES',
  /** A snapshot announces a count that cannot fit in the remaining bytes. */
  SnapshotBadCount: 'KVX_SNAPSHOT_BAD_COUNT',
  /** A snapshot holds an enum or option tag that the layout does not define. */
  SnapshotBadTag: 'KVX_SNAPSHOT_BAD_TAG',
  /** Snapshot bytes whose checksum disagrees with the one they carry (a corrupt copy). */
  SnapshotChecksum: 'KVX_SNAPSHOT_CHECKSUM',
  /** An option passed to a constructor or function is invalid. */
  InvalidOption: 'KVX_INVALID_OPTION',
  /** A shard thread failed or died; the message names the shard. */
  ShardFailed: 'KVX_SHARD_FAILED',
  /** The indexer was used after `close()`. */
  Closed: 'KVX_CLOSED',
  /** No NATS server answered at the URL within the connect budget. */
  NatsUnreachable: 'KVX_NATS_UNREACHABLE',
  /** The NATS server answered but JetStream is not enabled on it (start it with `-js`). */
  NatsJetStreamUnavailable: 'KVX_NATS_JETSTREAM_UNAVAILABLE',
  /** A JetStream or object-store call failed (the message names the call and the server's reason). */
  NatsRequestFailed: 'KVX_NATS_REQUEST_FAILED',
  /** A findMatches request over NATS had a bad body, or its reply reported an error. */
  NatsBadQuery: 'KVX_NATS_BAD_QUERY',
  /** A routing decision was asked for with no candidate worker. */
  NoWorkers: 'KVX_NO_WORKERS',
  /** `route` was given the id of a request that is still in flight. */
  DuplicateRequest: 'KVX_DUPLICATE_REQUEST',
  /** An optional dependency of `kvindex/zmq` (`zeromq`, `@msgpack/msgpack`) is not installed. */
  ZmqDependencyMissing: 'KVX_ZMQ_DEPENDENCY_MISSING',
  /** A ZMQ endpoint string is not `tcp://host:port`, `ipc://...` or `inproc://...`. */
  ZmqBadEndpoint: 'KVX_ZMQ_BAD_ENDPOINT',
  /** A ZMQ message has the wrong number of frames or a seq frame that is not 8 bytes. */
  ZmqBadFrame: 'KVX_ZMQ_BAD_FRAME',
  /** An engine batch is not msgpack, or not `[ts, events, dp_rank?]`. */
  ZmqBadPayload: 'KVX_ZMQ_BAD_PAYLOAD',
  /** One engine event inside a batch has a missing or ill-typed field, or an unknown tag. */
  ZmqBadEvent: 'KVX_ZMQ_BAD_EVENT',
  /** The engine's replay socket did not answer, or answered out of protocol. */
  ZmqReplayFailed: 'KVX_ZMQ_REPLAY_FAILED',
  /** An HTTP request body is not JSON or lacks a field of the route (answered with 400). */
  HttpBadRequest: 'KVX_HTTP_BAD_REQUEST',
  /** The NATS server refused kvindex's credentials (user/password, token, NKey or creds file). */
  NatsAuthFailed: 'KVX_NATS_AUTH_FAILED',
  /**
   * A gzip input file is corrupt, ends early, or goes on with bytes that are not gzip after a
   * member; the message names the file and the last line read before it.
   */
  CorruptInput: 'KVX_CORRUPT_INPUT',
  /** The TLS handshake with the NATS server failed (certificate not trusted, server without TLS, ...). */
  NatsTlsFailed: 'KVX_NATS_TLS_FAILED',
  /** An HTTP request without a valid bearer token where one is required (401). */
  HttpUnauthorized: 'KVX_HTTP_UNAUTHORIZED',
  /** No route for the request's method and path (404). */
  HttpNoRoute: 'KVX_HTTP_NO_ROUTE',
  /** The route exists but what it names does not: a (model, tenant), a worker (404). */
  HttpNotFound: 'KVX_HTTP_NOT_FOUND',
  /** The request conflicts with the server's state: another block size, a repeated registration (409). */
  HttpConflict: 'KVX_HTTP_CONFLICT',
  /** The request body is larger than the route accepts (413). */
  HttpBodyTooLarge: 'KVX_HTTP_BODY_TOO_LARGE',
  /** The request body is not sent as `application/json`, or its content type is missing (415). */
  HttpUnsupportedMediaType: 'KVX_HTTP_UNSUPPORTED_MEDIA_TYPE',
  /** The request did not arrive whole in time (408; the connection closes). */
  HttpTimeout: 'KVX_HTTP_TIMEOUT',
  /** The request's headers are larger than the server reads (431; the connection closes). */
  HttpHeadersTooLarge: 'KVX_HTTP_HEADERS_TOO_LARGE',
  /** The server cannot serve the request now; it may be retried (503). */
  HttpUnavailable: 'KVX_HTTP_UNAVAILABLE',
  /**
   * The index is too large for Dynamo's JSON `/dump` (one string past V8's ~512 MB limit, and
   * an event object per block first): ask for the binary dump instead (507).
   */
  DumpTooLarge: 'KVX_DUMP_TOO_LARGE',
  /**
   * The replica is still recovering its index from a peer (`kvindex serve --http --peers`):
   * lookups and dumps answer 503 with this code until it is whole, never partial scores.
   */
  Recovering: 'KVX_RECOVERING',
  /** A failure of the server itself (500); the log line carries the detail. */
  Internal: 'KVX_INTERNAL',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Base class of every error kvindex throws on purpose. */
export class KvIndexError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KvIndexError';
    this.code = code;
  }

  /** Plain data for crossing a thread boundary; rebuild with `KvIndexError.fromData`. */
  toData(): { code: ErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }

  static fromData(data: { code: string; message: string }): KvIndexError {
    const known = (Object.values(ErrorCode) as string[]).includes(data.code);
    return new KvIndexError(known ? (data.code as ErrorCode) : ErrorCode.ShardFailed, data.message);
  }
}

/** Malformed event input (JSON text or fields). */
export class EventParseError extends KvIndexError {
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'EventParseError';
  }
}

/** Malformed snapshot bytes. */
export class SnapshotDecodeError extends KvIndexError {
  constructor(code: ErrorCode, message: string) {
    super(code, message);
    this.name = 'SnapshotDecodeError';
  }
}
