/**
 * The Prometheus metrics of `kvindex serve --http` (the standalone indexer: ZMQ engine events,
 * HTTP lookups), served by `--metrics` with /health and /ready (ops-routes.ts). Read from the
 * registry's listeners and indexes at scrape time, so the event path pays nothing for them;
 * only the lookup histogram is observed per request.
 *
 * Per listener, labelled `instance_id` (u64 in decimal), `dp_rank`, `model`, `tenant`:
 * - `kvindex_zmq_messages_total{outcome}`: received, bad_frame, bad_payload;
 * - `kvindex_zmq_events_total{outcome}`: applied, bad_event, block_size_mismatch,
 *   duplicate_hash, non_full_attention (skipped), lower_tier (applied to a lower tier);
 * - `kvindex_zmq_apply_status_total{status}`: the tree's apply statuses of the applied events;
 * - `kvindex_zmq_stored_blocks_total`;
 * - `kvindex_zmq_gaps_total{outcome}`: detected, replayed, unreplayable;
 *   `kvindex_zmq_replayed_batches_total`, `kvindex_zmq_engine_restarts_total`;
 * - `kvindex_zmq_listener_up`: 1 while its receive loop runs, 0 once it failed;
 * - `kvindex_zmq_rank_state{state}`: per rank the source filed (`dp_rank` is that rank), 1 for
 *   its state (active, connecting, excluded, failed: src/zmq/source-health.ts), 0 for the others,
 *   so `kvindex_zmq_rank_state{state!="active"} == 1` alerts on any engine not scored;
 * - `kvindex_zmq_readmissions_total`: exclusions ended by `--readmit-after`, not by the engine.
 * Per index (`model`, `tenant`): `kvindex_index_workers` (registered (instance, rank)s), and
 * once `/route` was asked for it, route-metrics.ts's series (requests in flight, expired, ...).
 * Errors: `kvindex_http_errors_total{route,status}` (401s show token failures; `unmatched`: no
 * such route), counted on the error paths only.
 * Lookups: `kvindex_http_query_ms{route}` (/query, /query_by_hash), Dynamo's lookup buckets
 * (0.01 ms x 3^k, 17 buckets). Process: prom-client's default metrics.
 *
 * Readiness (src/http/engine-readiness.ts): ready while every listener's receive loop runs. A
 * failed listener (its socket closed under it) stops updating that engine's blocks: the replica
 * says 503 naming it, so an operator or an orchestrator notices; lookups keep being answered
 * meanwhile. Ranks connecting or excluded are named in the body.
 */

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { LOOKUP_BUCKETS_MS } from './lookup-buckets.js';
import type { EngineRegistry, ListenerEntry } from '../http/engine-registry.js';
import { registerRouteMetrics, type RouterSeries } from './route-metrics.js';
import { SourceState } from '../zmq/source.js';
import { RankState } from '../zmq/source-health.js';
import { engineReadiness, type EngineReadiness } from '../http/engine-readiness.js';
import type { ZmqSourceStats } from '../zmq/source-stats.js';
import { PREFIX_BLOCKS } from '../indexer/cut-gate.js';

const LISTENER_LABELS = ['instance_id', 'dp_rank', 'model', 'tenant'] as const;
type ListenerLabel = (typeof LISTENER_LABELS)[number];

const labelsOf = (l: ListenerEntry): Record<ListenerLabel, string> => ({
  instance_id: l.instanceId.toString(),
  dp_rank: String(l.dpRank),
  model: l.modelName,
  tenant: l.tenantId,
});

export class ZmqServeMetrics {
  readonly registry = new Registry();
  private readonly queries: Histogram<'route'>;
  private readonly errors: Counter<'route' | 'status'>;

