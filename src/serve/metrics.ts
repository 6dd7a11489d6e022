/**
 * The Prometheus metrics of `kvindex serve` (prom-client), read from the subscriber, the indexer
 * and the query service at scrape time, so the event path pays nothing per event for them
 * (only the lookup histogram is observed per request). Dynamo's names and labels where Dynamo
 * has the metric (engines-and-routers-2026.md C5), `kvindex_*` for the rest:
 *
 * - `dynamo_component_kv_cache_events_applied{event_type,status,dynamo_namespace,dynamo_component,dynamo_endpoint}`:
 *   the tree's per-status counts split by type (only `stored` fails with `parent_block_not_found`
 *   or `invalid_block`, only `removed` with `block_not_found`); `dynamo_endpoint` is `kv_events`.
 * - `dynamo_router_overhead_indexer_find_matches_ms{router_id}`: lookups over NATS, Dynamo's
 *   buckets (0.01 ms × 3^k, 17 buckets).
 * - `dynamo_kvindexer_workers`: workers holding blocks (sum over shards: a worker lives in one).
 * - per shard: `kvindex_shard_{pairs,nodes,workers,bytes}{shard}`, and with shard threads
 *   `kvindex_shard_batches_total{shard,path}` (ring, transferred): event batches received through
 *   the shard's batch ring, or in a transferred buffer because the ring had no room (0 while the
 *   shards keep up: src/shard/wire/batch-ring.ts).
 * - stream: `kvindex_stream_lag_messages`, `kvindex_stream_last_applied_seq`,
 *   `kvindex_consumer_ack_floor_seq{consumer}`, `kvindex_ready`.
 * - snapshots: `kvindex_snapshot_age_seconds{encoding}`, `_duration_seconds`, `_bytes`, `_events`
 *   (no series before this router's first snapshot), `kvindex_snapshots_total`,
 *   `kvindex_snapshots_deferred_total` (another router held the snapshot lease).
 * - lookups: `kvindex_lookups_past_writer_total{outcome}` (answered, waited): shard lookups that
 *   found their shard's writer descheduled inside a write section (src/tree/unit-log.ts);
 *   `kvindex_keep_warm_primes_total`: keep-warm lookups (`--keep-warm-ms`, on by default: src/indexer/keep-warm.ts).
 * - messages: `kvindex_messages_total{outcome}` (applied, malformed, duplicate),
 *   `kvindex_missed_stream_seqs_total`, `kvindex_lost_deliveries_total`, `kvindex_consumer_resets_total`.
 * - workers: `kvindex_worker_event_id_gaps_total`, `kvindex_worker_missing_events_total`,
 *   `kvindex_workers_removed_total`; per worker (at most `maxWorkerSeries`, the most recently
 *   active; 0 turns them off) `kvindex_worker_last_event_age_seconds{worker_id}` and
 *   `kvindex_worker_last_event_id{worker_id}` (a float64 sample: exact below 2^53).
 * - routing (`--route-workers`): route-metrics.ts's series, `kvindex_route_requests_total{outcome}`
 *   (served, failed), `kvindex_route_replica_events_total` (other replicas' events applied),
 *   `kvindex_route_unshared_events_total` (own events not published: route-service.ts).
 * - process: prom-client's default metrics (`process_resident_memory_bytes`, heap, event loop lag).
 */

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { LOOKUP_BUCKETS_MS } from './lookup-buckets.js';
import type { ShardedIndexer } from '../indexer/sharded-indexer.js';
import type { KvRouteService } from '../nats/route-service.js';
import type { KvEventSubscriber } from '../nats/subscriber.js';
import { registerRouteMetrics } from './route-metrics.js';
import { PREFIX_BLOCKS } from '../indexer/cut-gate.js';

