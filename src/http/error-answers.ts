/**
 * The error answers of every kvindex HTTP listener (the API of `kvindex serve --http`, and the
 * `--metrics` listener of both servers), in one shape:
 *
 *   {"error":"<message>","code":"KVX_..."}
 *
 * `error` is Dynamo's standalone-indexer shape (its clients read it); `code` is kvindex's stable
 * code (src/errors.ts), to switch on; the message may change between versions. fastify's own
 * answers (no route, an unsupported or missing content type, a body that is not JSON or too
 * large, a bad URL, a malformed request line, a timeout) had three other shapes
 * (`{"message","error","statusCode"}`, `{"statusCode","code":"FST_...","error","message"}`,
 * `{"error":"Bad Request","message":"Client Error"}`): they are rewritten here.
 *
 * Every message is clipped to `MESSAGE_MAX_CHARS` as it leaves (clipText): the values a
 * message quotes are clipped where they are quoted, and this is the net under any that is not
 * (a `/register` with a 5 MB endpoint was answered with a 5 MB 400).
 */

import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, KvIndexError } from '../errors.js';
import { clipText, showValue } from '../protocol/show-value.js';

/** The content type of every JSON answer. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/** Longest error message an answer carries, in characters (a message quotes at most a few values). */
export const MESSAGE_MAX_CHARS = 1024;

/**
 * Codes of a capability this server lacks rather than a failure: without the optional zeromq
 * (or msgpack) no engine can be listened to, so `/register` is unavailable (503), not broken
 * (it answered 500), and the server says so once at start-up instead of a line per request.
 * Likewise a replica recovering from a peer (peer-recovery.ts logs its progress, not each 503).
 */
const UNAVAILABLE_CODES: ReadonlySet<string> = new Set(['KVX_ZMQ_DEPENDENCY_MISSING', 'KVX_RECOVERING']);

/** The code of an error answered with `status` when the error names none. */
export function codeForStatus(status: number): ErrorCode {
  switch (status) {
    case 400: return ErrorCode.HttpBadRequest;
    case 401: return ErrorCode.HttpUnauthorized;
    case 404: return ErrorCode.HttpNotFound;
    case 408: return ErrorCode.HttpTimeout;
    case 409: return ErrorCode.HttpConflict;
    case 413: return ErrorCode.HttpBodyTooLarge;
    case 415: return ErrorCode.HttpUnsupportedMediaType;
    case 431: return ErrorCode.HttpHeadersTooLarge;
    case 503: return ErrorCode.HttpUnavailable;
    default: return status >= 500 ? ErrorCode.Internal : ErrorCode.HttpBadRequest;
  }
}

/** `{"error":message,"code":code}`, the message clipped to `MESSAGE_MAX_CHARS`. */
export function errorJson(code: string, message: string): string {
  return JSON.stringify({ error: clipText(message, MESSAGE_MAX_CHARS), code });
}

/** Sends the error answer. */
export function sendError(reply: FastifyReply, status: number, code: string, message: string): FastifyReply {
  return reply.code(status).type(JSON_TYPE).send(errorJson(code, message));
}

/**
 * fastify's own errors, by their `FST_*` code: the status and code answered, and a message
 * naming the limit or the value (fastify's say "Unsupported Media Type" without the type).
 */
function fastifyAnswer(err: { code?: unknown; message: string }, req: FastifyRequest): { status: number; code: ErrorCode; message: string } | null {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE': {
      const type = req.headers['content-type'];
      return { status: 415, code: ErrorCode.HttpUnsupportedMediaType, message: `content-type ${type === undefined ? 'missing' : showValue(type)}: expected application/json` };
    }
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, code: ErrorCode.HttpBodyTooLarge, message: `body larger than ${req.routeOptions.bodyLimit} bytes` };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { status: 400, code: ErrorCode.HttpBadRequest, message: 'body is not JSON' };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, code: ErrorCode.HttpBadRequest, message: 'body is empty, content-type application/json' };
    // These two reach `frameworkErrors` only (quietFastify), before any route or error handler.
    case 'FST_ERR_BAD_URL':
      return { status: 400, code: ErrorCode.HttpBadRequest, message: `URL ${showValue(req.url)} is not valid` };
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return { status: 414, code: ErrorCode.HttpBadRequest, message: `URL ${showValue(req.url)}: a path parameter is longer than 100 characters` };
    default:
      return null;
  }
}

