/**
 * Metrics of the routing decisions (`KvRouter`), for both servers: `kvindex serve
 * --route-workers` (one router, over NATS) and `kvindex serve --http` (one router per (model,
 * tenant), labelled so). Read from the routers' in-flight bookkeeping at scrape time, so a
 * decision pays nothing for them:
 * - `kvindex_route_active_requests`: requests in flight (routed, not freed, not expired);
 * - `kvindex_route_sequences_total{event}`: `added` (this router's and its replicas'),
 *   `freed`, `expired` (past the TTL without a free: a client that never sent it),
 *   `duplicate` (an add of an id in flight), `unknown` (a free or mark of no request in flight).
 *
 * Why an operator wants them: `expired` rising means clients lose their frees, and the
 * workers' loads were overcounted for up to the TTL (300 s); `active_requests` that only grows
 * is the same leak seen early.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { KvRouter } from '../router/kv-router.js';

/** One router and its labels (the same label names for every router of a registry). */
export interface RouterSeries {
  labels: Record<string, string>;
  router: KvRouter;
}

export function registerRouteMetrics(reg: Registry, labelNames: readonly string[], routers: () => Iterable<RouterSeries>): void {
  new Gauge({
    name: 'kvindex_route_active_requests',
    help: 'Routed requests in flight (not freed, not expired)',
    labelNames,
    registers: [reg],
    collect() {
      this.reset();
      for (const r of routers()) this.set(r.labels, r.router.sequences.size);
    },
  });
  new Counter({
    name: 'kvindex_route_sequences_total',
    help: 'In-flight request bookkeeping, by event: added (local and replicas), freed, expired (TTL without a free), duplicate, unknown',
    labelNames: [...labelNames, 'event'],
    registers: [reg],
    collect() {
      this.reset();
      for (const r of routers()) {
        const s = r.router.sequences.stats();
        const inc = (event: string, n: number): void => this.inc({ ...r.labels, event }, n);
        inc('added', s.added);
        inc('freed', s.freed);
        inc('expired', s.expired);
        inc('duplicate', s.duplicates);
        inc('unknown', s.unknown);
      }
    },
  });
}
