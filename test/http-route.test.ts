/**
 * Routing decisions over the standalone indexer's HTTP API (POST /route, /mark_prefill, /free)
 * with a real HTTP client against fastify on 127.0.0.1, fed by real ZMQ publishers following
 * vLLM's wire format: the decision equals a KvRouter over an in-process RadixTree fed the same
 * events, in-flight requests change later decisions, and bad requests change nothing.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { computeBlockHashes } from '../src/hash/block-hash.js';
import { EngineRegistry } from '../src/http/engine-registry.js';
import { registerIndexerRoutes } from '../src/http/indexer-routes.js';
import { parseJsonLossless, type JsonObject } from '../src/protocol/json-value.js';
import { KvRouter } from '../src/router/kv-router.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';

const BS = 4;
const W1 = 18_446_744_073_709_551_557n; // above 2^53: must stay exact as a string
const W2 = 7n;
const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

async function server(token: string | null = null): Promise<string> {
  const app: FastifyInstance = Fastify({ logger: false });
  const registry = new EngineRegistry({ replayTimeoutMs: 300 });
  await registerIndexerRoutes(app, registry, { token });
  await app.listen({ host: '127.0.0.1', port: 0 });
  open.push({ close: async () => { await registry.close(); await app.close(); } });
  return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
}

async function post(url: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: JsonObject }> {
  const res = await fetch(url + path, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  return { status: res.status, json: parseJsonLossless(await res.text()) as JsonObject };
}

const tokens = (n: number): number[] => Array.from({ length: n * BS }, (_, i) => 1000 + i);

describe.skipIf(!(await zmqAvailable()))('routing over the standalone indexer HTTP API', () => {
  it('routes to the worker holding the prefix, exactly as a KvRouter over the same events; in-flight load moves the next decision', async () => {
    const url = await server();
    const p1 = await VllmPublisher.start();
    const p2 = await VllmPublisher.start();
    open.push(p1, p2);
    for (const [id, p] of [[W1, p1], [W2, p2]] as const) {
      const r = await post(url, '/register', `{"instance_id":${id},"endpoint":"${p.endpoint}","model_name":"m","block_size":${BS}}`);
      expect(r.status).toBe(201);
    }
    await Promise.all([p1.subscribed(), p2.subscribed()]);
    const t = tokens(8);
    const local = computeBlockHashes(t, BS);
    const ext = Array.from({ length: 6 }, (_, i) => 2n ** 63n + BigInt(i));
    await p1.publish([{ stored: { hashes: ext, tokens: t.slice(0, 6 * BS), blockSize: BS } }]);
    const tree = new RadixTree();
    tree.applyEvent({ workerId: W1, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: ext.map((h, i) => ({ blockHash: h, tokensHash: local[i]! })) } } });
    const ref = new KvRouter({ indexer: tree, blockSize: BS, workers: [{ workerId: W1, dpRank: 0 }, { workerId: W2, dpRank: 0 }] });

    // Poll until the events are applied (they arrive asynchronously).
    let d: JsonObject = {};
    for (const end = Date.now() + 15_000; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) {
      const r = await post(url, '/query', { token_ids: t, model_name: 'm' });
      if (JSON.stringify((r.json['scores'] as JsonObject)[String(W1)], (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x)) === '{"0":"24"}') break;
    }
    const r1 = await post(url, '/route', { token_ids: t, model_name: 'm', request_id: 'a' });
    expect(r1.status).toBe(200);
    d = r1.json;
    const want = ref.route(t, { requestId: 'a' });
    expect(d['worker_id']).toBe(String(W1)); // exact above 2^53
    expect(d['worker_id']).toBe(String(want.workerId));
    expect(Number(d['overlap_blocks'])).toBe(6);
    expect(Number(d['required_blocks'])).toBe(want.requiredBlocks);
    expect((d['overlaps'] as bigint[]).map(Number)).toEqual(Array.from(want.overlaps));
    expect((d['costs'] as unknown[]).map(Number)).toEqual(Array.from(want.costs));

    // The same id again while in flight: 409, nothing recorded.
    expect((await post(url, '/route', { token_ids: t, model_name: 'm', request_id: 'a' })).status).toBe(409);
    // More requests on W1 load it: with the overlap credit off, the next goes to the idle W2.
    const r2 = await post(url, '/route', { token_ids: t, model_name: 'm', request_id: 'b', overrides: { overlap_score_credit: 0 } });
    expect(r2.json['worker_id']).toBe(String(W2));

    expect((await post(url, '/mark_prefill', { request_id: 'a', model_name: 'm' })).json).toEqual({ ok: true });
    expect((await post(url, '/free', { request_id: 'a', model_name: 'm' })).json).toEqual({ ok: true });
    expect((await post(url, '/free', { request_id: 'a', model_name: 'm' })).json).toEqual({ ok: false });
  });

  it('answers bad requests with 4xx JSON errors and records nothing', async () => {
    const url = await server('s3cret');
    const auth = { authorization: 'Bearer s3cret' };
    const p = await VllmPublisher.start();
    open.push(p);
    expect((await post(url, '/register', `{"instance_id":1,"endpoint":"${p.endpoint}","model_name":"m","block_size":${BS}}`, auth)).status).toBe(201);
    const t = tokens(2);
    expect((await post(url, '/route', { token_ids: t, model_name: 'm' })).status).toBe(401);
    expect((await post(url, '/route', { token_ids: t, model_name: 'other' }, auth)).status).toBe(404);
    for (const bad of ['{', '[]', '{"token_ids":"x","model_name":"m"}', '{"token_ids":[-1],"model_name":"m"}', '{"token_ids":[1],"model_name":"m","overrides":{"router_temperature":-1}}', '{"token_ids":[1],"model_name":"m","overrides":{"prefill_load_scale":1e308}}', '{"token_ids":[1],"model_name":"m","expected_output_tokens":"many"}']) {
      const r = await post(url, '/route', bad, auth);
      expect(r.status, bad).toBe(400);
      expect(typeof r.json['error']).toBe('string');
    }
    expect((await post(url, '/free', { model_name: 'm' }, auth)).status).toBe(400);
    // None of those was recorded: a request routed now is the only one in flight.
    const ok = await post(url, '/route', { token_ids: t, model_name: 'm', request_id: 'x' }, auth);
    expect(ok.status).toBe(200);
    expect((await post(url, '/free', { request_id: 'x', model_name: 'm' }, auth)).json).toEqual({ ok: true });
  });
});
