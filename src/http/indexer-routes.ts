/**
 * The HTTP API of Dynamo's standalone indexer (`dynamo.indexer`), on a fastify instance given
 * by the caller, so the same server can carry other routes (metrics, readiness). The routes
 * live in an encapsulated plugin: its JSON parser (lossless: u64 ids and i64 hashes stay
 * exact), its error handler (`{"error": "..."}`, as Dynamo's) and its bearer-token check do
 * not leak into the rest of the server.
 *
 * POST /register, /unregister (mutating: the bearer token, when set, guards them),
 * GET /workers, POST /query, POST /query_by_hash, GET /dump, GET /health; and kvindex's
 * routing decisions (not Dynamo's: its routers decide in-process): POST /route, /mark_prefill,
 * /free, guarded by the token too since they change what later decisions see. docs/http-api.md
 * has the bodies with examples.
 */

import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseJsonLossless } from '../protocol/json-value.js';
import { showValue } from '../protocol/show-value.js';
import type { EngineRegistry } from './engine-registry.js';
import { formatRouteDecision } from '../router/decision-json.js';
import { KvIndexError, ErrorCode } from '../errors.js';
import type { KvRouter, RouteOptions } from '../router/kv-router.js';
import { QueryBodyReader } from './query-body.js';
import { HttpRequestError, modelTenant, type RegisterRequest, type UnregisterRequest, readQuery, readQueryByHash, readRegister, readRequestRef, readRoute, readUnregister } from './requests.js';
import { dumpJson, scoresJson, workersJson } from './responses.js';

export interface IndexerRoutesOptions {
  /** When set, POST /register and /unregister need `Authorization: Bearer <token>`. */
  token?: string | null;
  /** Largest request body in bytes (default 8 MiB, Dynamo's limit for /query). */
  bodyLimit?: number;
  /** Told each answered lookup's handling time (parse, hash, look up, serialize), ms. */
  onQuery?: (route: '/query' | '/query_by_hash', ms: number) => void;
  /**
   * Told each request answered with an error: the route (`unmatched` for no route) and the
   * status (400, 401, 404, 409, 413, 415, 503, 500, ...). Errors only: a success costs nothing.
   */
  onError?: (route: string, status: number) => void;
  /**
   * Replaces `registry.register` for POST /register, given the body too (the gateway reads an
   * engine's `url` from it). Throws `HttpRequestError` like the registry.
   */
  register?: (r: RegisterRequest, body: unknown) => Promise<void>;
  /** Replaces `registry.unregister` for POST /unregister. */
  unregister?: (r: UnregisterRequest) => Promise<number>;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** Registers the standalone indexer routes on `app` (call before `app.listen`). */
export async function registerIndexerRoutes(app: FastifyInstance, registry: EngineRegistry, options: IndexerRoutesOptions = {}): Promise<void> {
  const bodyLimit = options.bodyLimit ?? 8 * 1024 * 1024;
  const token = options.token == null || options.token === '' ? null : Buffer.from(`Bearer ${options.token}`);
  await app.register(async (api) => {
    api.removeContentTypeParser('application/json');
    // The body stays bytes; each route parses it: losslessly where it carries u64/i64 values,
    // with JSON.parse for /query, whose numbers are u32 tokens (a 1,024-token body: 9 us
    // against 44 us lossless, which makes a bigint per token).
    api.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (_req, body, done) => done(null, body));
    const onError = options.onError ?? null;
    api.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
      const status = err instanceof HttpRequestError ? err.statusCode : (err.statusCode ?? 500);
      if (status >= 500) req.log.error({ err }, 'indexer route failed');
      onError?.(req.routeOptions.url ?? 'unmatched', status);
      void reply.code(status).type(JSON_TYPE).send(JSON.stringify({ error: err.message }));
    });
    // fastify's own 404 body is {"message","error","statusCode"}: every answer here is {"error"}.
    api.setNotFoundHandler((req, reply) => {
      onError?.('unmatched', 404);
      void reply.code(404).type(JSON_TYPE).send(JSON.stringify({ error: `no route ${req.method} ${showValue(req.url)}` }));
    });

