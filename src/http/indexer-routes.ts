/**
 * The HTTP API of Dynamo's standalone indexer (`dynamo.indexer`), on a fastify instance given
 * by the caller, so the same server can carry other routes (metrics, readiness). The routes
 * live in an encapsulated plugin: its JSON parser (lossless: u64 ids and i64 hashes stay
 * exact), its error handler (`{"error": "...", "code": "KVX_..."}`: Dynamo's key and a stable
 * code, error-answers.ts) and its bearer-token check do not leak into the rest of the server.
 *
 * POST /register, /unregister (mutating: the bearer token, when set, guards them),
 * GET /workers, POST /query, POST /query_by_hash, GET /dump, GET /health; kvindex's GET /ready
 * (engine-readiness.ts: 503 or 200 naming the ranks that are not active); and kvindex's
 * routing decisions (not Dynamo's: its routers decide in-process): POST /route, /mark_prefill,
 * /free, guarded by the token too since they change what later decisions see
 * (`TOKEN_ROUTES`, which the CLI's help prints); with `peers`, Dynamo's POST /register_peer,
 * /deregister_peer (guarded) and GET /peers (peer-routes.ts). docs/http-api.md has the bodies with examples.
 */

import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseJsonLossless } from '../protocol/json-value.js';
import type { EngineRegistry } from './engine-registry.js';
import { engineReadiness, type EngineReadiness } from './engine-readiness.js';
import { formatRouteDecision } from '../router/decision-json.js';
import { KvIndexError, ErrorCode } from '../errors.js';
import type { KvRouter, RouteOptions } from '../router/kv-router.js';
import { QueryBodyReader } from './query-body.js';
import { HttpRequestError, modelTenant, type RegisterRequest, type UnregisterRequest, readQuery, readQueryByHash, readRegister, readRequestRef, readRoute, readUnregister } from './requests.js';
import { dumpJson, scoresJson, workersJson } from './responses.js';
import { DUMP_BINARY_TYPE, dumpBinaryStream } from './dump-binary.js';
import { answerErrors, answerNoRoute, JSON_TYPE, sendError } from './error-answers.js';
import type { PeerList } from './peer-list.js';
import { registerPeerRoutes } from './peer-routes.js';

/**
 * Pairs above which Dynamo's JSON `/dump` is refused (507 `KVX_DUMP_TOO_LARGE`): the dump is one
 * string of ~65 bytes a pair (68.3 MB at 1,048,576 pairs) and V8 caps a string at ~512 MB (2^29
 * UTF-16 units in Node 20), so ~8M pairs is the ceiling; 7M leaves room for long names and ids.
 */
export const JSON_DUMP_MAX_PAIRS = 7_000_000;
import { FORWARDED_HEADER } from './peer-forward.js';

/** The routes the bearer token guards, when one is set: every route that changes state. */
export const TOKEN_ROUTES: readonly string[] = ['/register', '/unregister', '/route', '/mark_prefill', '/free', '/register_peer', '/deregister_peer'];

export interface IndexerRoutesOptions {
  /** When set, the `TOKEN_ROUTES` need `Authorization: Bearer <token>`. */
  token?: string | null;
  /** Largest body of /query, /query_by_hash and /route, bytes (default 8 MiB, Dynamo's limit for /query). */
  bodyLimit?: number;
  /** Told each answered lookup's handling time (parse, hash, look up, serialize), ms. */
  onQuery?: (route: '/query' | '/query_by_hash', ms: number) => void;
  /**
   * Told each request answered with an error: the route (`unmatched` for no route) and the
   * status (400, 401, 404, 409, 413, 415, 503, 500, ...). Errors only: a success costs nothing.
   */
  onError?: (route: string, status: number) => void;
  /**
   * The body of GET /ready (default: `engineReadiness(registry)`, the default policy); null
   * serves no /ready here, for a caller that serves its own (the gateway's also asks its engines).
   */
  readiness?: (() => EngineReadiness) | null;
  /**
   * Replaces `registry.register` for POST /register, given the body too (the gateway reads an
   * engine's `url` from it). Throws `HttpRequestError` like the registry.
   */
  register?: (r: RegisterRequest, body: unknown) => Promise<void>;
  /** Replaces `registry.unregister` for POST /unregister. */
  unregister?: (r: UnregisterRequest) => Promise<number>;
  /** The replica's peers: serves Dynamo's /register_peer, /deregister_peer and /peers (peer-routes.ts). */
  peers?: PeerList | null;
  /**
   * Asked before each lookup, route and dump: an error to answer instead (503 `KVX_RECOVERING`
   * while the replica recovers from a peer), or null. Default: always open.
   */
  gate?: () => HttpRequestError | null;
  /**
   * Told each /register and /unregister this replica answered with a success, with the body's
   * bytes, unless the request came forwarded from a peer (`FORWARDED_HEADER`): peer-forward.ts
   * sends it on to the peers.
   */
  forward?: (path: '/register' | '/unregister', body: Buffer) => void;
  /** @internal Pairs above which the JSON /dump answers 507 (default `JSON_DUMP_MAX_PAIRS`; tests lower it). */
  jsonDumpMaxPairs?: number;
  /** Told each peer added or removed over HTTP (a log line). */
  onPeerChange?: (change: 'added' | 'removed', url: string) => void;
}

