/**
 * The `--metrics <host:port>` server of `kvindex serve`: a fastify instance logging through the
 * process's pino logger, with only the operations routes (ops-routes.ts). Loopback by default:
 * the admin route removes workers, so exposing it is an explicit choice.
 */

import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { quietFastify } from './quiet-fastify.js';
import { ErrorCode, KvIndexError } from '../errors.js';
import { registerOpsRoutes, type OpsSource } from './ops-routes.js';
import { answerNoRoute } from '../http/error-answers.js';

/** `host:port`, `:port` or `port` (host 127.0.0.1); `[v6]:port` for IPv6. */
export function parseListenAddress(text: string): { host: string; port: number } {
  const m = /^(?:(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):)?([0-9]{1,5})$/.exec(text);
  const port = m === null ? NaN : Number(m[2]);
  if (m === null || !(port >= 0 && port <= 65535)) {
    throw new KvIndexError(ErrorCode.InvalidOption, `metrics address: expected host:port, got ${JSON.stringify(text)}`);
  }
  const host = m[1] === undefined || m[1] === '' ? '127.0.0.1' : m[1].replace(/^\[|\]$/g, '');
  return { host, port };
}

export interface OpsServer {
  /** `http://host:port` actually bound (port 0 resolved). */
  readonly url: string;
  readonly app: FastifyInstance;
  close(): Promise<void>;
}

/** Starts the server; rejects with the listen error (e.g. EADDRINUSE). */
export async function startOpsServer(address: { host: string; port: number }, ops: OpsSource, logger?: Logger): Promise<OpsServer> {
  const app: FastifyInstance = quietFastify(logger);
  answerNoRoute(app);
  registerOpsRoutes(app, ops);
  await app.listen({ host: address.host, port: address.port });
  const a = app.server.address();
  const port = typeof a === 'object' && a !== null ? a.port : address.port;
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  return { url: `http://${host}:${port}`, app, close: () => app.close() };
}
