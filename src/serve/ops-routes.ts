/**
 * `registerOpsRoutes(app, ops)`: the operations routes of a kvindex process, on any fastify
 * instance, so the `--metrics` server of `kvindex serve` and an HTTP API server (Dynamo's
 * standalone-indexer API) serve the same routes from the same code:
 *
 * - `GET /metrics`: Prometheus text format (ServeMetrics, src/serve/metrics.ts).
 * - `GET /health`: 200 `{"status":"ok"}` while the process runs (liveness).
 * - `GET /ready`: 200 `{"ready":true,...}` once the index is restored and caught up, else 503
 *   with the reason and the lag (readiness: route traffic to this replica only when 200).
 * - `DELETE /workers/<u64>` (when `removeWorker` is given): removes the worker's blocks now;
 *   200 `{"removed":"<id>","known":bool}`, 400 `KVX_INVALID_FIELD` for an id that is not a u64,
 *   503 with the error's code when the index cannot take it (not started, closed, failed).
 *
 * Errors are the HTTP API's `{"error","code"}` (src/http/error-answers.ts), on these routes and
 * on fastify's own answers (quiet-fastify.ts installs the handlers on the whole server).
 *
 * The worker id is read from the path as decimal text and kept a bigint (ids pass 2^53).
 */

import type { FastifyInstance } from 'fastify';
import { ErrorCode, KvIndexError } from '../errors.js';
import { sendError } from '../http/error-answers.js';
import { showValue } from '../protocol/show-value.js';

export interface OpsSource {
  metrics: { scrape(): Promise<{ contentType: string; body: string }> };
  readiness(): { ready: boolean; reason: string; lag: number };
  removeWorker?: (workerId: bigint) => Promise<boolean>;
}

const U64_MAX = 0xffff_ffff_ffff_ffffn;

/** Registers the routes above on `app` (before it listens). */
export function registerOpsRoutes(app: FastifyInstance, ops: OpsSource): void {
  app.get('/metrics', async (_req, reply) => {
    const { contentType, body } = await ops.metrics.scrape();
    return reply.type(contentType).send(body);
  });
  app.get('/health', async () => ({ status: 'ok' }));
  app.get('/ready', async (_req, reply) => {
    const r = ops.readiness();
    return reply.code(r.ready ? 200 : 503).send(r);
  });
  const remove = ops.removeWorker;
  if (remove !== undefined) {
    app.delete<{ Params: { workerId: string } }>('/workers/:workerId', async (req, reply) => {
      const text = req.params.workerId;
      const id = /^(0|[1-9][0-9]{0,19})$/.test(text) ? BigInt(text) : null;
      if (id === null || id > U64_MAX) {
        return sendError(reply, 400, ErrorCode.InvalidField, `worker id: expected a u64 in decimal, got ${showValue(text)}`);
      }
      try {
        const known = await remove(id);
        return { removed: id.toString(), known };
      } catch (err) {
        // Not started yet, or the indexer failed: the request may be retried.
        const code = err instanceof KvIndexError ? err.code : ErrorCode.Internal;
        return sendError(reply, 503, code, err instanceof Error ? err.message : String(err));
      }
    });
  }
}
