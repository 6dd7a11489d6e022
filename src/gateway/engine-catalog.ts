/**
 * The gateway's engines: the standalone indexer's registry (`EngineRegistry`: ZMQ listeners,
 * one index and one `KvRouter` per (model, tenant)) plus what a proxy needs beside it: each
 * registered (instance, model, tenant, dp rank)'s OpenAI base URL, each URL's health and model
 * listing (polled by health.ts), and whether its KV events are flowing.
 *
 * LoRA adapters are learnt from the engines' own `GET /v1/models` listings: vLLM lists each
 * loaded adapter with `parent` set to its base model. A request naming an adapter is routed
 * over its base model's index, hashed with the adapter's name (vLLM's `lora_name`), among the
 * engines that list the adapter.
 *
 * Events stopped: an engine that finished a request which should have stored new blocks
 * (the index held fewer than the prompt's blocks for it) and sent no event for `staleMs`
 * after is "stale": it is excluded from the index's scores (so routed by load only: fail-open,
 * never refused) until its next event, and counted.
 *
 * Remote mode (`remote: true`, the gateway's `--index`): the engines' events go to replicas of
 * `serve --http`, not here. An engine is then registered without a listener (`listener` null):
 * its (model, tenant) gets an empty index (for its block size and the model's existence), and
 * there is no events-stopped check (a replica excludes an engine whose events are lost).
 */

import type { Logger } from 'pino';
import type { EngineRegistry, ListenerEntry } from '../http/engine-registry.js';
import { HttpRequestError, type RegisterRequest, type UnregisterRequest } from '../http/requests.js';
import type { WorkerCandidate } from '../router/select-worker.js';
import { SourceState } from '../zmq/source.js';
import { showValue } from '../protocol/show-value.js';

/** An engine as engines.json and `POST /register` give it: the /register fields plus `url`. */
export interface EngineEntry extends RegisterRequest {
  /** The engine's OpenAI base URL, e.g. `http://127.0.0.1:8101` (no trailing slash). */
  url: string;
}

/** An engine's health, as the poller last saw it. */
export const Health = { Unknown: 'unknown', Up: 'up', Down: 'down' } as const;
export type Health = (typeof Health)[keyof typeof Health];

/** One model of an engine's `/v1/models` listing, as listed (forwarded in the union). */
export type ListedModel = Readonly<Record<string, unknown>> & { readonly id: string };

interface UrlState {
  health: Health;
  models: ListedModel[];
  /** adapter -> base model. */
  adapters: Map<string, string>;
}

/** One registered (instance, model, tenant, rank) with its URL and event watch. */
export interface CatalogEngine {
  readonly instanceId: bigint;
  readonly modelName: string;
  readonly tenantId: string;
  readonly dpRank: number;
  readonly url: string;
  /** Its ZMQ listener; null in remote mode (the replicas listen). */
  readonly listener: ListenerEntry | null;
  /** Messages seen from its listener at the last check. */
  seenMessages: number;
  /** Since when an event is owed (performance.now() ms), or null. */
  owedSince: number | null;
  /** Messages of its listener when the owing request was sent: any later one pays the debt. */
  owedMessages: number;
  stale: boolean;
}

export interface EngineCatalogOptions {
  /** No event for this long after an owed one: stale (default 10,000 ms). */
  staleMs?: number;
  logger?: Logger;
  /** Engines' events are read by index replicas, not by this registry (default false). */
  remote?: boolean;
}

const key = (instanceId: bigint, modelName: string, tenantId: string, dpRank: number): string => JSON.stringify([String(instanceId), modelName, tenantId, dpRank]);

/** Reads and checks `url` of an engine entry: an absolute http(s) URL, kept without its trailing slash. */
export function readEngineUrl(body: unknown): string {
  const v = typeof body === 'object' && body !== null ? (body as { url?: unknown }).url : undefined;
  if (typeof v !== 'string') throw new HttpRequestError('url: expected the engine\'s OpenAI base URL, e.g. "http://127.0.0.1:8101"');
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new HttpRequestError(`url: not a URL: ${showValue(v)}`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '') {
    throw new HttpRequestError(`url: expected http(s)://host:port[/path] without query or credentials, got ${showValue(v)}`);
  }
  return u.href.replace(/\/+$/, '');
}

export class EngineCatalog {
  readonly registry: EngineRegistry;
  readonly #engines = new Map<string, CatalogEngine>();
  readonly #urls = new Map<string, UrlState>();
  readonly #staleMs: number;
  readonly #logger: Logger | null;
  readonly #remote: boolean;
  /** Engines that went stale, counted (a metric). */
  staleTransitions = 0;

