/**
 * Loads shared between gateways over NATS (src/gateway/shared-loads.ts): a real nats-server on
 * a loopback port, fake OpenAI engines publishing vLLM KV events, gateways in this process and
 * one `kvindex gateway --nats` process (killed with SIGKILL). Two gateways sharing loads split
 * requests that only load decides across all engines, where two separate ones pile onto the
 * same engines; a dead gateway's loads are freed once its heartbeats stop; malformed messages,
 * an unreachable and a lost NATS are counted and logged, routing goes on, credentials stay out
 * of the logs.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { connect } from 'nats';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Gateway } from '../src/gateway/gateway.js';
import { gatewayPlugin } from '../src/gateway/plugin.js';
import { SharedLoads, type SharedLoadsOptions } from '../src/gateway/shared-loads.js';
import { registerSharedLoadsMetrics } from '../src/gateway/shared-loads-metrics.js';
import { ROUTING_PRESETS } from '../src/router/presets.js';
import { formatActiveSequenceEvent } from '../src/router/sequence-event.js';
import { quietFastify } from '../src/serve/quiet-fastify.js';
import { FakeEngine } from './support/fake-engine.js';
import { captureLog } from './support/log-capture.js';
import { NATS_SKIP_MESSAGE, NatsServer, natsServerInstalled } from './support/nats-server.js';
import { unitRandom } from './support/rng.js';
import { MAIN, ServeProcess } from './support/serve-process.js';
import { until, zmqAvailable } from './support/vllm-publisher.js';

const enabled = natsServerInstalled() && (await zmqAvailable());
if (!natsServerInstalled()) console.warn(NATS_SKIP_MESSAGE);

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

interface Gw {
  gateway: Gateway;
  app: FastifyInstance;
  url: string;
  shared: SharedLoads | null;
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});


const entries = (es: FakeEngine[]) => es.map((e, i) => ({ instanceId: BigInt(i + 1), endpoint: e.endpoint, modelName: 'm', blockSize: 4, tenantId: 'default', dpRank: 0, replayEndpoint: null, url: e.url }));

/**
 * A gateway in this process; with `shared`, sharing loads. Ties between equal costs are broken by
 * the same seeded random source in every gateway, so separate gateways decide alike.
 */
async function startGateway(es: FakeEngine[], shared: SharedLoadsOptions | null, seed = 7): Promise<Gw> {
  const loads = shared === null ? null : new SharedLoads(shared);
  const routing = { ...ROUTING_PRESETS.kv, random: unitRandom(seed), ...(loads === null ? {} : loads.routerOptions()) };
  const gateway = new Gateway({ healthIntervalMs: 200, routing });
  await gateway.start(entries(es));
  loads?.start(gateway);
  const app = quietFastify();
  await gatewayPlugin(app, { gateway });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  for (const e of es) await e.publisher?.subscribed();
  cleanups.push(async () => {
    await app.close();
    await loads?.close();
    await gateway.close();
  });
  return { gateway, app, url, shared: loads };
}

/** Posts a prompt; resolves with the engine header (null if the request failed). */
function send(url: string, prompt: number[], ttftMs: number, signal?: AbortSignal): Promise<string | null> {
  return fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'm', prompt, max_tokens: 1 }), headers: { 'content-type': 'application/json', 'x-fake-ttft-ms': String(ttftMs) }, ...(signal === undefined ? {} : { signal }) })
    .then(async (r) => {
      await r.arrayBuffer();
      return r.headers.get('x-kvindex-worker');
    })
    .catch(() => null);
}

