/**
 * The Prometheus metrics of `kvindex gateway --metrics` (prom-client), measured at the gateway:
 *
 * - `kvindex_gateway_requests_total{model,engine,outcome}`: every generation request, by the
 *   model asked for (`none` when refused before routing), the engine's instance id (`none`) and
 *   its outcome (ok, client_closed, failed, failed_mid_stream, rejected);
 * - `kvindex_gateway_ttft_seconds{engine}`: arrival to the answer's first byte;
 *   `kvindex_gateway_request_seconds{engine}`: arrival to the end;
 * - `kvindex_gateway_overhead_ms{stage}`: `tokenize` (an engine's /tokenize), `route` (the
 *   decision), `to_upstream` (arrival to the upstream request sent, tokenization excluded);
 * - `kvindex_gateway_matched_blocks`: the chosen engine's overlap per request, in blocks;
 * - `kvindex_gateway_retries_total{engine}`: tries that failed before their first byte;
 * - `kvindex_gateway_engine_up{url}` (1 up, 0 down, -1 unknown),
 *   `kvindex_gateway_events_stale{instance_id,dp_rank}` and
 *   `kvindex_gateway_events_stale_total`: engines routed by load only (events stopped);
 * - and the standalone indexer's (zmq-metrics.ts): ZMQ listeners, indexes, routers, errors,
 *   process.
 */

import { Counter, Gauge, Histogram, Registry, exponentialBuckets } from 'prom-client';
import { ZmqServeMetrics } from '../serve/zmq-metrics.js';
import { Health } from './engine-catalog.js';
import type { EnginePick } from './engine-pick.js';
import type { Gateway } from './gateway.js';
import type { GatewayObserver, Outcome } from './observer.js';

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export class GatewayMetrics implements GatewayObserver {
  readonly registry = new Registry();
  #zmq: ZmqServeMetrics | null = null;
  #merged: Registry | null = null;
  readonly #requests: Counter<'model' | 'engine' | 'outcome'>;
  readonly #ttft: Histogram<'engine'>;
  readonly #total: Histogram<'engine'>;
  readonly #overhead: Histogram<'stage'>;
  readonly #matched: Histogram;
  readonly #retries: Counter<'engine'>;

  constructor() {
    const registers = [this.registry];
    this.#requests = new Counter({ name: 'kvindex_gateway_requests_total', help: 'Generation requests, by model, engine (instance id) and outcome', labelNames: ['model', 'engine', 'outcome'] as const, registers });
    this.#ttft = new Histogram({ name: 'kvindex_gateway_ttft_seconds', help: 'Arrival at the gateway to the first byte of the engine\'s answer, s', labelNames: ['engine'] as const, buckets: SECONDS, registers });
    this.#total = new Histogram({ name: 'kvindex_gateway_request_seconds', help: 'Arrival at the gateway to the end of the answer, s', labelNames: ['engine'] as const, buckets: SECONDS, registers });
    // 0.01 ms x 3^k, as the lookup histograms.
    this.#overhead = new Histogram({ name: 'kvindex_gateway_overhead_ms', help: 'Gateway time per request, ms: tokenize (engine /tokenize), route (the decision), to_upstream (arrival to the upstream request sent, tokenization excluded)', labelNames: ['stage'] as const, buckets: exponentialBuckets(0.01, 3, 14), registers });
    this.#matched = new Histogram({ name: 'kvindex_gateway_matched_blocks', help: 'The chosen engine\'s cached prefix per request, blocks', buckets: [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096], registers });
    this.#retries = new Counter({ name: 'kvindex_gateway_retries_total', help: 'Tries that failed before their first byte (retried on another engine), by the failed engine', labelNames: ['engine'] as const, registers });
  }

  /** Adds the gateway's engine state and the standalone indexer's metrics (call once). */
  watch(gw: Gateway): void {
    const registers = [this.registry];
    new Gauge({
      name: 'kvindex_gateway_engine_up', help: 'Engine health by URL: 1 up, 0 down, -1 not polled yet', labelNames: ['url'] as const, registers,
      collect() {
        this.reset();
        for (const url of gw.catalog.urls()) {
          const h = gw.catalog.health(url);
          this.set({ url }, h === Health.Up ? 1 : h === Health.Down ? 0 : -1);
        }
      },
    });
    new Gauge({
      name: 'kvindex_gateway_events_stale', help: '1 while an engine owes KV events (routed by load only)', labelNames: ['instance_id', 'dp_rank', 'model'] as const, registers,
      collect() {
        this.reset();
        for (const e of gw.catalog.engines()) this.set({ instance_id: e.instanceId.toString(), dp_rank: String(e.dpRank), model: e.modelName }, e.stale ? 1 : 0);
      },
    });
    new Counter({
      name: 'kvindex_gateway_events_stale_total', help: 'Times an engine\'s KV events stopped (it was then routed by load only)', registers,
      collect() {
        this.reset();
        this.inc(gw.catalog.staleTransitions);
      },
    });
    this.#zmq = new ZmqServeMetrics(gw.registry);
    this.#merged = Registry.merge([this.registry, this.#zmq.registry]);
  }

  routed(_model: string, pick: EnginePick): void {
    if (pick.tokenizeMs > 0) this.#overhead.observe({ stage: 'tokenize' }, pick.tokenizeMs);
    this.#overhead.observe({ stage: 'route' }, pick.routeMs);
    this.#matched.observe(pick.decision.overlapBlocks);
  }

  sent(pick: EnginePick, ms: number): void {
    this.#overhead.observe({ stage: 'to_upstream' }, Math.max(0, ms - pick.tokenizeMs));
  }

  firstByte(pick: EnginePick, ms: number): void {
    this.#ttft.observe({ engine: pick.engine.instanceId.toString() }, ms / 1000);
  }

  retried(pick: EnginePick): void {
    this.#retries.inc({ engine: pick.engine.instanceId.toString() });
  }

  finished(model: string, pick: EnginePick | null, outcome: Outcome | 'rejected', ms: number): void {
    const engine = pick === null ? 'none' : pick.engine.instanceId.toString();
    this.#requests.inc({ model: pick === null || model === '' ? 'none' : model, engine, outcome });
    if (pick !== null) this.#total.observe({ engine }, ms / 1000);
  }

  /** Counts one error answer of a route. */
  observeError(route: string, status: number): void {
    this.#zmq?.observeError(route, status);
  }

  /** The Prometheus text exposition and its content type. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    const reg = this.#merged ?? this.registry;
    return { contentType: reg.contentType, body: await reg.metrics() };
  }
}
