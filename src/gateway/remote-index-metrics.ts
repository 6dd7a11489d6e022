/**
 * Prometheus series of the remote lookups (`kvindex gateway --index`), on the gateway's
 * registry (register them before `GatewayMetrics.watch`, which merges the registries):
 *
 * - `kvindex_gateway_index_lookups_total`: lookups asked;
 * - `kvindex_gateway_index_fail_open_total{reason}`: lookups routed by load alone: `deadline`
 *   (no replica answered in time), `failed` (every replica tried failed first), `no_replica`
 *   (every replica was backed off);
 * - `kvindex_gateway_index_hedged_total`, `kvindex_gateway_index_second_answered_total`: lookups
 *   that asked a second replica after the hedge delay, and those the second one answered;
 * - `kvindex_gateway_index_replica_failures_total{replica,failure}` (error, timeout, recovering,
 *   status, garbage), `kvindex_gateway_index_replica_late_total{replica}` (answers after the
 *   deadline, dropped), `kvindex_gateway_index_replica_backed_off{replica}` (1 while skipped);
 * - `kvindex_gateway_index_lookup_ms{outcome}`: each lookup's duration (answered, fail_open);
 * - `kvindex_gateway_index_registrations_total{replica}`, `..._registration_failures_total{replica,failure}`
 *   (error, unavailable, refused), `..._registrations_pending{replica}`: the gateway's engines
 *   registered on the replicas (remote-register.ts).
 */

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { RemoteIndexClient } from './remote-index.js';
import type { ReplicaRegistrar } from './remote-register.js';

export class RemoteIndexMetrics {
  readonly #ms: Histogram<'outcome'>;

  constructor(registry: Registry) {
    const registers = [registry];
    // 0.05 ms to ~40 ms: the deadline (2 ms by default) sits in the middle.
    this.#ms = new Histogram({ name: 'kvindex_gateway_index_lookup_ms', help: 'Remote index lookups (--index), ms, by outcome (answered, fail_open)', labelNames: ['outcome'] as const, buckets: [0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 40], registers });
    this.#registry = registry;
  }

  readonly #registry: Registry;

  /** The client's `onLookup`. */
  observe(ms: number, answered: boolean): void {
    this.#ms.observe({ outcome: answered ? 'answered' : 'fail_open' }, ms);
  }

  /** Adds the client's counters (read at each scrape). */
  watch(client: RemoteIndexClient): void {
    const registers = [this.#registry];
    const s = client.stats;
    new Counter({ name: 'kvindex_gateway_index_lookups_total', help: 'Remote index lookups asked', registers, collect() {
      this.reset();
      this.inc(s.lookups);
    } });
    new Counter({ name: 'kvindex_gateway_index_fail_open_total', help: 'Remote index lookups routed by load alone, by reason (deadline, failed, no_replica)', labelNames: ['reason'] as const, registers, collect() {
      this.reset();
      for (const [reason, n] of Object.entries(s.failOpen)) this.inc({ reason }, n);
    } });
    new Counter({ name: 'kvindex_gateway_index_hedged_total', help: 'Lookups that asked a second replica after the hedge delay', registers, collect() {
      this.reset();
      this.inc(s.hedged);
    } });
    new Counter({ name: 'kvindex_gateway_index_second_answered_total', help: 'Lookups answered by the second replica asked (hedge or fail-over)', registers, collect() {
      this.reset();
      this.inc(s.secondAnswered);
    } });
    new Counter({ name: 'kvindex_gateway_index_replica_failures_total', help: 'Failed attempts per replica, by failure (error, timeout, recovering, status, garbage)', labelNames: ['replica', 'failure'] as const, registers, collect() {
      this.reset();
      for (const r of s.replicas) for (const [failure, n] of Object.entries(r.failures)) this.inc({ replica: r.url, failure }, n);
    } });
    new Counter({ name: 'kvindex_gateway_index_replica_late_total', help: 'Answers after the lookup\'s deadline (dropped), per replica', labelNames: ['replica'] as const, registers, collect() {
      this.reset();
      for (const r of s.replicas) this.inc({ replica: r.url }, r.late);
    } });
    new Gauge({ name: 'kvindex_gateway_index_replica_backed_off', help: '1 while a replica is skipped after failures', labelNames: ['replica'] as const, registers, collect() {
      this.reset();
      const now = performance.now();
      for (const r of s.replicas) this.set({ replica: r.url }, r.backedOffUntil > now ? 1 : 0);
    } });
  }
}

/** Adds the registrar's counters to `registry` (read at each scrape). */
export function watchRegistrar(registry: Registry, registrar: ReplicaRegistrar): void {
  const registers = [registry];
  const s = registrar.stats;
  new Counter({ name: 'kvindex_gateway_index_registrations_total', help: 'Engine registrations the index replicas accepted (refreshes included), per replica', labelNames: ['replica'] as const, registers, collect() {
    this.reset();
    for (const r of s) this.inc({ replica: r.url }, r.registered);
  } });
  new Counter({ name: 'kvindex_gateway_index_registration_failures_total', help: 'Failed engine registrations on the index replicas, per replica, by failure (error, unavailable, refused)', labelNames: ['replica', 'failure'] as const, registers, collect() {
    this.reset();
    for (const r of s) for (const [failure, n] of Object.entries(r.failures)) this.inc({ replica: r.url, failure }, n);
  } });
  new Gauge({ name: 'kvindex_gateway_index_registrations_pending', help: 'Engine registrations not yet accepted by the index replica', labelNames: ['replica'] as const, registers, collect() {
    this.reset();
    for (const r of s) this.set({ replica: r.url }, r.pending);
  } });
}