    const auth = async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
      if (token === null) return;
      const got = Buffer.from(req.headers.authorization ?? '');
      if (got.length !== token.length || !timingSafeEqual(got, token)) {
        onError?.(req.routeOptions.url ?? 'unmatched', 401);
        await reply.code(401).type(JSON_TYPE).send('{"error":"unauthorized"}');
      }
    };
    const ok = (reply: FastifyReply, status: number): FastifyReply => reply.code(status).type(JSON_TYPE).send('{"status":"ok"}');

    const register = options.register ?? ((r: RegisterRequest) => registry.register(r));
    const unregister = options.unregister ?? ((r: UnregisterRequest) => registry.unregister(r));
    api.post('/register', { onRequest: auth }, async (req, reply) => {
      const body = lossless(req.body);
      await register(readRegister(body), body);
      return ok(reply, 201);
    });

    api.post('/unregister', { onRequest: auth }, async (req, reply) => {
      const n = await unregister(readUnregister(lossless(req.body)));
      if (n === 0) throw new HttpRequestError('worker not found', 404);
      return ok(reply, 200);
    });

    api.get('/workers', async (_req, reply) => reply.type(JSON_TYPE).send(workersJson(registry.listeners())));

    const onQuery = options.onQuery ?? null;
    const queryBodies = new QueryBodyReader();
    api.post('/query', async (req, reply) => {
      const t0 = onQuery === null ? 0 : performance.now();
      // The usual body shape is read from its bytes (query-body.ts); anything else the general way.
      const q = queryBodies.read(bytes(req.body)) ?? readQuery(plain(req.body));
      const entry = registry.index(q.modelName, q.tenantId);
      if (entry === undefined) throw new HttpRequestError(`no index for ${modelTenant(q.modelName, q.tenantId)}`, 404);
      const body = scoresJson(entry.index.queryTokens(q.tokenIds, { loraName: q.loraName }), entry.index.blockSize);
      onQuery?.('/query', performance.now() - t0);
      return reply.type(JSON_TYPE).send(body);
    });

    api.post('/query_by_hash', async (req, reply) => {
      const t0 = onQuery === null ? 0 : performance.now();
      const q = readQueryByHash(lossless(req.body));
      const entry = registry.index(q.modelName, q.tenantId);
      if (entry === undefined) throw new HttpRequestError(`no index for ${modelTenant(q.modelName, q.tenantId)}`, 404);
      const body = scoresJson(entry.index.query(q.blockHashes), entry.index.blockSize);
      onQuery?.('/query_by_hash', performance.now() - t0);
      return reply.type(JSON_TYPE).send(body);
    });

    api.post('/route', { onRequest: auth }, async (req, reply) => {
      const r = readRoute(plain(req.body));
      const router = registry.router(r.modelName, r.tenantId);
      if (router === undefined) throw new HttpRequestError(`no index for ${modelTenant(r.modelName, r.tenantId)}`, 404);
      const candidates = registry.candidates(r.modelName, r.tenantId);
      if (candidates.length === 0) throw new HttpRequestError(`no worker registered for ${modelTenant(r.modelName, r.tenantId)}`, 503);
      const options: RouteOptions = { candidates, loraName: r.loraName, overrides: r.overrides };
      if (r.requestId !== null) options.requestId = r.requestId;
      if (r.expectedOutputTokens !== null) options.expectedOutputTokens = r.expectedOutputTokens;
      try {
        return reply.type(JSON_TYPE).send(formatRouteDecision(router.route(r.tokenIds, options)));
      } catch (err) {
        // The router's typed errors are the request's fault: a repeated id conflicts (409).
        if (!(err instanceof KvIndexError)) throw err;
        throw new HttpRequestError(err.message, err.code === ErrorCode.DuplicateRequest ? 409 : 400);
      }
    });

    const acts: Array<[string, (router: KvRouter, id: string) => boolean]> = [
      ['/mark_prefill', (router, id) => router.markPrefillCompleted(id)],
      ['/free', (router, id) => router.free(id)],
    ];
    for (const [path, act] of acts) {
      api.post(path, { onRequest: auth }, async (req, reply) => {
        const r = readRequestRef(plain(req.body));
        const router = registry.router(r.modelName, r.tenantId);
        if (router === undefined) throw new HttpRequestError(`no index for ${modelTenant(r.modelName, r.tenantId)}`, 404);
        return reply.type(JSON_TYPE).send(`{"ok":${act(router, r.requestId)}}`);
      });
    }

    api.get('/dump', async (_req, reply) => reply.type(JSON_TYPE).send(dumpJson(registry.indexes())));

    api.get('/health', async (_req, reply) => reply.type(JSON_TYPE).send('{"status":"ok"}'));
  });
}

function bytes(body: unknown): Buffer {
  if (!Buffer.isBuffer(body)) throw new HttpRequestError('expected a JSON body (content-type: application/json)');
  return body;
}

/** Integers as bigint, exact (`parseJsonLossless`). */
function lossless(body: unknown): unknown {
  try {
    return parseJsonLossless(bytes(body));
  } catch (err) {
    if (err instanceof HttpRequestError) throw err;
    throw new HttpRequestError(`body is not JSON: ${(err as Error).message}`);
  }
}

/** `JSON.parse`, for bodies without 64-bit numbers; integers come back as numbers. */
function plain(body: unknown): unknown {
  try {
    return JSON.parse(bytes(body).toString('utf8')) as unknown;
  } catch (err) {
    if (err instanceof HttpRequestError) throw err;
    throw new HttpRequestError(`body is not JSON: ${(err as Error).message}`);
  }
}
