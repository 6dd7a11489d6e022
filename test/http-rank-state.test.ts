/**
 * What /workers, /ready and the metrics say of each registered rank, against real ZMQ publishers:
 * `connecting` while nothing listens at the endpoint (and again once the engine goes away),
 * `active` as soon as a publisher is there (before it publishes anything), `excluded` with the
 * reason and since when after an unreplayable gap; and the way back from such a gap: after the
 * readmission delay the worker scores again from what it stored since the gap (and only that),
 * while without readmission it stays out.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { engineReadiness } from '../src/http/engine-readiness.js';
import { EngineRegistry, type EngineRegistryOptions } from '../src/http/engine-registry.js';
import { registerIndexerRoutes } from '../src/http/indexer-routes.js';
import { parseJsonLossless, type JsonObject } from '../src/protocol/json-value.js';
import { ZmqServeMetrics } from '../src/serve/zmq-metrics.js';
import { parsePrometheusText, value } from './support/prometheus-text.js';
import { closedEndpoint, until, VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';

const BS = 4;
const W = 12_345_678_901_234_567_890n;
const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

async function server(o: EngineRegistryOptions = {}): Promise<{ url: string; registry: EngineRegistry }> {
  const app: FastifyInstance = Fastify({ logger: false });
  const registry = new EngineRegistry({ replayTimeoutMs: 300, ...o });
  await registerIndexerRoutes(app, registry);
  await app.listen({ host: '127.0.0.1', port: 0 });
  open.push({ close: async () => { await registry.close(); await app.close(); } });
  return { url: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`, registry };
}

async function get(url: string, path: string): Promise<{ status: number; json: JsonObject & JsonObject[] }> {
  const res = await fetch(url + path);
  return { status: res.status, json: parseJsonLossless(await res.text()) as JsonObject & JsonObject[] };
}

async function register(url: string, endpoint: string, replay: string | null = null): Promise<void> {
  const body = `{"instance_id":${W},"endpoint":"${endpoint}","model_name":"m","block_size":${BS}${replay === null ? '' : `,"replay_endpoint":"${replay}"`}}`;
  const res = await fetch(`${url}/register`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  expect(res.status).toBe(201);
}

/** The listener of rank 0 of the one registered worker, as /workers writes it. */
async function listener(url: string): Promise<JsonObject> {
  const workers = (await get(url, '/workers')).json;
  return (workers[0]!.listeners as JsonObject)['0'] as JsonObject;
}

const toks = (n: number, salt: number): number[] => Array.from({ length: n * BS }, (_, i) => salt + i);

/** A chain of n blocks: external hashes ext0.., tokens from `salt`, under `parent`. */
function chain(n: number, salt: number, ext0: bigint, parent: bigint | null = null): { stored: { hashes: bigint[]; parent: bigint | null; tokens: number[]; blockSize: number } } {
  return { stored: { hashes: Array.from({ length: n }, (_, i) => ext0 + BigInt(i)), parent, tokens: toks(n, salt), blockSize: BS } };
}

/** W's rank-0 score (tokens) for these tokens, 0 when absent. */
async function score(url: string, tokens: number[]): Promise<number> {
  const res = await fetch(`${url}/query`, { method: 'POST', body: JSON.stringify({ token_ids: tokens, model_name: 'm' }), headers: { 'content-type': 'application/json' } });
  const scores = (parseJsonLossless(await res.text()) as { scores: Record<string, Record<string, bigint>> }).scores;
  return Number(scores[W.toString()]?.['0'] ?? 0n);
}

const isoRecent = (t: unknown): void => {
  expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  expect(Math.abs(Date.parse(t as string) - Date.now())).toBeLessThan(60_000);
};

