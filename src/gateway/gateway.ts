/**
 * The gateway's decision, framework-free: `pickEngine(request)` turns an OpenAI request into
 * tokens (token ids as given; text and chat through an engine's /tokenize) and asks the
 * `KvRouter` of the request's model for an engine among the healthy ones serving it. The
 * returned `EnginePick` is recorded as in flight on that engine: call `markPrefill(pick)` at
 * its first token and `free(pick)` at its end, whatever the end (proxy.ts does both). A user
 * with their own HTTP stack calls these three; the fastify plugin (plugin.ts) calls them too.
 *
 * Owns the engine registry (ZMQ listeners, indexes, routers), the catalog (URLs, health,
 * adapters, event watch), the health poller and the undici dispatcher used for every
 * upstream call.
 *
 * With `remoteIndex` (`kvindex gateway --index`), the overlaps come from replicas of
 * `serve --http` within a deadline instead (remote-routing.ts): no ZMQ listener is started, and
 * a lookup that fails open routes by load alone. With `indexRegistrar` too, every engine the
 * gateway registers (its engines file, its `POST /register`) is registered on the replicas in the
 * background (remote-register.ts); routing never waits for it.
 */

import type { Logger } from 'pino';
import { Agent, type Dispatcher } from 'undici';
import { ErrorCode, KvIndexError } from '../errors.js';
import { EngineRegistry, type EngineRegistryOptions } from '../http/engine-registry.js';
import { DEFAULT_TENANT } from '../http/requests.js';
import type { RouteDecision } from '../router/kv-router.js';
import type { WorkerCandidate } from '../router/select-worker.js';
import { EngineCatalog, type EngineEntry } from './engine-catalog.js';
import { tokenizeOnEngine, TokenizeError } from './engine-tokenizer.js';
import { HealthPoller } from './health.js';
import { GatewayError } from './openai-error.js';
import type { OpenAiRequest } from './openai-request.js';
import type { EnginePick } from './engine-pick.js';
import { NOOP_OBSERVER, type GatewayObserver } from './observer.js';
import type { LocalTokenizer } from './local-tokenizer.js';
import { ROUTING_PRESETS } from '../router/presets.js';
import type { RemoteIndexClient } from './remote-index.js';
import { RemoteRouting, type RemoteScores } from './remote-routing.js';
import type { ReplicaRegistrar } from './remote-register.js';

export interface GatewayOptions {
  logger?: Logger;
  /**
   * Router settings (default `ROUTING_PRESETS.kv`, kvindex's cost tuned for time to first token;
   * `ROUTING_PRESETS.dynamo` is Dynamo's).
   */
  routing?: EngineRegistryOptions['routing'];
  /** ZMQ topic prefix of every listener (default ''). */
  topic?: string;
  /** Health poll interval, ms (default 1,000). */
  healthIntervalMs?: number;
  /** One health poll longer than this marks the engine down, ms (default: the interval, at least 2,000). */
  healthTimeoutMs?: number;
  /** No KV event this long after one was owed: the engine is routed by load only (default 10,000 ms). */
  staleMs?: number;
  /** Connect timeout of upstream calls, ms (default 2,000). */
  connectTimeoutMs?: number;
  /** Timeout of a /tokenize call, ms (default 10,000). */
  tokenizeTimeoutMs?: number;
  /** Receives the measurements (metrics.ts implements it). */
  observer?: GatewayObserver;
  /** Tokenize text and chat here instead of on an engine (local-tokenizer.ts). */
  tokenizer?: LocalTokenizer | null;
  /**
   * Ask these index replicas for the overlaps (with their deadline) instead of listening to the
   * engines' KV events (default: none, listen). The gateway closes it in `close()`.
   */
  remoteIndex?: RemoteIndexClient | null;
  /**
   * Registers the gateway's engines on the index replicas (with `remoteIndex`; default none:
   * the engines register there themselves). The gateway closes it in `close()`.
   */
  indexRegistrar?: ReplicaRegistrar | null;
}

export class Gateway {
  readonly registry: EngineRegistry;
  readonly catalog: EngineCatalog;
  readonly health: HealthPoller;
  readonly dispatcher: Dispatcher;
  readonly observer: GatewayObserver;
  readonly logger: Logger | null;
  /** The remote lookups (`remoteIndex`), or null. */
  readonly remote: RemoteRouting | null;
  /** Each remote pick's lookup, for its repick. */
  readonly #lookups = new WeakMap<EnginePick, RemoteScores>();
  readonly #tokenizeTimeoutMs: number;
  readonly #local: LocalTokenizer | null;
  readonly #registrar: ReplicaRegistrar | null;
  /** Prompts the local tokenizer could not map, sent to an engine's /tokenize instead. */
  localTokenizerMisses = 0;
  #nextId = 0;
  /** Round robin over candidates for /tokenize. */
  #tokenizeTurn = 0;

