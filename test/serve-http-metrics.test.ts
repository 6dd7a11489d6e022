/**
 * Metrics and readiness of the standalone indexer (`kvindex serve --http --metrics`): the
 * per-listener counters equal the ZMQ sources' own counts after real engine traffic (valid
 * batches, a malformed payload, a block size mismatch), the lookup histogram counts the
 * answered lookups, u64 instance ids stay exact in labels, /ready and /health answer, and an
 * unregistered listener's series go away.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { EngineRegistry } from '../src/http/engine-registry.js';
import { CUT_MIN_TOKENS } from '../src/indexer/cut-gate.js';
import { registerIndexerRoutes } from '../src/http/indexer-routes.js';
import { startOpsServer } from '../src/serve/ops-server.js';
import { ZmqServeMetrics } from '../src/serve/zmq-metrics.js';
import { parsePrometheusText, value } from './support/prometheus-text.js';
import { until, VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';

const W = 18_446_744_073_709_551_557n; // above 2^53: must not round in a label
const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

describe.skipIf(!(await zmqAvailable()))('standalone indexer metrics', () => {
  it('counts what the sources counted, the lookups answered, and reports readiness', async () => {
    const registry = new EngineRegistry({ replayTimeoutMs: 300 });
    const metrics = new ZmqServeMetrics(registry, false);
    const app: FastifyInstance = Fastify({ logger: false });
    await registerIndexerRoutes(app, registry, {
      token: 'tok',
      onQuery: (route, ms) => metrics.observeQuery(route, ms),
      onError: (route, status) => metrics.observeError(route, status),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const ops = await startOpsServer({ host: '127.0.0.1', port: 0 }, { metrics, readiness: () => metrics.readiness() });
    open.push({ close: () => registry.close() }, app, ops);

    const pub = await VllmPublisher.start();
    open.push(pub);
    const post = (path: string, body: string, token = 'tok'): Promise<Response> => fetch(url + path, { method: 'POST', body, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } });
    expect((await post('/register', `{"instance_id":${W},"endpoint":"${pub.endpoint}","model_name":"m","block_size":2}`)).status).toBe(201);
    await pub.subscribed();
    await pub.publish([{ stored: { hashes: [1n, 2n], tokens: [5, 6, 7, 8], blockSize: 2 } }, { stored: { hashes: [3n], tokens: [9, 10, 11, 12], blockSize: 4 } }]);
    await pub.publishRaw(Buffer.from([0xc1])); // not msgpack
    await pub.publish([{ removed: [2n] }]);
    const source = registry.listeners()[0]!.source;
    await until(() => source.stats().messages === 3 && source.stats().events >= 2, 10_000, 'three messages');
    for (let i = 0; i < 3; i++) expect((await post('/query', '{"token_ids":[5,6,7,8],"model_name":"m"}')).status).toBe(200);
    expect((await post('/query', '{"token_ids":[5,6],"model_name":"nope"}')).status).toBe(404);

    const text = await (await fetch(`${ops.url}/metrics`)).text();
    const all = parsePrometheusText(text);
    const l = { instance_id: W.toString(), dp_rank: '0', model: 'm', tenant: 'default' };
    const s = source.stats();
    expect(value(all, 'kvindex_zmq_messages_total', { ...l, outcome: 'received' })).toBe(3);
    expect(value(all, 'kvindex_zmq_messages_total', { ...l, outcome: 'bad_payload' })).toBe(1);
    expect(s.badPayloads).toBe(1);
    expect(value(all, 'kvindex_zmq_events_total', { ...l, outcome: 'applied' })).toBe(s.events);
    expect(value(all, 'kvindex_zmq_events_total', { ...l, outcome: 'block_size_mismatch' })).toBe(1);
    expect(value(all, 'kvindex_zmq_apply_status_total', { ...l, status: 'ok' })).toBe(s.statuses.ok);
    expect(value(all, 'kvindex_zmq_stored_blocks_total', l)).toBe(2);
    expect(value(all, 'kvindex_zmq_listener_up', l)).toBe(1);
    expect(value(all, 'kvindex_index_workers', { model: 'm', tenant: 'default' })).toBe(1);
    // Only answered lookups are timed (the 404 is not).
    expect(value(all, 'kvindex_http_query_ms_count', { route: '/query' })).toBe(3);
    expect(text).not.toContain('nope');
    // Errors are counted by route and status; every error body is {"error": ...}, names cut short.
    expect((await post('/register', '{}', 'wrong')).status).toBe(401);
    expect((await post('/query', '{"token_ids":[1]}')).status).toBe(400);
    const unknown = await fetch(`${url}/nope`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: 'no route GET "/nope"', code: 'KVX_HTTP_NO_ROUTE' });
    const longName = await post('/query', `{"token_ids":[5,6,7,8],"model_name":"${'x'.repeat(100_000)}"}`);
    expect(longName.status).toBe(404);
    expect((await longName.text()).length).toBeLessThan(200);
    // A long prompt whose first block nobody holds is answered after that block alone, with the
    // answer a short one gets; one whose first block is held (and nothing past it) from its
    // first blocks, with the answer of that block alone: both counted.
    const body = async (tokens: number[]): Promise<string> => {
      const r = await post('/query', `{"token_ids":[${tokens.join(',')}],"model_name":"m"}`);
      expect(r.status).toBe(200);
      return r.text();
    };
    const rest = Array.from({ length: CUT_MIN_TOKENS }, (_, i) => 1_000_000 + i);
    expect(await body(rest)).toBe(await body(rest.slice(0, 4)));
    expect(await body([5, 6, 7, 8, ...rest])).toBe(await body([5, 6, 7, 8]));
    const errs = parsePrometheusText(await (await fetch(`${ops.url}/metrics`)).text());
    expect(value(errs, 'kvindex_tokens_lookups_cut_short_total', { model: 'm', tenant: 'default' })).toBe(2);
    expect(value(errs, 'kvindex_http_errors_total', { route: '/register', status: '401' })).toBe(1);
    expect(value(errs, 'kvindex_http_errors_total', { route: '/query', status: '400' })).toBe(1);
    expect(value(errs, 'kvindex_http_errors_total', { route: '/query', status: '404' })).toBe(2); // "nope" above too
    expect(value(errs, 'kvindex_http_errors_total', { route: 'unmatched', status: '404' })).toBe(1);

    // No route asked yet: no routing series.
    expect(all.filter((x) => x.name.startsWith('kvindex_route_'))).toEqual([]);
    expect((await post('/route', '{"token_ids":[5,6,7,8],"model_name":"m","request_id":"a"}')).status).toBe(200);
    expect((await post('/route', '{"token_ids":[5,6,7,8],"model_name":"m","request_id":"b"}')).status).toBe(200);
    expect((await post('/free', '{"request_id":"a","model_name":"m"}')).status).toBe(200);
    expect((await post('/free', '{"request_id":"zz","model_name":"m"}')).status).toBe(200);
    const routed = parsePrometheusText(await (await fetch(`${ops.url}/metrics`)).text());
    const ix = { model: 'm', tenant: 'default' };
    expect(value(routed, 'kvindex_route_active_requests', ix)).toBe(1);
    expect(value(routed, 'kvindex_route_sequences_total', { ...ix, event: 'added' })).toBe(2);
    expect(value(routed, 'kvindex_route_sequences_total', { ...ix, event: 'freed' })).toBe(1);
    expect(value(routed, 'kvindex_route_sequences_total', { ...ix, event: 'unknown' })).toBe(1);
    expect(value(routed, 'kvindex_route_sequences_total', { ...ix, event: 'expired' })).toBe(0);

    const ready = await fetch(`${ops.url}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ready: true, reason: '', lag: 0, not_active: [] });
    expect((await fetch(`${ops.url}/health`)).status).toBe(200);

    // An unregistered listener's series go away with it.
    expect((await post('/unregister', `{"instance_id":${W},"model_name":"m"}`)).status).toBe(200);
    const after = await (await fetch(`${ops.url}/metrics`)).text();
    expect(after).not.toContain(W.toString());
  });
});