/** Requests in flight per engine (ids 1..n) as the gateway's router counts them. */
function view(g: Gateway, n: number): number[] {
  const seqs = g.registry.router('m', 'default')?.sequences;
  return range(1, n).map((id) => seqs?.load(BigInt(id), 0).activeRequests ?? 0);
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

/** Requests each engine has received since `before`. */
const received = (es: FakeEngine[], before: number[]): number[] => es.map((e, i) => e.seen.length - before[i]!);

describe.skipIf(!enabled)('gateways sharing loads over NATS', () => {
  // Shared by the tests: a server, 4 engines, and the `kvindex gateway --nats` process of the
  // kill test, started here so that its start-up (seconds on a busy host) overlaps the first
  // test. It uses its own namespace, so the first test never hears it.
  let server: NatsServer;
  let es: FakeEngine[];
  let dir: string;
  let cli: ServeProcess | null = null;
  beforeAll(async () => {
    server = await NatsServer.start();
    es = await Promise.all(Array.from({ length: 4 }, () => FakeEngine.start({ model: 'm', blockSize: 4 })));
    dir = mkdtempSync(join(tmpdir(), 'kvgw-shared-'));
    const file = join(dir, 'engines.json');
    writeFileSync(file, JSON.stringify(es.slice(0, 2).map((e, i) => ({ instance_id: i + 1, endpoint: e.endpoint, model_name: 'm', block_size: 4, url: e.url }))));
    if (existsSync(MAIN)) cli = new ServeProcess(['--http', '0', '--engines', file, '--nats', server.url, '--namespace', 'killed', '--loads-heartbeat', '100', '--health-interval', '200'], [], 'gateway');
  });
  afterAll(async () => {
    cli?.signal('SIGKILL');
    await cli?.exited;
    for (const e of es) await e.stop().catch(() => undefined);
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('split requests decided by load alone across all engines, where separate gateways pile onto the same ones', async () => {
    // Expiry 5 s: the clean stop below must be seen well within it (it was 1 s, with 0.9 s for
    // a leave message to cross NATS on a loaded host).
    const opts = (): SharedLoadsOptions => ({ servers: server.url, heartbeatMs: 200, expiryMs: 5_000 });

    // Two bursts of 4 requests, alternating between the gateways, every prompt new (no cache
    // hit anywhere), all in flight together (the engines answer after 3 s: with 0.8 s, a burst
    // slowed 0.8 s by a loaded host would see its first request answered, and its load freed,
    // before its last was decided, which could then go where that load would have kept it away).
    const burst = async (a: Gw, b: Gw, base: number, settle: (sent: number) => Promise<void>): Promise<number[]> => {
      const before = es.map((e) => e.seen.length);
      const answers: Array<Promise<string | null>> = [];
      for (let i = 0; i < 4; i++) {
        answers.push(send((i % 2 === 0 ? a : b).url, range(base + i * 100, 16), 3_000));
        await until(() => sum(received(es, before)) === i + 1, 5_000, `request ${i} at an engine`);
        await settle(i + 1);
      }
      const split = received(es, before);
      await Promise.all(answers);
      return split;
    };

    // Separate gateways: each sees only its own two requests, so both choose the same two engines.
    const a0 = await startGateway(es, null);
    const b0 = await startGateway(es, null);
    const separate = await burst(a0, b0, 10_000, async () => undefined);
    expect([...separate].sort()).toEqual([0, 0, 2, 2]);

    // Sharing: each gateway decides with the other's requests in flight, so one per engine.
    const a = await startGateway(es, opts());
    const b = await startGateway(es, opts());
    expect(await a.shared!.connected()).toBe(true);
    expect(await b.shared!.connected()).toBe(true);
    const shared = await burst(a, b, 20_000, async (sent) => {
      await until(() => sum(view(a.gateway, 4)) === sent && sum(view(b.gateway, 4)) === sent, 5_000, `${sent} requests in both views`);
    });
    expect(shared).toEqual([1, 1, 1, 1]);
    // The frees reached both views; each gateway's own events were skipped, not applied twice.
    await until(() => sum(view(a.gateway, 4)) === 0 && sum(view(b.gateway, 4)) === 0, 5_000, 'frees shared');
    await until(() => a.shared!.stats().own === 6 && b.shared!.stats().own === 6, 5_000, 'own events echoed');
    for (const g of [a, b]) {
      const s = g.shared!.stats();
      expect(s.published).toBe(6); // 2 adds, 2 first tokens, 2 frees
      expect(s.applied).toBe(6);
      expect(s.own).toBe(6);
      expect(s.duplicate + s.unknownRequest + s.unknownWorker + s.malformed).toBe(0);
    }
    // A clean stop says so: the other gateway forgets it at once, not after the expiry.
    expect(a.shared!.stats().peers).toBe(1);
    await b.shared!.close();
    await until(() => a.shared!.stats().peers === 0, 4_500, 'peer gone on leaving');
    expect(a.shared!.stats().expiredPeers).toBe(1);
  });

  it.skipIf(!existsSync(MAIN))('frees the loads of a killed gateway once its heartbeats stop, and only those', async () => {
    const log = captureLog('info');
    const es2 = es.slice(0, 2);
    // Expiry 3 s (was 1 s): A's heartbeats come from a child process, which a loaded host can
    // hold back for a second, and the check right after the kill must come within the expiry.
    const b = await startGateway(es2, { servers: server.url, namespace: 'killed', heartbeatMs: 100, expiryMs: 3_000, logger: log.logger });
    const a = cli!;
    const aUrl = (await a.waitFor('kvindex gateway ready')).address as string;
    await a.waitFor('sharing loads with the other gateways over NATS');
    await until(() => b.shared!.stats().peers === 1, 5_000, 'A heard by B');

    // B's own request in flight, then two of A's (the engines hold them 10 s).
    const own = new AbortController();
    void send(b.url, range(30_000, 16), 10_000, own.signal);
    await until(() => sum(view(b.gateway, 2)) === 1, 5_000, 'B\'s own request');
    void send(aUrl, range(31_000, 16), 10_000);
    void send(aUrl, range(32_000, 16), 10_000);
    await until(() => b.shared!.stats().remoteRequests === 2 && sum(view(b.gateway, 2)) === 3, 5_000, 'A\'s requests seen by B');

    a.signal('SIGKILL');
    await a.exited;
    // Not freed at once: silence shorter than the expiry proves nothing.
    expect(b.shared!.stats().remoteRequests).toBe(2);
    await until(() => b.shared!.stats().remoteRequests === 0, 10_000, 'A\'s loads expired');
    expect(sum(view(b.gateway, 2))).toBe(1); // B's own request is still counted
    expect(b.shared!.stats()).toMatchObject({ peers: 0, expiredPeers: 1, expiredRequests: 2 });
    expect(log.find('a gateway stopped sending heartbeats')).toHaveLength(1);
    own.abort();
    await until(() => sum(view(b.gateway, 2)) === 0, 5_000, 'B\'s own request freed');
  });

  it('counts and ignores malformed messages, and keeps routing while NATS is unreachable or lost, with credentials never logged', async () => {
    const secret = 's3cret/pw';
    const server = await NatsServer.start(['--user', 'kvuser', '--pass', secret]);
    cleanups.push(() => server.stop());
    await server.kill(); // unreachable at start
    const es2 = es.slice(0, 2);
    const log = captureLog('debug');
    const withCreds = `nats://kvuser:${encodeURIComponent(secret)}@127.0.0.1:${server.port}`;
    const g = await startGateway(es2, { servers: withCreds, heartbeatMs: 100, expiryMs: 300, retryMs: 150, logger: log.logger });
    const registry = new Registry();
    registerSharedLoadsMetrics(registry, g.shared!);
    const metric = async (name: string): Promise<string> => (await registry.metrics()).split('\n').filter((l) => l.startsWith(name)).join('\n');

    await until(() => g.shared!.state === 'disconnected', 5_000, 'unreachable');
    expect(await send(g.url, range(40_000, 16), 0)).not.toBeNull(); // routed with the local view
    await new Promise((r) => setTimeout(r, 400)); // several retries: still one line
    expect(log.find('NATS unreachable')).toHaveLength(1);
    expect(await metric('kvindex_gateway_shared_loads_connected')).toContain('kvindex_gateway_shared_loads_connected 0');

    await server.restart();
    expect(await g.shared!.connected()).toBe(true);

    const nc = await connect({ servers: server.url, user: 'kvuser', pass: secret });
    cleanups.push(() => nc.close());
    const subject = g.shared!.subjects.sequences;
    const bad = [
      'not json',
      '{"request_id":"x"}',
      `{"request_id":"x","worker":{"worker_id":1,"dp_rank":0},"data":{"AddRequest":{"token_sequence":[18446744073709551616]}},"router_id":5}`,
      '{"request_id":"x","worker":{"worker_id":1,"dp_rank":0},"data":"Bogus","router_id":5}',
    ];
    for (const m of bad) nc.publish(subject, new TextEncoder().encode(m));
    nc.publish(g.shared!.subjects.heartbeat, new TextEncoder().encode('{"router_id":-1,"interval_ms":100}'));
    // Then a well-formed add from a peer that does not send heartbeats (a Dynamo router).
    const add = formatActiveSequenceEvent({ requestId: 'dyn-1', workerId: 2n, dpRank: 0, routerId: 99n, loraName: null, data: { type: 'add_request', blockHashes: new BigUint64Array([1n, 2n]), trackPrefillTokens: true, expectedOutputTokens: null, prefillTokens: null } });
    nc.publish(subject, new TextEncoder().encode(add));
    await nc.flush();
    await until(() => g.shared!.stats().applied === 1, 5_000, 'the good event applied');
    expect(g.shared!.stats().malformed).toBe(5);
    expect(view(g.gateway, 2)).toEqual([0, 1]);
    expect(log.find('malformed shared-loads message ignored')).toHaveLength(1); // rate-limited
    expect(await metric('kvindex_gateway_shared_loads_events_total{result="malformed"}')).toContain(' 5');
    // A peer without heartbeats is not expired by silence (only by the routers' request TTL).
    await new Promise((r) => setTimeout(r, 500));
    expect(view(g.gateway, 2)).toEqual([0, 1]);

    await server.kill(); // lost
    await until(() => g.shared!.state === 'disconnected', 5_000, 'lost');
    expect(await send(g.url, range(41_000, 16), 0)).not.toBeNull();
    expect(log.find('NATS connection lost')).toHaveLength(1);
    await server.restart();
    expect(await g.shared!.connected()).toBe(true);
    expect(log.find('sharing loads with the other gateways over NATS')).toHaveLength(1);
    expect(log.find('NATS back: sharing loads again')).toHaveLength(1);
    expect(g.shared!.stats().outages).toBe(2);
    expect(await metric('kvindex_gateway_shared_loads_outages_total')).toContain('kvindex_gateway_shared_loads_outages_total 2');

    const all = log.lines().join('\n');
    expect(all).not.toContain(secret);
    expect(all).not.toContain(encodeURIComponent(secret));
    expect(all).toContain('***@127.0.0.1');
  });
});

