/**
 * The gateway as a fastify plugin, for a server that carries its own routes, auth and billing
 * beside it (`kvindex gateway` is one such server):
 *
 * - `POST /v1/completions`, `POST /v1/chat/completions`: picked (gateway.ts) and relayed
 *   (proxy.ts); errors in OpenAI's shape (openai-error.ts): 400 malformed, 404 unknown model,
 *   413 body too large, 503 no engine up, 502 the engines failed;
 * - `GET /v1/models`: the union of the engines' listings; `GET /ready`: 200 once every engine's
 *   events flow or it is known down, else 503 naming them;
 * - with `registryRoutes` (default true): the standalone indexer's API (`/register` taking the
 *   engine's `url` too, `/unregister`, `/workers`, `/health`, `/query`, ...: http-api.md), the
 *   bearer token guarding the mutating ones.
 *
 * The tenant of a request is its `x-kvindex-tenant` header (default `default`). The routes live
 * in encapsulated plugins: their body parser (bytes, forwarded unchanged) and error handler do
 * not leak into the caller's server.
 */

import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { registerIndexerRoutes } from '../http/indexer-routes.js';
import { DEFAULT_TENANT, type RegisterRequest } from '../http/requests.js';
import { readEngineUrl } from './engine-catalog.js';
import type { Gateway } from './gateway.js';
import { errorAnswer, GatewayError } from './openai-error.js';
import { Endpoint, readOpenAiRequest } from './openai-request.js';
import { relay } from './proxy.js';

export interface GatewayPluginOptions {
  gateway: Gateway;
  /** Bearer token of /register, /unregister (and /route, /mark_prefill, /free); null: unguarded. */
  token?: string | null;
  /** Largest request body in bytes (default 16 MiB: a 128k-token prompt as text fits). */
  bodyLimit?: number;
  /** Serve the indexer API (/register /unregister /workers /health ...) too (default true). */
  registryRoutes?: boolean;
  /** Told each request answered with an error by the gateway's routes (for metrics). */
  onError?: (route: string, status: number) => void;
}

export const TENANT_HEADER = 'x-kvindex-tenant';

const JSON_TYPE = 'application/json; charset=utf-8';

/** Registers the gateway's routes on `app` (call before `app.listen`). */
export async function gatewayPlugin(app: FastifyInstance, options: GatewayPluginOptions): Promise<void> {
  const gw = options.gateway;
  const bodyLimit = options.bodyLimit ?? 16 * 1024 * 1024;
  const arrivals = new WeakMap<IncomingMessage, number>();
  await app.register(async (api) => {
    api.removeContentTypeParser('application/json');
    api.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (_req, body, done) => done(null, body));
    api.addHook('onRequest', async (req) => {
      arrivals.set(req.raw, performance.now());
    });
    api.setErrorHandler((err, req, reply) => {
      const a = errorAnswer(err);
      if (a.status >= 500 && a.status !== 502 && a.status !== 503) req.log.error({ err }, 'gateway route failed');
      options.onError?.(req.routeOptions.url ?? 'unmatched', a.status);
      gw.observer.finished('', null, 'rejected', performance.now() - (arrivals.get(req.raw) ?? performance.now()));
      void reply.code(a.status).type(JSON_TYPE).send(a.body);
    });

    const generate = (endpoint: Endpoint) => async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
      const arrival = arrivals.get(req.raw) ?? performance.now();
      const request = readOpenAiRequest(endpoint, req.body);
      const tenant = req.headers[TENANT_HEADER];
      const authorization = req.headers.authorization;
      const pick = await gw.pickEngine(request, typeof tenant === 'string' && tenant !== '' ? tenant : DEFAULT_TENANT, typeof authorization === 'string' ? authorization : null);
      // From here the answer is written by the relay, streamed as the engine sends it.
      reply.hijack();
      await relay(gw, request, pick, req.headers, reply.raw, arrival);
    };
    api.post(Endpoint.Completions, generate(Endpoint.Completions));
    api.post(Endpoint.Chat, generate(Endpoint.Chat));
    api.get('/v1/models', async (_req, reply) => reply.type(JSON_TYPE).send(JSON.stringify({ object: 'list', data: gw.catalog.models() })));
    api.get('/ready', async (_req, reply) => {
      const r = gw.catalog.readiness();
      return reply.code(r.ready ? 200 : 503).type(JSON_TYPE).send(JSON.stringify(r));
    });
    // Any other /v1 path or method: an OpenAI error object, as OpenAI clients parse it.
    api.all('/v1/*', async (req) => {
      throw new GatewayError(404, 'not_found', `no route ${req.method} ${req.url.slice(0, 100)}`);
    });
    if (options.registryRoutes === false) api.get('/health', async (_req, reply) => reply.type(JSON_TYPE).send('{"status":"ok"}'));
  });
  if (options.registryRoutes !== false) {
    await registerIndexerRoutes(app, gw.registry, {
      token: options.token ?? null,
      readiness: null, // the gateway's /ready above: engines' events and their /health
      register: (r: RegisterRequest, body: unknown) => gw.register({ ...r, url: readEngineUrl(body) }),
      unregister: (r) => gw.catalog.unregister(r),
      ...(options.onError === undefined ? {} : { onError: options.onError }),
    });
  }
}