/**
 * Largest body of the routes that carry no token list (/register, /unregister, /mark_prefill,
 * /free), bytes. Their bodies are a few names and ids (a /register is ~200 bytes; its strings
 * are at most 1,024 characters each: requests.ts), so 64 KiB is ample, and a client cannot make
 * the server buffer and parse 8 MiB to be told a field is wrong.
 */
export const SMALL_BODY_LIMIT = 64 * 1024;

/** Registers the standalone indexer routes on `app` (call before `app.listen`). */
export async function registerIndexerRoutes(app: FastifyInstance, registry: EngineRegistry, options: IndexerRoutesOptions = {}): Promise<void> {
  const bodyLimit = options.bodyLimit ?? 8 * 1024 * 1024;
  const token = options.token == null || options.token === '' ? null : Buffer.from(`Bearer ${options.token}`);
  await app.register(async (api) => {
    // JSON only: fastify's text/plain parser handed a string to the routes, which answered 400
    // "expected a JSON body"; a body of another type or of none is now 415 before it is read.
    api.removeAllContentTypeParsers();
    // The body stays bytes; each route parses it: losslessly where it carries u64/i64 values,
    // with JSON.parse for /query, whose numbers are u32 tokens (a 1,024-token body: 9 us
    // against 44 us lossless, which makes a bigint per token).
    api.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    const onError = options.onError ?? null;
    // Every error, fastify's included, is {"error","code"} (error-answers.ts).
    answerErrors(api, onError);
    answerNoRoute(api, onError);

    const auth = async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
      if (token === null) return;
      const got = Buffer.from(req.headers.authorization ?? '');
      if (got.length !== token.length || !timingSafeEqual(got, token)) {
        onError?.(req.routeOptions.url ?? 'unmatched', 401);
        await sendError(reply, 401, ErrorCode.HttpUnauthorized, 'unauthorized');
      }
    };
    // Every route takes its options from here, so the guarded set is `TOKEN_ROUTES` exactly.
    const guard = (path: string): { onRequest?: typeof auth } => (TOKEN_ROUTES.includes(path) ? { onRequest: auth } : {});
    const ok = (reply: FastifyReply, status: number): FastifyReply => reply.code(status).type(JSON_TYPE).send('{"status":"ok"}');

    // Each route states its limit (a 413 names it: error-answers.ts).
    const small = { bodyLimit: Math.min(SMALL_BODY_LIMIT, bodyLimit) };
    const register = options.register ?? ((r: RegisterRequest) => registry.register(r));
    const unregister = options.unregister ?? ((r: UnregisterRequest) => registry.unregister(r));
    const forward = options.forward ?? null;
    const forwardOnce = (req: FastifyRequest, path: '/register' | '/unregister'): void => {
      if (forward !== null && req.headers[FORWARDED_HEADER] === undefined) forward(path, bytes(req.body));
    };
    api.post('/register', { ...guard('/register'), ...small }, async (req, reply) => {
      const body = lossless(req.body);
      await register(readRegister(body), body);
      forwardOnce(req, '/register');
      return ok(reply, 201);
    });

    api.post('/unregister', { ...guard('/unregister'), ...small }, async (req, reply) => {
      const n = await unregister(readUnregister(lossless(req.body)));
      // Forwarded even when nothing matched here: a peer may hold what this replica does not.
      forwardOnce(req, '/unregister');
      if (n === 0) throw new HttpRequestError('worker not found', 404);
      return ok(reply, 200);
    });

    api.get('/workers', guard('/workers'), async (_req, reply) => reply.type(JSON_TYPE).send(workersJson(registry.listeners())));

    const gate = options.gate ?? null;
    // A preHandler, so a closed gate answers before the body is parsed or anything looked up.
    const gated = gate === null ? {} : {
      preHandler: async (): Promise<void> => {
        const closed = gate();
        if (closed !== null) throw closed;
      },
    };
    const onQuery = options.onQuery ?? null;
    const queryBodies = new QueryBodyReader();
    api.post('/query', { ...guard('/query'), ...gated, bodyLimit }, async (req, reply) => {
      const t0 = onQuery === null ? 0 : performance.now();
      // The usual body shape is read from its bytes (query-body.ts); anything else the general way.
      const q = queryBodies.read(bytes(req.body)) ?? readQuery(plain(req.body));
      const entry = registry.index(q.modelName, q.tenantId);
      if (entry === undefined) throw new HttpRequestError(`no index for ${modelTenant(q.modelName, q.tenantId)}`, 404);
      const body = scoresJson(entry.index.queryTokens(q.tokenIds, { loraName: q.loraName }), entry.index.blockSize);
      onQuery?.('/query', performance.now() - t0);
      return reply.type(JSON_TYPE).send(body);
    });

    api.post('/query_by_hash', { ...guard('/query_by_hash'), ...gated, bodyLimit }, async (req, reply) => {
      const t0 = onQuery === null ? 0 : performance.now();
      const q = readQueryByHash(lossless(req.body));
      const entry = registry.index(q.modelName, q.tenantId);
      if (entry === undefined) throw new HttpRequestError(`no index for ${modelTenant(q.modelName, q.tenantId)}`, 404);
      const body = scoresJson(entry.index.query(q.blockHashes), entry.index.blockSize);
      onQuery?.('/query_by_hash', performance.now() - t0);
      return reply.type(JSON_TYPE).send(body);
    });

    api.post('/route', { ...guard('/route'), ...gated, bodyLimit }, async (req, reply) => {
      const r = readRoute(plain(req.body));
      const router = registry.router(r.modelName, r.tenantId);
      if (router === undefined) throw new HttpRequestError(`no index for ${modelTenant(r.modelName, r.tenantId)}`, 404);
      const candidates = registry.candidates(r.modelName, r.tenantId);
      if (candidates.length === 0) throw new HttpRequestError(`no worker registered for ${modelTenant(r.modelName, r.tenantId)}`, 503, ErrorCode.NoWorkers);
      const options: RouteOptions = { candidates, loraName: r.loraName, overrides: r.overrides };
      if (r.requestId !== null) options.requestId = r.requestId;
      if (r.expectedOutputTokens !== null) options.expectedOutputTokens = r.expectedOutputTokens;
      try {
        return reply.type(JSON_TYPE).send(formatRouteDecision(router.route(r.tokenIds, options)));
      } catch (err) {
        // The router's typed errors are the request's fault: a repeated id conflicts (409).
        if (!(err instanceof KvIndexError)) throw err;
        throw new HttpRequestError(err.message, err.code === ErrorCode.DuplicateRequest ? 409 : 400, err.code);
      }
    });

    const acts: Array<[string, (router: KvRouter, id: string) => boolean]> = [
      ['/mark_prefill', (router, id) => router.markPrefillCompleted(id)],
      ['/free', (router, id) => router.free(id)],
    ];
    for (const [path, act] of acts) {
      api.post(path, { ...guard(path), ...small }, async (req, reply) => {
        const r = readRequestRef(plain(req.body));
        const router = registry.router(r.modelName, r.tenantId);
        if (router === undefined) throw new HttpRequestError(`no index for ${modelTenant(r.modelName, r.tenantId)}`, 404);
        return reply.type(JSON_TYPE).send(`{"ok":${act(router, r.requestId)}}`);
      });
    }

    if (options.peers != null) registerPeerRoutes(api, options.peers, (path) => ({ ...guard(path), ...small }), options.onPeerChange);

    // Content negotiation: Dynamo's JSON unless the client asks for kvindex's binary dump (a
    // replica recovering from this one: peer-recovery.ts, dump-binary.ts).
    api.get('/dump', { ...guard('/dump'), ...gated }, async (req, reply) => {
      if (req.headers.accept?.includes(DUMP_BINARY_TYPE) === true) {
        const { stream, length } = dumpBinaryStream(registry.indexes(), registry.listeners());
        return reply.type(DUMP_BINARY_TYPE).header('content-length', length).header('vary', 'accept').send(stream);
      }
      // Refused before anything is built: at 16.8M pairs building the JSON (an event object per
      // block, then one string) took the replica down ("fetch failed" on its peer, bench `peers`).
      const indexes = registry.indexes();
      const pairs = indexes.reduce((n, e) => n + e.index.deviceRanks().reduce((m, r) => m + e.index.blockCountOfRank(r), 0), 0);
      const most = options.jsonDumpMaxPairs ?? JSON_DUMP_MAX_PAIRS;
      if (pairs > most) throw new HttpRequestError(`the JSON dump of ${pairs} pairs would exceed the largest string this process can build (about ${most} pairs at ~65 bytes each); ask for the binary dump (Accept: ${DUMP_BINARY_TYPE})`, 507, ErrorCode.DumpTooLarge);
      return reply.type(JSON_TYPE).send(dumpJson(indexes, registry.listeners()));
    });

    api.get('/health', guard('/health'), async (_req, reply) => reply.type(JSON_TYPE).send('{"status":"ok"}'));

    const readiness = options.readiness === undefined ? () => engineReadiness(registry) : options.readiness;
    if (readiness !== null) {
      api.get('/ready', async (_req, reply) => {
        const r = readiness();
        return reply.code(r.ready ? 200 : 503).type(JSON_TYPE).send(JSON.stringify(r));
      });
    }
  });
}

function bytes(body: unknown): Buffer {
  if (!Buffer.isBuffer(body)) throw new HttpRequestError('expected a JSON body (content-type: application/json)', 415);
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
