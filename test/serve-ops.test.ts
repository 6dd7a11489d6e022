/**
 * The operations surface of a router, against a real nats-server and a real HTTP client (fetch)
 * on loopback: /metrics parsed as Prometheus text with values matching the counters, /health,
 * /ready false until catch-up, worker removal over HTTP and NATS request/reply, idle removal,
 * event-id gap counting, and a corrupt snapshot with onBadSnapshot 'fail' and 'skip'.
 */

import { describe, expect, it } from 'vitest';
import { requestFindMatches, KvQueryService } from '../src/nats/query.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { kvNames } from '../src/nats/names.js';
import { uploadSnapshot } from '../src/nats/snapshot.js';
import { CUT_MIN_TOKENS, ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { ServeMetrics } from '../src/serve/metrics.js';
import { startOpsServer, type OpsServer } from '../src/serve/ops-server.js';
import { generateStream } from './support/event-gen.js';
import { captureLog } from './support/log-capture.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';
import { LOOKUP_LE, parsePrometheusText, samples, value } from './support/prometheus-text.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

const BIG_WORKER = 18446744073709551557n; // above 2^53: must survive as text

function stored(worker: bigint, eventId: bigint, hash: bigint): RouterEvent {
  return { workerId: worker, event: { eventId, data: { type: 'stored', parentHash: null, blocks: [{ blockHash: hash, tokensHash: hash }] } } };
}

async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(!installed)('serve operations', () => {
  const env = useNatsServer();

  it('serves /metrics matching the counters, /health, and /ready only after catch-up', async () => {
    const events = generateStream(51, 3000).ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    const byType = { stored: 0, removed: 0, cleared: 0 };
    for (const e of events) byType[e.event.data.type]++;
    const pub = await KvEventPublisher.connect({ namespace: 'ops', component: 'backend', connection: env.nc });
    const { lastSeq } = await pub.publishAll(events);
    const ix = await ShardedIndexer.create({ shards: 2, blockSize: 4, keepWarmMs: 0 });
    const sub = await KvEventSubscriber.start({ indexer: ix, namespace: 'ops', component: 'backend', connection: env.nc, readyMaxLag: 0, batchMessages: 100 });
    // Nothing fetched yet: the start resolves before the first pull can complete.
    expect(sub.ready()).toBe(false);
    await sub.pause();
    const metrics = new ServeMetrics({ subscriber: sub, indexer: ix, namespace: 'ops', component: 'backend', maxWorkerSeries: 1 });
    const query = KvQueryService.start(env.nc, ix, sub.names.querySubject, { onLookup: (ms) => metrics.observeLookup(ms) });
    let http: OpsServer | null = null;
    try {
      http = await startOpsServer({ host: '127.0.0.1', port: 0 }, { metrics, readiness: () => sub.readiness() });
      expect((await fetch(`${http.url}/health`)).status).toBe(200);
      const notReady = await fetch(`${http.url}/ready`);
      expect(notReady.status).toBe(503);
      expect(((await notReady.json()) as { ready: boolean; lag: number }).lag).toBeGreaterThan(0);
      sub.resume();
      await sub.whenReady();
      expect(sub.lastAppliedSeq).toBe(lastSeq);
      const ready = await fetch(`${http.url}/ready`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({ ready: true, lag: 0 });

      for (let i = 0; i < 5; i++) await requestFindMatches(env.nc, sub.names.querySubject, { hashes: [1n, 2n] });
      // Tokens whose first block nobody holds: answered after hashing that block alone.
      await requestFindMatches(env.nc, sub.names.querySubject, { tokens: Array.from({ length: CUT_MIN_TOKENS }, (_, i) => 90_001 + i) });
      const res = await fetch(`${http.url}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/plain');
      const all = parsePrometheusText(await res.text());

      const stats = await ix.stats();
      const sum = (pick: (s: (typeof stats)[number]) => number): number => stats.reduce((n, s) => n + pick(s), 0);
      const applied = (event_type: string, status: string): number =>
        value(all, 'dynamo_component_kv_cache_events_applied', { event_type, status, dynamo_namespace: 'ops', dynamo_component: 'backend' });
      // Per type: the generated events' types; per status: the shards' counts.
      expect(applied('removed', 'ok') + applied('removed', 'block_not_found')).toBe(byType.removed);
      expect(applied('cleared', 'ok')).toBe(byType.cleared);
      expect(applied('stored', 'ok') + applied('stored', 'parent_block_not_found') + applied('stored', 'invalid_block')).toBe(byType.stored);
      expect(applied('stored', 'parent_block_not_found')).toBe(sum((s) => s.events.parent_block_not_found));
      expect(applied('removed', 'block_not_found')).toBe(sum((s) => s.events.block_not_found));

      expect(value(all, 'dynamo_kvindexer_workers')).toBe(sum((s) => s.workers));
      expect(samples(all, 'kvindex_shard_pairs').map((s) => s.value)).toEqual(stats.map((s) => s.pairs));
      expect(value(all, 'kvindex_shard_bytes', { shard: '1' })).toBe(stats[1]!.bytes);
      expect(value(all, 'kvindex_shard_batches_total', { shard: '0', path: 'ring' })).toBe(stats[0]!.ringBatches);
      expect(value(all, 'kvindex_shard_batches_total', { shard: '1', path: 'transferred' })).toBe(stats[1]!.transferredBatches);
      expect(value(all, 'kvindex_stream_last_applied_seq')).toBe(lastSeq);
      expect(value(all, 'kvindex_stream_lag_messages')).toBe(0);
      expect(value(all, 'kvindex_consumer_ack_floor_seq', { consumer: sub.consumerName })).toBe(lastSeq);
      expect(value(all, 'kvindex_ready')).toBe(1);
      expect(value(all, 'kvindex_messages_total', { outcome: 'applied' })).toBe(events.length);
      expect(value(all, 'kvindex_messages_total', { outcome: 'malformed' })).toBe(0);
      // The indexer's own counts, whatever the scheduler made of this run's lookups.
      expect(value(all, 'kvindex_lookups_past_writer_total', { outcome: 'answered' })).toBe(ix.readsPastWriter.answered);
      expect(value(all, 'kvindex_lookups_past_writer_total', { outcome: 'waited' })).toBe(ix.readsPastWriter.waited);
      expect(value(all, 'kvindex_keep_warm_primes_total')).toBe(0); // keepWarmMs: 0 turns it off
      expect(value(all, 'kvindex_tokens_lookups_cut_short_total')).toBe(1);
      expect(ix.firstBlockMisses).toBe(1);
      expect(value(all, 'dynamo_router_overhead_indexer_find_matches_ms_count', { router_id: sub.consumerName })).toBe(6);
      // The bounds print as Dynamo's decimals (prom-client's exponentialBuckets printed 7.290000000000001).
      expect(samples(all, 'dynamo_router_overhead_indexer_find_matches_ms_bucket').map((s) => s.labels.le)).toEqual(LOOKUP_LE);
      // The stream has more workers than the cap of 1: one series only.
      expect(sum((s) => s.workers)).toBeGreaterThan(1);
      expect(samples(all, 'kvindex_worker_last_event_id')).toHaveLength(1);
      expect(samples(all, 'kvindex_snapshot_age_seconds')).toHaveLength(0);
      expect(value(all, 'kvindex_snapshots_deferred_total')).toBe(sub.stats().snapshotsDeferred);
      expect(value(all, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    } finally {
      await http?.close();
      await query.stop();
      await sub.close();
      await pub.close();
      await ix.close();
    }
  }, 120_000);

  it('counts event-id gaps per worker, and removes workers over HTTP, NATS and when idle', async () => {
    const log = captureLog('info');
    const ns = 'opsworkers';
    const pub = await KvEventPublisher.connect({ namespace: ns, component: 'backend', connection: env.nc });
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    const sub = await KvEventSubscriber.start({ indexer: ix, namespace: ns, component: 'backend', connection: env.nc, logger: log.logger, workerIdleMs: 1_500 });
    const metrics = new ServeMetrics({ subscriber: sub, indexer: ix, namespace: ns, component: 'backend', processMetrics: false });
    const { startAdminService } = await import('../src/nats/admin.js');
    const admin = startAdminService(env.nc, sub.names.adminRemoveWorkerSubject, (id) => sub.removeWorker(id));
    let http: OpsServer | null = null;
    try {
      http = await startOpsServer({ host: '127.0.0.1', port: 0 }, { metrics, readiness: () => sub.readiness(), removeWorker: (id) => sub.removeWorker(id) });
      // Worker 1: ids 0, 1, 2, then 5 (3 and 4 never sent). BIG_WORKER and 3: one event each.
      let r = await pub.publishAll([stored(1n, 0n, 11n), stored(1n, 1n, 12n), stored(1n, 2n, 13n), stored(1n, 5n, 14n), stored(BIG_WORKER, 0n, 21n), stored(3n, 0n, 31n)]);
      await sub.waitForSeq(r.lastSeq, 60_000);
      expect(sub.stats()).toMatchObject({ workerEventIdGaps: 1, workerMissingEvents: 2 });
      expect(log.find('event ids of a worker jumped')[0]).toMatchObject({ workerId: '1', expectedEventId: '3', eventId: '5' });
      const scores = async (h: bigint): Promise<Map<bigint, number>> => (await ix.findMatches([h])).scores;
      expect((await scores(21n)).get(BIG_WORKER)).toBe(1);

      // HTTP: a bad id is refused; the u64 above 2^53 is removed exactly.
      const bad = await fetch(`${http.url}/workers/18446744073709551616`, { method: 'DELETE' });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ code: 'KVX_INVALID_FIELD' });
      const del = await fetch(`${http.url}/workers/${BIG_WORKER}`, { method: 'DELETE' });
      expect(await del.json()).toEqual({ removed: BIG_WORKER.toString(), known: true });
      expect((await scores(21n)).size).toBe(0);

      // NATS request/reply: worker 3.
      const reply = await env.nc.request(sub.names.adminRemoveWorkerSubject, new TextEncoder().encode('{"worker_id":3}'), { timeout: 10_000 });
      expect(JSON.parse(new TextDecoder().decode(reply.data))).toEqual({ removed: '3', known: true });
      expect((await scores(31n)).size).toBe(0);
      const junk = await env.nc.request(sub.names.adminRemoveWorkerSubject, new TextEncoder().encode('{"worker_id":-1}'), { timeout: 10_000 });
      expect(JSON.parse(new TextDecoder().decode(junk.data))).toMatchObject({ error: { code: 'KVX_NATS_BAD_QUERY' } });

      // Idle: worker 1 goes silent while worker 2 keeps sending; only worker 1 is removed.
      let id = 0n;
      await until('the idle worker is removed', async () => {
        r = await pub.publishAll([stored(2n, id++, 41n)]);
        await sub.waitForSeq(r.lastSeq, 60_000);
        return (await scores(11n)).size === 0;
      });
      expect((await scores(41n)).get(2n)).toBe(1);
      expect(log.find('worker removed from the index').map((l) => l['workerId'])).toEqual([BIG_WORKER.toString(), '3', '1']);
      const all = parsePrometheusText(await (await fetch(`${http.url}/metrics`)).text());
      expect(value(all, 'kvindex_workers_removed_total')).toBe(3);
      expect(value(all, 'kvindex_worker_event_id_gaps_total')).toBe(1);
      expect(value(all, 'kvindex_worker_missing_events_total')).toBe(2);
      expect(samples(all, 'kvindex_worker_last_event_id').map((s) => s.labels['worker_id'])).toEqual(['2']);
    } finally {
      await http?.close();
      await admin.drain();
      await sub.close();
      await pub.close();
      await ix.close();
    }
  }, 120_000);

  it('fails on a corrupt snapshot by default; with skip, starts partial and not ready until a new snapshot', async () => {
    const ns = 'opsbadsnap';
    const names = kvNames(ns, 'backend');
    const pub = await KvEventPublisher.connect({ namespace: ns, component: 'backend', connection: env.nc });
    const { lastSeq } = await pub.publishAll([stored(9n, 0n, 91n), stored(9n, 1n, 92n)]);
    await uploadSnapshot(env.nc.jetstream(), names, new Uint8Array([5, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3]), { streamSeq: 1, encoding: 'bincode' });
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    try {
      let code: unknown = null;
      try {
        await KvEventSubscriber.start({ indexer: ix, namespace: ns, component: 'backend', connection: env.nc });
      } catch (err) {
        code = (err as { code?: unknown }).code;
      }
      expect(String(code)).toMatch(/^KVX_SNAPSHOT_/);
      const log = captureLog('info');
      const sub = await KvEventSubscriber.start({ indexer: ix, namespace: ns, component: 'backend', connection: env.nc, onBadSnapshot: 'skip', logger: log.logger });
      try {
        expect(sub.restored.outcome).toBe('skipped');
        expect(log.find('PARTIAL')).toHaveLength(1);
        await sub.waitForSeq(lastSeq, 60_000);
        // Caught up, everything the stream held applied, and still not ready.
        expect((await ix.findMatches([91n])).scores.get(9n)).toBe(1);
        expect(sub.readiness()).toMatchObject({ ready: false, lag: 0 });
        expect(await sub.snapshotNow()).not.toBeNull();
        expect(sub.ready()).toBe(true);
      } finally {
        await sub.close();
      }
    } finally {
      await pub.close();
      await ix.close();
    }
  }, 120_000);

  it('with skip, a jsonl snapshot with a bad line starts partial too, keeping none of its events', async () => {
    const ns = 'opsbadjsonl';
    const names = kvNames(ns, 'backend');
    // A whole event for worker 7, then a truncated one: the decode fails after the first event
    // reached the index. It used to escape the skip (an EventParseError, not a
    // SnapshotDecodeError) and stop start-up with worker 7 left loaded.
    const text = `${formatRouterEvent(stored(7n, 0n, 71n))}\n{"worker_id":7,"event":\n`;
    await uploadSnapshot(env.nc.jetstream(), names, new TextEncoder().encode(text), { streamSeq: 0, encoding: 'jsonl' });
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    try {
      const log = captureLog('info');
      const sub = await KvEventSubscriber.start({ indexer: ix, namespace: ns, component: 'backend', connection: env.nc, onBadSnapshot: 'skip', logger: log.logger });
      try {
        expect(sub.restored.outcome).toBe('skipped');
        expect(log.find('PARTIAL')).toHaveLength(1);
        expect((await ix.findMatches([71n])).scores.size).toBe(0);
        expect(sub.ready()).toBe(false);
      } finally {
        await sub.close();
      }
    } finally {
      await ix.close();
    }
  }, 120_000);
});