  constructor(registry: EngineRegistry, options: EngineCatalogOptions = {}) {
    this.registry = registry;
    this.#staleMs = options.staleMs ?? 10_000;
    this.#logger = options.logger ?? null;
    this.#remote = options.remote ?? false;
  }

  /** Registers an engine (its ZMQ listener, then its URL). Throws the registry's `HttpRequestError`s. */
  async register(e: EngineEntry): Promise<void> {
    if (this.#remote) {
      // 409 on another block size for the (model, tenant), as a registration with a listener.
      this.registry.restoreIndex(e.modelName, e.tenantId, e.blockSize, []);
      this.#engines.set(key(e.instanceId, e.modelName, e.tenantId, e.dpRank), {
        instanceId: e.instanceId, modelName: e.modelName, tenantId: e.tenantId, dpRank: e.dpRank, url: e.url, listener: null,
        seenMessages: 0, owedSince: null, owedMessages: 0, stale: false,
      });
      if (!this.#urls.has(e.url)) this.#urls.set(e.url, { health: Health.Unknown, models: [], adapters: new Map() });
      return;
    }
    await this.registry.register(e);
    const listener = this.registry.listeners().find((l) => l.instanceId === e.instanceId && l.modelName === e.modelName && l.tenantId === e.tenantId && l.dpRank === e.dpRank);
    if (listener === undefined) return; // unregistered meanwhile
    this.#engines.set(key(e.instanceId, e.modelName, e.tenantId, e.dpRank), {
      instanceId: e.instanceId, modelName: e.modelName, tenantId: e.tenantId, dpRank: e.dpRank, url: e.url, listener,
      seenMessages: listener.source.stats().messages, owedSince: null, owedMessages: 0, stale: false,
    });
    if (!this.#urls.has(e.url)) this.#urls.set(e.url, { health: Health.Unknown, models: [], adapters: new Map() });
  }

  /** Unregisters as the registry does; returns how many listeners matched. */
  async unregister(r: UnregisterRequest): Promise<number> {
    let n = 0;
    if (this.#remote) {
      for (const [k, e] of this.#engines) {
        if (e.instanceId === r.instanceId && e.modelName === r.modelName && (r.tenantId === null || e.tenantId === r.tenantId) && (r.dpRank === null || e.dpRank === r.dpRank)) {
          this.#engines.delete(k);
          n++;
        }
      }
    } else {
      n = await this.registry.unregister(r);
      const live = new Set(this.registry.listeners());
      for (const [k, e] of this.#engines) if (e.listener !== null && !live.has(e.listener)) this.#engines.delete(k);
    }
    const used = new Set([...this.#engines.values()].map((e) => e.url));
    for (const url of [...this.#urls.keys()]) if (!used.has(url)) this.#urls.delete(url);
    return n;
  }

  engines(): CatalogEngine[] {
    return [...this.#engines.values()];
  }

  engine(instanceId: bigint, modelName: string, tenantId: string, dpRank: number): CatalogEngine | undefined {
    return this.#engines.get(key(instanceId, modelName, tenantId, dpRank));
  }

  urls(): string[] {
    return [...this.#urls.keys()];
  }

  health(url: string): Health {
    return this.#urls.get(url)?.health ?? Health.Unknown;
  }

  /** Records a URL's health (and its listing, when read). A down URL gets no requests. */
  setHealth(url: string, health: Health, models: ListedModel[] | null = null): void {
    const s = this.#urls.get(url);
    if (s === undefined) return;
    if (s.health !== health && health !== Health.Unknown) this.#logger?.[health === Health.Up ? 'info' : 'warn']({ url, health }, 'engine health changed');
    s.health = health;
    if (models !== null) {
      s.models = models;
      s.adapters = new Map();
      for (const m of models) if (typeof m.parent === 'string' && m.parent !== m.id) s.adapters.set(m.id, m.parent);
    }
  }

  /**
   * The index model and LoRA name of a requested model: the model itself when an index exists
   * for it, else the base model of the adapter of that name; null when neither.
   */
  resolveModel(model: string, tenantId: string): { base: string; loraName: string | null } | null {
    if (this.registry.index(model, tenantId) !== undefined) return { base: model, loraName: null };
    for (const s of this.#urls.values()) {
      const base = s.adapters.get(model);
      if (base !== undefined && this.registry.index(base, tenantId) !== undefined) return { base, loraName: model };
    }
    return null;
  }

  /**
   * The (instance, rank)s a request of (base, tenant, adapter) may go to: registered, not
   * down, and listing the adapter when there is one. `exclude` drops one (a failed try).
   */
  candidates(base: string, tenantId: string, loraName: string | null, exclude: WorkerCandidate | null = null): WorkerCandidate[] {
    const out: WorkerCandidate[] = [];
    for (const e of this.#engines.values()) {
      if (e.modelName !== base || e.tenantId !== tenantId) continue;
      if (exclude !== null && e.instanceId === exclude.workerId && e.dpRank === exclude.dpRank) continue;
      const s = this.#urls.get(e.url);
      if (s === undefined || s.health === Health.Down) continue;
      if (loraName !== null && !s.adapters.has(loraName)) continue;
      out.push({ workerId: e.instanceId, dpRank: e.dpRank });
    }
    return out;
  }

  /** Whether the instance has more than one rank registered for the model (the engine then needs the rank named). */
  multiRank(e: CatalogEngine): boolean {
    for (const o of this.#engines.values()) if (o !== e && o.instanceId === e.instanceId && o.modelName === e.modelName && o.tenantId === e.tenantId) return true;
    return false;
  }

  /**
   * A request to `e` ended that should have stored blocks: if no message came from its
   * listener since `messagesAtDispatch`, an event is owed from now.
   */
  owe(e: CatalogEngine, messagesAtDispatch: number, now: number): void {
    if (e.listener === null) return; // remote mode: the replicas watch the events
    const messages = e.listener.source.stats().messages;
    if (messages !== messagesAtDispatch) return; // paid already
    // An older debt still unpaid keeps its time; one paid but not yet checked is replaced
    // (keeping it lost this debt when the check cleared it: found by the health test).
    if (e.owedSince !== null && e.owedMessages === messages) return;
    e.owedSince = now;
    e.owedMessages = messagesAtDispatch;
  }

  /** The staleness check (health.ts runs it at each poll). */
  checkEvents(now: number): void {
    for (const e of this.#engines.values()) {
      if (e.listener === null) continue;
      const messages = e.listener.source.stats().messages;
      // A message after the owing request's dispatch pays the debt (not one before it that the
      // last check had not seen yet).
      if (e.owedSince !== null && messages > e.owedMessages) e.owedSince = null;
      if (e.stale && messages !== e.seenMessages) {
        e.stale = false;
        const index = this.registry.index(e.modelName, e.tenantId)?.index;
        // The source excludes a rank itself while a gap is unreplayable; it re-includes it.
        if (index !== undefined && e.listener.source.stats().gapsUnreplayable === 0) index.exclude(e.instanceId, e.dpRank, false);
        this.#logger?.info({ instanceId: e.instanceId.toString(), dpRank: e.dpRank, url: e.url }, 'engine events flow again');
      } else if (!e.stale && e.owedSince !== null && now - e.owedSince > this.#staleMs) {
        e.stale = true;
        this.staleTransitions++;
        this.registry.index(e.modelName, e.tenantId)?.index.exclude(e.instanceId, e.dpRank, true);
        this.#logger?.warn({ instanceId: e.instanceId.toString(), dpRank: e.dpRank, url: e.url, staleMs: this.#staleMs }, 'engine events stopped: routed by load only');
      }
      e.seenMessages = messages;
    }
  }

  /** Ready once every engine's health is known and each is down or has its events flowing. */
  readiness(): { ready: boolean; reason: string; lag: number } {
    const waiting: string[] = [];
    for (const e of this.#engines.values()) {
      const h = this.health(e.url);
      if (h === Health.Down) continue;
      // Remote mode: health alone; the replicas' state is not readiness (a gateway whose
      // replicas are all down still routes, by load: fail-open).
      const listening = e.listener === null || e.listener.source.state === SourceState.Active;
      if (h === Health.Unknown || e.stale || !listening) waiting.push(`${e.instanceId.toString()}/${e.dpRank} (${e.url}: ${h === Health.Unknown ? 'health unknown' : e.stale ? 'events stopped' : `listener ${e.listener?.source.state}`})`);
    }
    return waiting.length === 0 ? { ready: true, reason: '', lag: 0 } : { ready: false, reason: `not ready: ${waiting.join(', ')}`, lag: 0 };
  }

  /** The union of the engines' listings by id (first listing wins), then registered models not listed. */
  models(): ListedModel[] {
    const out = new Map<string, ListedModel>();
    for (const s of this.#urls.values()) for (const m of s.models) if (!out.has(m.id)) out.set(m.id, m);
    for (const e of this.#engines.values()) {
      if (!out.has(e.modelName)) out.set(e.modelName, { id: e.modelName, object: 'model', created: 0, owned_by: 'kvindex', root: e.modelName, parent: null });
    }
    return [...out.values()];
  }
}