  constructor(options: GatewayOptions = {}) {
    this.logger = options.logger ?? null;
    this.remote = options.remoteIndex == null ? null : new RemoteRouting(options.remoteIndex);
    this.registry = new EngineRegistry({
      ...(this.remote === null ? {} : { routerIndex: this.remote.index }),
      ...(options.logger === undefined ? {} : { logger: options.logger }),
      ...(options.topic === undefined ? {} : { topic: options.topic }),
      routing: options.routing ?? ROUTING_PRESETS.kv,
    });
    this.catalog = new EngineCatalog(this.registry, {
      ...(options.staleMs === undefined ? {} : { staleMs: options.staleMs }),
      ...(options.logger === undefined ? {} : { logger: options.logger }),
      remote: this.remote !== null,
    });
    // keep-alive connections to each engine; a connect that hangs is a failure before the first byte.
    this.dispatcher = new Agent({ keepAliveTimeout: 30_000, connect: { timeout: options.connectTimeoutMs ?? 2_000 } });
    this.health = new HealthPoller(this.catalog, this.dispatcher, {
      ...(options.healthIntervalMs === undefined ? {} : { intervalMs: options.healthIntervalMs }),
      ...(options.healthTimeoutMs === undefined ? {} : { timeoutMs: options.healthTimeoutMs }),
    });
    this.observer = options.observer ?? NOOP_OBSERVER;
    this.#tokenizeTimeoutMs = options.tokenizeTimeoutMs ?? 10_000;
    this.#local = options.tokenizer ?? null;
    this.#registrar = options.indexRegistrar ?? null;
  }

  /** Registers engines (engines.json) and polls their health once; then polls every interval. */
  async start(engines: readonly EngineEntry[] = []): Promise<void> {
    for (const e of engines) {
      await this.catalog.register(e);
      this.#registrar?.register(e);
    }
    await this.health.poll();
    this.health.start();
  }

  /** Registers an engine at run time (`POST /register`) and checks its health before answering. */
  async register(engine: EngineEntry): Promise<void> {
    await this.catalog.register(engine);
    this.#registrar?.register(engine);
    await this.health.poll();
  }

  /**
   * Picks the engine for a request. Throws `GatewayError`: 404 `model_not_found` (no engine
   * serves the model or adapter), 503 `no_engine` (none is up), 502 `upstream_failed` (every
   * tokenizing engine failed), 400 `invalid_request` (a prompt the router refuses).
   */
  async pickEngine(request: OpenAiRequest, tenantId: string = DEFAULT_TENANT, authorization: string | null = null): Promise<EnginePick> {
    const t0 = performance.now();
    const resolved = this.catalog.resolveModel(request.model, tenantId);
    if (resolved === null) throw new GatewayError(404, 'model_not_found', `The model ${JSON.stringify(request.model.slice(0, 100))} does not exist`, 'model');
    const candidates = this.catalog.candidates(resolved.base, tenantId, resolved.loraName);
    if (candidates.length === 0) throw new GatewayError(503, 'no_engine', `no engine serving ${JSON.stringify(request.model.slice(0, 100))} is up`);
    let tokens: Uint32Array;
    if (request.prompt.kind === 'tokens') tokens = request.prompt.tokens;
    else tokens = await this.#tokenize(request, resolved.base, tenantId, candidates, authorization);
    const t1 = performance.now();
    let remote: RemoteScores | null = null;
    if (this.remote !== null) {
      const blockSize = this.registry.index(resolved.base, tenantId)?.index.blockSize;
      if (blockSize !== undefined) remote = await this.remote.lookup(resolved.base, tenantId, resolved.loraName, blockSize, tokens);
    }
    const pick = this.#route(request, tokens, resolved.base, resolved.loraName, tenantId, candidates, `gw-${this.#nextId++}`, t1 - t0, t1, remote);
    this.observer.routed(request.model, pick);
    return pick;
  }

