/**
 * The fastify instance of both listeners (`serve --http` and the `--metrics` listener): logs
 * through the process's pino logger without a line per request (a scrape every few seconds, or
 * thousands of lookups a second, would fill the log), and bounds what a slow or idle client may
 * hold.
 *
 * Why a LogController: fastify 5.12 deprecated the top-level `disableRequestLogging` option and
 * printed a deprecation warning (FSTDEP023) on stderr at every `kvindex serve` start; the
 * controller is the supported form of the same setting.
 *
 * Why the bounds: fastify sets `requestTimeout: 0`, which turns off Node's own 300 s limit, so a
 * client sending a body one byte every 5 s held its connection for as long as it liked, and
 * 4,000 such sockets were all accepted and held (found by fuzzing). A request (headers and
 * body; bodies are at most 8 MiB) must now arrive within `REQUEST_TIMEOUT_MS`, its headers
 * within `HEADERS_TIMEOUT_MS` (Node answers 408 and closes; it checks every
 * `CHECK_INTERVAL_MS`, 30 s by default), and at most `MAX_CONNECTIONS` sockets are open at once
 * (Node drops the others on accept). Idle keep-alive sockets close after fastify's 72 s.
 */
import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { answerClientError, answerErrors, answerFrameworkError } from '../http/error-answers.js';

export const REQUEST_TIMEOUT_MS = 30_000;
export const HEADERS_TIMEOUT_MS = 10_000;
export const MAX_CONNECTIONS = 16_384;
export const CHECK_INTERVAL_MS = 2_000;
/**
 * Largest request body of a route that sets no limit of its own, bytes: no operations route
 * reads a body, and the API's routes set theirs (8 MiB for lookups, 64 KiB for the others:
 * src/http/indexer-routes.ts). fastify's default was 1 MiB.
 */
export const DEFAULT_BODY_LIMIT = 64 * 1024;

/** The bounds, overridable for tests (a test cannot wait 30 s). */
export interface ConnectionBounds {
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  checkIntervalMs: number;
  maxConnections: number;
}

const DEFAULT_BOUNDS: ConnectionBounds = {
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
  headersTimeoutMs: HEADERS_TIMEOUT_MS,
  checkIntervalMs: CHECK_INTERVAL_MS,
  maxConnections: MAX_CONNECTIONS,
};

/**
 * A fastify instance with the bounds above; without a logger it logs nothing. Every error it
 * answers, fastify's own included (415, 413, a bad URL, a malformed request, a timeout), is
 * `{"error","code"}` (src/http/error-answers.ts); a plugin may install its own handlers for its
 * routes. The no-route 404 is installed by whoever owns `/` (startOpsServer, the API plugin):
 * fastify takes one per prefix.
 */
export function quietFastify(logger?: Logger, bounds: Partial<ConnectionBounds> = {}): FastifyInstance {
  const b = { ...DEFAULT_BOUNDS, ...bounds };
  const common = {
    requestTimeout: b.requestTimeoutMs,
    http: { connectionsCheckingInterval: b.checkIntervalMs },
    bodyLimit: DEFAULT_BODY_LIMIT,
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError,
  };
  const app = (logger === undefined
    ? fastify({ logger: false, ...common })
    : fastify({
      loggerInstance: logger.child({ component: 'http' }) as FastifyBaseLogger,
      logController: new LogController({ disableRequestLogging: true }),
      ...common,
    })) as unknown as FastifyInstance;
  app.server.headersTimeout = b.headersTimeoutMs;
  app.server.maxConnections = b.maxConnections;
  answerErrors(app);
  return app;
}