  constructor(private readonly engines: EngineRegistry, processMetrics = true) {
    const reg = this.registry;
    if (processMetrics) collectDefaultMetrics({ register: reg });

    /** A counter per listener and outcome, set from the sources' counters at scrape time. */
    const perListener = (name: string, help: string, extra: string | null, read: (s: ZmqSourceStats) => Array<[string | null, number]>): void => {
      new Counter({
        name,
        help,
        labelNames: extra === null ? LISTENER_LABELS : [...LISTENER_LABELS, extra],
        registers: [reg],
        collect: function (this: Counter<string>) {
          this.reset();
          for (const l of engines.listeners()) {
            const base = labelsOf(l);
            for (const [value, n] of read(l.source.stats())) this.inc(extra === null || value === null ? base : { ...base, [extra]: value }, n);
          }
        },
      });
    };
    perListener('kvindex_zmq_messages_total', 'Engine messages received, and those dropped as malformed', 'outcome', (s) => [
      ['received', s.messages], ['bad_frame', s.badFrames], ['bad_payload', s.badPayloads],
    ]);
    perListener('kvindex_zmq_events_total', 'Engine events, by outcome', 'outcome', (s) => [
      ['applied', s.events], ['bad_event', s.badEvents], ['block_size_mismatch', s.blockSizeMismatch],
      ['duplicate_hash', s.duplicateHash], ['non_full_attention', s.nonFullAttention], ['lower_tier', s.lowerTier],
    ]);
    perListener('kvindex_zmq_apply_status_total', 'Applied engine events, by the index\'s apply status', 'status', (s) =>
      Object.entries(s.statuses).map(([status, n]): [string, number] => [status, n]));
    perListener('kvindex_zmq_stored_blocks_total', 'Blocks of applied Stored events', null, (s) => [[null, s.storedBlocks]]);
    perListener('kvindex_zmq_gaps_total', 'Sequence gaps of an engine, by outcome', 'outcome', (s) => [
      ['detected', s.gaps], ['replayed', s.gapsReplayed], ['unreplayable', s.gapsUnreplayable],
    ]);
    perListener('kvindex_zmq_replayed_batches_total', 'Batches applied from engine replays', null, (s) => [[null, s.replayedBatches]]);
    perListener('kvindex_zmq_engine_restarts_total', 'Engine restarts seen (sequence went backwards)', null, (s) => [[null, s.restarts]]);
    perListener('kvindex_zmq_readmissions_total', 'Workers counted back in scores by the readmission delay after an unreplayable gap', null, (s) => [[null, s.readmissions]]);

    new Gauge({
      name: 'kvindex_zmq_listener_up',
      help: '1 while the listener\'s receive loop runs, 0 once it failed',
      labelNames: LISTENER_LABELS,
      registers: [reg],
      collect() {
        this.reset();
        for (const l of engines.listeners()) this.set(labelsOf(l), l.source.state === SourceState.Active ? 1 : 0);
      },
    });
    const states = [RankState.Active, RankState.Connecting, RankState.Excluded, RankState.Failed];
    new Gauge({
      name: 'kvindex_zmq_rank_state',
      help: 'Per engine rank: 1 for its state (active, connecting, excluded, failed), 0 for the others',
      labelNames: [...LISTENER_LABELS, 'state'],
      registers: [reg],
      collect() {
        this.reset();
        for (const l of engines.listeners()) {
          for (const h of l.source.health()) {
            const base = { ...labelsOf(l), dp_rank: String(h.rank) };
            for (const state of states) this.set({ ...base, state }, h.state === state ? 1 : 0);
          }
        }
      },
    });
    new Gauge({
      name: 'kvindex_index_workers',
      help: 'Registered (instance, dp rank)s per index',
      labelNames: ['model', 'tenant'] as const,
      registers: [reg],
      collect() {
        this.reset();
        for (const ix of engines.indexes()) this.set({ model: ix.modelName, tenant: ix.tenantId }, engines.candidates(ix.modelName, ix.tenantId).length);
      },
    });
    new Counter({
      name: 'kvindex_tokens_lookups_cut_short_total',
      help: `/query lookups answered before every block was hashed: no worker held the first block, or every score was below the first ${PREFIX_BLOCKS} blocks looked up first`,
      labelNames: ['model', 'tenant'] as const,
      registers: [reg],
      collect() {
        this.reset();
        for (const ix of engines.indexes()) this.inc({ model: ix.modelName, tenant: ix.tenantId }, ix.index.cutShort);
      },
    });
    registerRouteMetrics(reg, ['model', 'tenant'], function* (): Iterable<RouterSeries> {
      for (const ix of engines.indexes()) if (ix.router !== null) yield { labels: { model: ix.modelName, tenant: ix.tenantId }, router: ix.router };
    });
    this.errors = new Counter({
      name: 'kvindex_http_errors_total',
      help: 'Requests answered with an error, by route (unmatched: no route) and status (401: a wrong or missing token)',
      labelNames: ['route', 'status'] as const,
      registers: [reg],
    });
    this.queries = new Histogram({
      name: 'kvindex_http_query_ms',
      help: 'Time to answer a lookup over HTTP (parse, hash, look up, serialize), ms',
      labelNames: ['route'] as const,
      buckets: [...LOOKUP_BUCKETS_MS],
      registers: [reg],
    });
  }

  /** Counts one error answer (the routes' `onError`). */
  observeError(route: string, status: number): void {
    this.errors.inc({ route, status: String(status) });
  }

  /** Records one lookup's duration (the routes' `onQuery`). */
  observeQuery(route: string, ms: number): void {
    this.queries.observe({ route }, ms);
  }

  /** The registry's readiness (src/http/engine-readiness.ts; `strict`: any rank not active is 503). */
  readiness(strict = false): EngineReadiness {
    return engineReadiness(this.engines, strict);
  }

  /** The Prometheus text exposition and its content type. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
