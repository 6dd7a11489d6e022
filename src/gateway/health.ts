/**
 * The engine health poller: every `intervalMs`, `GET <url>/health` and `GET <url>/v1/models` of
 * each engine URL, each bounded by `timeoutMs` (default: the interval, at least 2 s). A 200 from /health is up; anything else (a
 * refused connection, a timeout, a 5xx) is down, and a down engine gets no requests until it
 * answers again. The listing gives the union of `/v1/models` and the LoRA adapters
 * (engine-catalog.ts). Each round also runs the catalog's events-stopped check. The proxy marks
 * an engine down at once when a connection to it is refused, without waiting for a round.
 */

import { request, type Dispatcher } from 'undici';
import { Health, type EngineCatalog, type ListedModel } from './engine-catalog.js';

export interface HealthPollerOptions {
  /** Between rounds, ms (default 1,000). */
  intervalMs?: number;
  /**
   * How long one poll may take before the engine counts as down, ms (default: the interval, at
   * least 2,000). A longer one suits hosts whose engines (or the gateway itself) can stall for
   * seconds without being down: a starved test process, a GC-heavy engine.
   */
  timeoutMs?: number;
}

async function getJson(dispatcher: Dispatcher, url: string, timeoutMs: number): Promise<{ status: number; body: unknown }> {
  const res = await request(url, { dispatcher, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.body.text();
  let body: unknown = null;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    body = null;
  }
  return { status: res.statusCode, body };
}

function listing(body: unknown): ListedModel[] | null {
  const data = typeof body === 'object' && body !== null ? (body as { data?: unknown }).data : undefined;
  if (!Array.isArray(data)) return null;
  const out: ListedModel[] = [];
  for (const m of data) if (typeof m === 'object' && m !== null && typeof (m as { id?: unknown }).id === 'string') out.push(m as ListedModel);
  return out;
}

export class HealthPoller {
  readonly #catalog: EngineCatalog;
  readonly #dispatcher: Dispatcher;
  readonly #intervalMs: number;
  readonly #timeoutMs: number;
  #timer: NodeJS.Timeout | null = null;
  #round: Promise<void> = Promise.resolve();
  #busy = false;
  /** Rounds completed. */
  rounds = 0;

  constructor(catalog: EngineCatalog, dispatcher: Dispatcher, options: HealthPollerOptions = {}) {
    this.#catalog = catalog;
    this.#dispatcher = dispatcher;
    this.#intervalMs = options.intervalMs ?? 1_000;
    // At least 2 s by default: a busy engine (or host) answering a short interval's poll late is not down.
    this.#timeoutMs = options.timeoutMs ?? Math.max(this.#intervalMs, 2_000);
  }

  /** Polls every URL once now; resolves when every answer (or timeout) is in. */
  poll(): Promise<void> {
    this.#round = this.#round.then(() => this.#pollAll());
    return this.#round;
  }

  /** Starts polling every interval (the first round at once). */
  start(): void {
    if (this.#timer !== null) return;
    void this.poll();
    // A round still waiting on a slow engine is not queued behind: the tick is skipped.
    this.#timer = setInterval(() => {
      if (!this.#busy) void this.poll();
    }, this.#intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    await this.#round;
  }

  async #pollAll(): Promise<void> {
    this.#busy = true;
    try {
      await Promise.all(this.#catalog.urls().map((url) => this.#pollOne(url)));
      this.#catalog.checkEvents(performance.now());
      this.rounds++;
    } finally {
      this.#busy = false;
    }
  }

  async #pollOne(url: string): Promise<void> {
    const timeout = this.#timeoutMs;
    try {
      const h = await getJson(this.#dispatcher, `${url}/health`, timeout);
      if (h.status !== 200) return this.#catalog.setHealth(url, Health.Down);
      let models: ListedModel[] | null = null;
      try {
        const m = await getJson(this.#dispatcher, `${url}/v1/models`, timeout);
        if (m.status === 200) models = listing(m.body);
      } catch {
        // Healthy without a listing: keep the last one.
      }
      this.#catalog.setHealth(url, Health.Up, models);
    } catch {
      this.#catalog.setHealth(url, Health.Down);
    }
  }
}
