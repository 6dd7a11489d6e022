/**
 * Prometheus metrics of loads shared between gateways (shared-loads.ts), read from its counters
 * at scrape time:
 *
 * - `kvindex_gateway_shared_loads_connected`: 1 while loads are shared, 0 while NATS is
 *   unreachable or lost (routing then uses this gateway's view);
 * - `kvindex_gateway_shared_loads_outages_total`: times loads stopped being shared;
 * - `kvindex_gateway_shared_loads_events_total{result}`: `published` and `unshared` (this
 *   gateway's), `applied`, `own`, `unknown_worker`, `unknown_request`, `duplicate` (the peers'),
 *   `malformed` (either subject);
 * - `kvindex_gateway_shared_loads_peers`, `kvindex_gateway_shared_loads_remote_requests`: the
 *   gateways heard from and their requests in flight here;
 * - `kvindex_gateway_shared_loads_expired_peers_total`,
 *   `kvindex_gateway_shared_loads_expired_requests_total`: peers dropped (silent or leaving) and
 *   the requests freed with them.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { SharedLoads } from './shared-loads.js';

/** Registers the metrics in `registry` (before `GatewayMetrics.watch`, which merges registries). */
export function registerSharedLoadsMetrics(registry: Registry, shared: SharedLoads): void {
  const registers = [registry];
  new Gauge({
    name: 'kvindex_gateway_shared_loads_connected', help: '1 while loads are shared with the other gateways over NATS, 0 while NATS is unreachable or lost', registers,
    collect() {
      this.set(shared.state === 'connected' ? 1 : 0);
    },
  });
  new Counter({
    name: 'kvindex_gateway_shared_loads_outages_total', help: 'Times loads stopped being shared (NATS unreachable at start or lost)', registers,
    collect() {
      this.reset();
      this.inc(shared.stats().outages);
    },
  });
  new Counter({
    name: 'kvindex_gateway_shared_loads_events_total', help: 'Active sequence events: this gateway\'s published or unshared; the peers\' by what applying them did; malformed messages', labelNames: ['result'] as const, registers,
    collect() {
      const s = shared.stats();
      this.reset();
      const rows: Array<[string, number]> = [
        ['published', s.published], ['unshared', s.unshared], ['applied', s.applied], ['own', s.own],
        ['unknown_worker', s.unknownWorker], ['unknown_request', s.unknownRequest], ['duplicate', s.duplicate], ['malformed', s.malformed],
      ];
      for (const [result, n] of rows) this.inc({ result }, n);
    },
  });
  new Gauge({
    name: 'kvindex_gateway_shared_loads_peers', help: 'Other gateways (router ids) heard from and not expired', registers,
    collect() {
      this.set(shared.stats().peers);
    },
  });
  new Gauge({
    name: 'kvindex_gateway_shared_loads_remote_requests', help: 'The other gateways\' requests in flight, as this gateway counts them', registers,
    collect() {
      this.set(shared.stats().remoteRequests);
    },
  });
  new Counter({
    name: 'kvindex_gateway_shared_loads_expired_peers_total', help: 'Gateways dropped because their heartbeats stopped or they left', registers,
    collect() {
      this.reset();
      this.inc(shared.stats().expiredPeers);
    },
  });
  new Counter({
    name: 'kvindex_gateway_shared_loads_expired_requests_total', help: 'Requests in flight freed with a dropped gateway', registers,
    collect() {
      this.reset();
      this.inc(shared.stats().expiredRequests);
    },
  });
}