describe.skipIf(!(await zmqAvailable()))('the real state of each registered rank', () => {
  it('connecting while nothing listens, active once a publisher is there (before any message), connecting again when it leaves', async () => {
    const { url, registry } = await server();
    const endpoint = await closedEndpoint();
    await register(url, endpoint);
    const l = await listener(url);
    // Not "active": Dynamo's word is pending, kvindex's state says why.
    expect(l).toMatchObject({ endpoint, status: 'pending', state: 'connecting', reason: 'never_connected' });
    isoRecent(l.since);
    expect((await get(url, '/workers')).json[0]).toMatchObject({ status: 'pending', state: 'connecting' });
    // /ready names it; by default a 200 (an engine-side condition), 503 when strict.
    const ready = await get(url, '/ready');
    expect(ready.status).toBe(200);
    expect(ready.json).toMatchObject({ ready: true, not_active: [{ instance_id: W.toString(), model_name: 'm', tenant_id: 'default', dp_rank: 0n, endpoint, state: 'connecting', reason: 'never_connected' }] });
    expect(ready.json.reason).toContain(`${W}/0 (${endpoint}) connecting`);
    expect(engineReadiness(registry, true)).toMatchObject({ ready: false, reason: expect.stringContaining('not active') as unknown });
    const metrics = new ZmqServeMetrics(registry, false);
    const labels = { instance_id: W.toString(), dp_rank: '0', model: 'm', tenant: 'default' };
    let all = parsePrometheusText((await metrics.scrape()).body);
    expect(value(all, 'kvindex_zmq_rank_state', { ...labels, state: 'connecting' })).toBe(1);
    expect(value(all, 'kvindex_zmq_rank_state', { ...labels, state: 'active' })).toBe(0);

    // The engine comes up on that endpoint and publishes nothing: connected is enough.
    const pub = await VllmPublisher.start({ endpoint });
    open.push(pub);
    await until(() => registry.listeners()[0]!.source.health()[0]!.state === 'active', 15_000, 'active');
    expect(registry.listeners()[0]!.source.stats().messages).toBe(0);
    expect(await listener(url)).toMatchObject({ status: 'active', state: 'active', reason: null, since: null });
    expect(await get(url, '/ready')).toMatchObject({ status: 200, json: { ready: true, reason: '', not_active: [] } });
    expect(engineReadiness(registry, true).ready).toBe(true);
    all = parsePrometheusText((await metrics.scrape()).body);
    expect(value(all, 'kvindex_zmq_rank_state', { ...labels, state: 'active' })).toBe(1);
    expect(value(all, 'kvindex_zmq_rank_state', { ...labels, state: 'connecting' })).toBe(0);

    // The engine goes away.
    pub.close();
    await until(() => registry.listeners()[0]!.source.health()[0]!.state === 'connecting', 15_000, 'connecting again');
    expect(await listener(url)).toMatchObject({ status: 'pending', state: 'connecting', reason: 'disconnected' });
  });

  it('an unreplayable gap: excluded with reason and since; after the readmission delay it scores again from what it stored since the gap', async () => {
    const { url, registry } = await server({ readmitAfterMs: 1_500 });
    const pub = await VllmPublisher.start();
    open.push(pub);
    await register(url, pub.endpoint, await closedEndpoint()); // the replay socket is not there
    await pub.subscribed();
    const source = registry.listeners()[0]!.source;
    await pub.publish([chain(3, 0, 100n)]); // a: before the gap
    expect(await (async () => { await until(() => source.stats().batches === 1); return score(url, toks(3, 0)); })()).toBe(12);
    pub.drop([chain(1, 500, 200n)]); // lost, and the replay cannot bring it back
    await pub.publish([chain(2, 1000, 300n)]); // c: after the gap
    await until(() => source.stats().gapsUnreplayable === 1 && source.stats().batches === 2, 15_000, 'the gap');

    const l = await listener(url);
    expect(l).toMatchObject({ status: 'pending', state: 'excluded', reason: 'unreplayable_gap' });
    isoRecent(l.since);
    expect(Date.parse(l.readmit_at as string) - Date.parse(l.since as string)).toBeGreaterThanOrEqual(1_400);
    expect((await get(url, '/ready')).json).toMatchObject({ ready: true, not_active: [{ state: 'excluded', reason: 'unreplayable_gap', since: l.since, readmit_at: l.readmit_at }] });
    // Out of scores: neither what was stored before the gap nor after it.
    expect(await score(url, toks(3, 0))).toBe(0);
    expect(await score(url, toks(2, 1000))).toBe(0);
    // While excluded the source goes on applying: a store extending c (stored after the gap) ...
    await pub.publish([chain(1, 2000, 400n, 301n)]);
    // ... and one extending a (stored before the gap, cleared): its parent is unknown, it is lost.
    await pub.publish([chain(1, 3000, 500n, 102n)]);
    await until(() => source.stats().batches === 4);
    expect(source.stats().statuses.parent_block_not_found).toBe(1);

    await until(() => source.health()[0]!.state === 'active', 15_000, 'readmission');
    expect(source.stats().readmissions).toBe(1);
    expect(await listener(url)).toMatchObject({ status: 'active', state: 'active' });
    expect((await get(url, '/ready')).json).toMatchObject({ ready: true, not_active: [] });
    // Back in: what it stored since the gap scores, with its extension.
    expect(await score(url, [...toks(2, 1000), ...toks(1, 2000)])).toBe(12);
    // The cost: blocks stored before the gap score nothing, and neither does the store that
    // extended them (the engine holds all 4 blocks of a + its extension).
    expect(await score(url, toks(3, 0))).toBe(0);
    expect(await score(url, [...toks(3, 0), ...toks(1, 3000)])).toBe(0);
    // Until the engine stores them again (after evicting them, or in a new sequence root).
    await pub.publish([chain(3, 0, 100n)]);
    await until(() => source.stats().batches === 5);
    expect(await score(url, toks(3, 0))).toBe(12);
  });

  it('without readmission an excluded worker stays out until the engine clears', async () => {
    const { url, registry } = await server({ readmitAfterMs: null });
    const pub = await VllmPublisher.start();
    open.push(pub);
    await register(url, pub.endpoint); // no replay endpoint at all
    await pub.subscribed();
    const source = registry.listeners()[0]!.source;
    await pub.publish([chain(2, 0, 100n)]);
    pub.drop([chain(1, 500, 200n)]);
    await pub.publish([chain(2, 1000, 300n)]);
    await until(() => source.stats().gapsUnreplayable === 1 && source.stats().batches === 2, 15_000, 'the gap');
    const l = await listener(url);
    expect(l).toMatchObject({ state: 'excluded', reason: 'unreplayable_gap' });
    expect(l.readmit_at).toBeUndefined();
    // Longer than the delay the other test readmits after: still out.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(source.health()[0]).toMatchObject({ state: 'excluded', since: Date.parse(l.since as string) });
    expect(await score(url, toks(2, 1000))).toBe(0);
    expect(source.stats().readmissions).toBe(0);
    // The engine's AllBlocksCleared brings it back.
    await pub.publish(['cleared', chain(2, 1000, 300n)]);
    await until(() => source.stats().batches === 3);
    expect(source.health()[0]).toMatchObject({ state: 'active' });
    expect(await score(url, toks(2, 1000))).toBe(8);
  });
});