  /**
   * The next-best engine after `failed` failed before its first byte: frees `failed` and
   * decides again without it. Throws like `pickEngine`.
   */
  repick(request: OpenAiRequest, failed: EnginePick): EnginePick {
    this.free(failed);
    const exclude: WorkerCandidate = { workerId: failed.engine.instanceId, dpRank: failed.engine.dpRank };
    const candidates = this.catalog.candidates(failed.baseModel, failed.tenantId, failed.loraName, exclude);
    if (candidates.length === 0) throw new GatewayError(502, 'upstream_failed', 'the engine failed and no other engine serving the model is up');
    const t0 = performance.now();
    return this.#route(request, failed.tokens, failed.baseModel, failed.loraName, failed.tenantId, candidates, `gw-${this.#nextId++}`, failed.tokenizeMs, t0, this.#lookups.get(failed) ?? null);
  }

  #route(request: OpenAiRequest, tokens: Uint32Array, base: string, loraName: string | null, tenantId: string, candidates: WorkerCandidate[], requestId: string, tokenizeMs: number, t0: number, remote: RemoteScores | null = null): EnginePick {
    const router = this.registry.router(base, tenantId);
    if (router === undefined) throw new GatewayError(404, 'model_not_found', `The model ${JSON.stringify(request.model.slice(0, 100))} does not exist`, 'model');
    let decision: RouteDecision;
    try {
      const options = { candidates, requestId, loraName, expectedOutputTokens: request.maxTokens };
      if (remote === null) decision = router.route(tokens, options);
      else {
        // The scores go to the router's index right before the synchronous decision reads them.
        this.remote!.prime(remote);
        decision = router.routeBlocks(remote.local, tokens.length, options);
      }
    } catch (err) {
      if (err instanceof KvIndexError && err.code !== ErrorCode.NoWorkers) throw new GatewayError(400, 'invalid_request', err.message);
      throw err;
    }
    const engine = this.catalog.engine(decision.workerId, base, tenantId, decision.dpRank);
    if (engine === undefined) {
      router.free(requestId);
      throw new GatewayError(503, 'no_engine', 'the chosen engine left while deciding');
    }
    const pick: EnginePick = { requestId, engine, decision, baseModel: base, loraName, tenantId, tokens, tokenizeMs, routeMs: performance.now() - t0, freed: false, ...(remote === null ? {} : { indexFailOpen: !remote.lookup.ok }) };
    if (remote !== null) this.#lookups.set(pick, remote);
    return pick;
  }

  async #tokenize(request: OpenAiRequest, base: string, tenantId: string, candidates: WorkerCandidate[], authorization: string | null): Promise<Uint32Array> {
    const prompt = request.prompt;
    if (prompt.kind === 'tokens') return prompt.tokens;
    if (this.#local !== null) {
      try {
        return this.#local.tokens(prompt);
      } catch (err) {
        this.localTokenizerMisses++;
        this.logger?.debug({ err: (err as Error).message }, 'local tokenizer failed: asking an engine');
      }
    }
    // Two engines at most: a refused or failed one is passed over once.
    let last: unknown = null;
    for (let i = 0; i < Math.min(2, candidates.length); i++) {
      const c = candidates[(this.#tokenizeTurn++ + i) % candidates.length]!;
      const engine = this.catalog.engine(c.workerId, base, tenantId, c.dpRank);
      if (engine === undefined) continue;
      try {
        return await tokenizeOnEngine(this.dispatcher, engine.url, request.model, prompt, this.#tokenizeTimeoutMs, authorization);
      } catch (err) {
        last = err;
        if (err instanceof TokenizeError && err.refused) this.catalog.setHealth(engine.url, 'down');
        this.logger?.warn({ url: engine.url, err: (err as Error).message }, 'tokenize failed');
      }
    }
    throw new GatewayError(502, 'upstream_failed', `could not tokenize the prompt: ${last === null ? 'no engine' : (last as Error).message}`);
  }

  /** The pick's first token arrived (or its whole answer). */
  markPrefill(pick: EnginePick): void {
    this.registry.router(pick.baseModel, pick.tenantId)?.markPrefillCompleted(pick.requestId);
  }

  /** The pick's request ended (answered, failed or abandoned). Safe to call twice. */
  free(pick: EnginePick): void {
    if (pick.freed) return;
    pick.freed = true;
    this.registry.router(pick.baseModel, pick.tenantId)?.free(pick.requestId);
  }

  async close(): Promise<void> {
    await this.health.stop();
    await this.#registrar?.close();
    await this.registry.close();
    await this.remote?.client.close();
    await this.dispatcher.close();
  }
}