/** What `answerErrors` tells its caller of each error answer (a metrics counter). */
export type OnErrorAnswer = (route: string, status: number) => void;

/**
 * Installs the error handler on `app` (on its encapsulation context: a plugin's routes, or the
 * whole server when `app` is the root). A thrown `KvIndexError` with a `statusCode`
 * (HttpRequestError) is answered with both; any other `KvIndexError` with 500 and its code;
 * fastify's errors as `fastifyAnswer` maps them; anything else with its 4xx status, or 500
 * `KVX_INTERNAL`, logged as an error with its stack.
 */
export function answerErrors(app: FastifyInstance, onError: OnErrorAnswer | null = null): void {
  app.setErrorHandler((err: Error & { statusCode?: number; code?: unknown }, req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    const known = fastifyAnswer(err, req);
    let status: number;
    let code: string;
    if (known !== null) {
      ({ status, code } = known);
    } else if (err instanceof KvIndexError) {
      // Without a status it came from below the routes (a shard failed, the index closed): the
      // server's fault, not the request's (the routes wrap the request's in HttpRequestError).
      code = err.code;
      status = (err as { statusCode?: number }).statusCode ?? (UNAVAILABLE_CODES.has(code) ? 503 : 500);
    } else {
      status = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
      code = codeForStatus(status);
    }
    if (status >= 500 && !UNAVAILABLE_CODES.has(code)) {
      const e = err as Error;
      req.log.error({ code, route, err: clipText(e.message, MESSAGE_MAX_CHARS), stack: clipText(e.stack ?? '', 4 * MESSAGE_MAX_CHARS) }, 'route failed');
    }
    onError?.(route, status);
    void sendError(reply, status, code, known?.message ?? err.message);
  });
}

/**
 * Installs the answer to a request no route matches: 404 `KVX_HTTP_NO_ROUTE` naming the method
 * and path. Once per prefix: fastify refuses a second handler for the same prefix, so the
 * server that owns `/` (the ops listener, or the API plugin) installs it.
 */
export function answerNoRoute(app: FastifyInstance, onError: OnErrorAnswer | null = null): void {
  app.setNotFoundHandler((req, reply) => {
    onError?.('unmatched', 404);
    void sendError(reply, 404, ErrorCode.HttpNoRoute, `no route ${req.method} ${showValue(req.url)}`);
  });
}

/**
 * fastify's `frameworkErrors`: the errors it meets before routing (a URL that does not decode,
 * a path parameter past `maxParamLength`), which it otherwise answers itself in its own shape.
 */
export function answerFrameworkError(err: Error & { code?: unknown }, req: FastifyRequest, reply: FastifyReply): void {
  const known = fastifyAnswer(err, req) ?? { status: 500, code: ErrorCode.Internal, message: err.message };
  if (known.status >= 500) req.log.error({ code: known.code, err: clipText(err.message, MESSAGE_MAX_CHARS) }, 'request failed before routing');
  void sendError(reply, known.status, known.code, known.message);
}

/**
 * fastify's `clientErrorHandler`: the answer to a request Node could not read (a malformed
 * request line 400, headers past 16 KiB 431, not whole within the request timeout 408), in the
 * shape above; the connection then closes (as Node and fastify do).
 */
export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'Request Timeout', 'request not received whole in time']
      : err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request Header Fields Too Large', 'request headers too large']
        : [400, 'Bad Request', 'malformed HTTP request'];
  const body = errorJson(codeForStatus(status), message);
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: ${JSON_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(err);
}