export interface ServeMetricsOptions {
  subscriber: KvEventSubscriber;
  indexer: ShardedIndexer;
  namespace: string;
  component: string;
  /** Per-worker series, at most (most recently active first). Default 64; 0: none. */
  maxWorkerSeries?: number;
  /** Default metrics of the process (memory, event loop). Default true. */
  processMetrics?: boolean;
  /** The routing service (`--route-workers`), whose metrics are added (route-metrics.ts). */
  routes?: KvRouteService | null;
}

/** Metrics and their registry; `observeLookup(ms)` is the query service's hook. */
export class ServeMetrics {
  readonly registry = new Registry();
  private readonly lookups: Histogram<'router_id'>;
  private readonly routerId: string;

  constructor(o: ServeMetricsOptions) {
    const reg = this.registry;
    const sub = o.subscriber;
    const ix = o.indexer;
    const maxWorkers = o.maxWorkerSeries ?? 64;
    this.routerId = sub.consumerName;
    if (o.processMetrics !== false) collectDefaultMetrics({ register: reg });
    const hierarchy = { dynamo_namespace: o.namespace, dynamo_component: o.component, dynamo_endpoint: 'kv_events' };

    // One shard-stats round trip per scrape, shared by the collectors below.
    let shardStats: ReturnType<ShardedIndexer['stats']> | null = null;
    const stats = (): ReturnType<ShardedIndexer['stats']> => {
      shardStats ??= ix.stats().finally(() => {
        // Next scrape asks again (after the current one's collectors have run).
        setImmediate(() => {
          shardStats = null;
        });
      });
      return shardStats;
    };

    new Counter({
      name: 'dynamo_component_kv_cache_events_applied',
      help: 'KV cache events applied to the index, by event type and apply status (Dynamo name)',
      labelNames: ['event_type', 'status', 'dynamo_namespace', 'dynamo_component', 'dynamo_endpoint'] as const,
      registers: [reg],
      async collect() {
        const per = await stats();
        let ok = 0;
        let parent = 0;
        let missing = 0;
        let invalid = 0;
        for (const s of per) {
          ok += s.events.ok;
          parent += s.events.parent_block_not_found;
          missing += s.events.block_not_found;
          invalid += s.events.invalid_block_sequence;
        }
        const t = sub.stats().eventsByType;
        const removedOk = Math.max(0, t.removed - missing);
        const clearedOk = t.cleared;
        // The tree counts statuses, the subscriber types: "ok" of stored is what remains.
        const storedOk = Math.max(0, ok - removedOk - clearedOk);
        this.reset();
        const set = (event_type: string, status: string, v: number): void => this.inc({ event_type, status, ...hierarchy }, v);
        set('stored', 'ok', storedOk);
        set('stored', 'parent_block_not_found', parent);
        set('stored', 'invalid_block', invalid);
        set('removed', 'ok', removedOk);
        set('removed', 'block_not_found', missing);
        set('cleared', 'ok', clearedOk);
      },
    });

    this.lookups = new Histogram({
      name: 'dynamo_router_overhead_indexer_find_matches_ms',
      help: 'Time to answer a findMatches request, ms (Dynamo name and buckets)',
      labelNames: ['router_id'] as const,
      buckets: [...LOOKUP_BUCKETS_MS],
      registers: [reg],
    });

    new Gauge({
      name: 'dynamo_kvindexer_workers',
      help: 'Workers holding at least one block in the index',
      registers: [reg],
      async collect() {
        this.set((await stats()).reduce((n, s) => n + s.workers, 0));
      },
    });
    const shardGauge = (name: string, help: string, pick: (s: Awaited<ReturnType<ShardedIndexer['stats']>>[number]) => number): void => {
      new Gauge({
        name,
        help,
        labelNames: ['shard'] as const,
        registers: [reg],
        async collect() {
          const per = await stats();
          this.reset();
          per.forEach((s, i) => this.set({ shard: String(i) }, pick(s)));
        },
      });
    };
    shardGauge('kvindex_shard_pairs', '(worker, block) pairs held by the shard', (s) => s.pairs);
    shardGauge('kvindex_shard_nodes', 'Live tree nodes of the shard, the root included', (s) => s.nodes);
    shardGauge('kvindex_shard_workers', 'Workers holding blocks on the shard', (s) => s.workers);
    shardGauge('kvindex_shard_bytes', "Bytes of the shard tree's typed arrays", (s) => s.bytes);
    new Counter({
      name: 'kvindex_shard_batches_total',
      help: "Event batches a shard thread received, by path: through its batch ring, or in a transferred buffer because the ring had no room",
      labelNames: ['shard', 'path'] as const,
      registers: [reg],
      async collect() {
        const per = await stats();
        this.reset();
        per.forEach((s, i) => {
          if (s.ringBatches === null) return; // in-thread: no batches
          this.inc({ shard: String(i), path: 'ring' }, s.ringBatches);
          this.inc({ shard: String(i), path: 'transferred' }, s.transferredBatches ?? 0);
        });
      },
    });

    const gauge = (name: string, help: string, value: () => number): void => {
      new Gauge({
        name,
        help,
        registers: [reg],
        collect() {
          this.set(value());
        },
      });
    };
    const counter = (name: string, help: string, value: () => number): void => {
      new Counter({
        name,
        help,
        registers: [reg],
        collect() {
          this.reset();
          this.inc(value());
        },
      });
    };
    gauge('kvindex_stream_lag_messages', 'Stream messages not applied yet (last stream sequence minus last applied, estimated)', () => sub.stats().lag);
    gauge('kvindex_stream_last_applied_seq', 'Every event up to this stream sequence is applied and acked', () => sub.lastAppliedSeq);
    new Gauge({
      name: 'kvindex_consumer_ack_floor_seq',
      help: "Ack floor of this router's durable consumer, stream sequence (absent when the server cannot say)",
      labelNames: ['consumer'] as const,
      registers: [reg],
      async collect() {
        const floor = await sub.consumerAckFloor();
        this.reset();
        if (floor !== null) this.set({ consumer: sub.consumerName }, floor);
      },
    });
    gauge('kvindex_ready', '1 when the index is restored and caught up (see /ready)', () => (sub.ready() ? 1 : 0));
    // Labelled by encoding so that, before the first snapshot, there is no series at all
    // (prom-client prints 0 for a gauge without labels, which would read as "just taken").
    const snapshotGauge = (name: string, help: string, pick: (l: NonNullable<KvEventSubscriber['lastSnapshot']>) => number): void => {
      new Gauge({
        name,
        help,
        labelNames: ['encoding'] as const,
        registers: [reg],
        collect() {
          const l = sub.lastSnapshot;
          this.reset();
          if (l !== null) this.set({ encoding: l.encoding }, pick(l));
        },
      });
    };
    snapshotGauge('kvindex_snapshot_age_seconds', 'Seconds since this router took its last snapshot (absent: none yet)', (l) => (Date.now() - l.atMs) / 1000);
    snapshotGauge('kvindex_snapshot_duration_seconds', 'Duration of the last snapshot (dump, upload, purge)', (l) => l.durationMs / 1000);
    snapshotGauge('kvindex_snapshot_bytes', 'Size of the last snapshot', (l) => l.bytes);
    snapshotGauge('kvindex_snapshot_events', 'Events in the last snapshot', (l) => l.events);
    counter('kvindex_snapshots_total', 'Snapshots taken by this router', () => sub.stats().snapshots);
    counter('kvindex_snapshots_deferred_total', 'Snapshots this router skipped because another router held the snapshot lease', () => sub.stats().snapshotsDeferred);

    /** A counter labelled `outcome`, set from `read()`'s (outcome, count) pairs at scrape time. */
    const byOutcome = (name: string, help: string, read: () => Array<[string, number]>): void => {
      new Counter({
        name,
        help,
        labelNames: ['outcome'] as const,
        registers: [reg],
        collect() {
          this.reset();
          for (const [outcome, n] of read()) this.inc({ outcome }, n);
        },
      });
    };
    byOutcome('kvindex_messages_total', 'Stream messages received, by outcome', () => {
      const s = sub.stats();
      return [['applied', s.applied], ['malformed', s.malformed], ['duplicate', s.duplicates]];
    });
    byOutcome('kvindex_lookups_past_writer_total', "Shard lookups that found the shard's writer descheduled inside a write section: answered by reading past it, or waited for the lock", () => {
      const p = ix.readsPastWriter;
      return [['answered', p.answered], ['waited', p.waited]];
    });
    counter('kvindex_tokens_lookups_cut_short_total', `Tokens lookups answered before every block was hashed: no worker held the first block, or every score was below the first ${PREFIX_BLOCKS} blocks looked up first`, () => ix.firstBlockMisses + ix.prefixAnswers);
    counter('kvindex_keep_warm_primes_total', 'Keep-warm lookups made while no request came (--keep-warm-ms, default 1 ms)', () => ix.keepWarmPrimes);
    counter('kvindex_missed_stream_seqs_total', 'Stream sequences gone before this router read them (purged, expired, deleted)', () => sub.stats().missedSeqs);
    counter('kvindex_lost_deliveries_total', 'Deliveries lost in transit (each recreated the consumer)', () => sub.stats().lostDeliveries);
    counter('kvindex_consumer_resets_total', 'Times the durable consumer was recreated', () => sub.stats().consumerResets);
    counter('kvindex_worker_event_id_gaps_total', "Jumps in a worker's event ids (events this router never saw)", () => sub.stats().workerEventIdGaps);
    counter('kvindex_worker_missing_events_total', 'Events skipped by those jumps', () => sub.stats().workerMissingEvents);
    counter('kvindex_workers_removed_total', 'Workers removed from the index (idle or by request)', () => sub.stats().workersRemoved);

    const routes = o.routes ?? null;
    if (routes !== null) {
      registerRouteMetrics(reg, [], () => [{ labels: {}, router: routes.router }]);
      byOutcome('kvindex_route_requests_total', 'Requests to the route, mark_prefill and free subjects, by outcome (failed: answered with an error)', () => {
        const s = routes.stats();
        return [['served', s.served], ['failed', s.failed]];
      });
      counter('kvindex_route_replica_events_total', "Other replicas' in-flight request events applied", () => routes.stats().replicaEvents);
      counter('kvindex_route_unshared_events_total', "This replica's events that could not be published (its replicas miss them)", () => routes.stats().unshared);
    }

    if (maxWorkers > 0) {
      const recent = (): ReturnType<KvEventSubscriber['workers']['recent']> => sub.workers.recent(maxWorkers);
      new Gauge({
        name: 'kvindex_worker_last_event_age_seconds',
        help: `Seconds since the worker's last event (the ${maxWorkers} most recently active workers)`,
        labelNames: ['worker_id'] as const,
        registers: [reg],
        collect() {
          const now = Date.now();
          this.reset();
          for (const w of recent()) this.set({ worker_id: w.workerId.toString() }, (now - w.lastSeenMs) / 1000);
        },
      });
      new Gauge({
        name: 'kvindex_worker_last_event_id',
        help: `Last event id of the worker (the ${maxWorkers} most recently active workers; exact below 2^53)`,
        labelNames: ['worker_id'] as const,
        registers: [reg],
        collect() {
          this.reset();
          for (const w of recent()) this.set({ worker_id: w.workerId.toString() }, Number(w.lastEventId));
        },
      });
    }
  }

  /** Records one lookup's duration (the query service's `onLookup`). */
  observeLookup(ms: number): void {
    this.lookups.observe({ router_id: this.routerId }, ms);
  }

  /** The Prometheus text exposition and its content type. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
