/**
 * `kvindex gateway --index`: remote lookups against real `kvindex serve --http` replicas (the
 * built CLI) fed by the test's vLLM-format publishers on loopback. The gateway with remote
 * lookups decides as a gateway with its own listeners on the same events; a paused replica
 * (SIGSTOP) costs a hedge, never an error; a replica answering garbage or recovering
 * (503 KVX_RECOVERING) is skipped and counted; with every replica down (closed ports) each
 * request is still routed, by load, and counted as a fail-open.
 */
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Gateway } from '../src/gateway/gateway.js';
import { RemoteIndexClient, readScores } from '../src/gateway/remote-index.js';
import { Endpoint, readOpenAiRequest } from '../src/gateway/openai-request.js';
import type { EngineEntry } from '../src/gateway/engine-catalog.js';
import { readIndexArgs } from '../src/cli/gateway-index.js';
import { FakeEngine } from './support/fake-engine.js';
import { ServeProcess } from './support/serve-process.js';
import { VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';
import { freePort as closedPort } from './support/nats-server.js';

const BS = 4;
const U64_MAX = 18446744073709551615n;
const IDS = [1n, 2n, U64_MAX];
const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

const request = (prompt: number[]) => readOpenAiRequest(Endpoint.Completions, Buffer.from(JSON.stringify({ model: 'm', prompt, max_tokens: 1 })));

describe.skipIf(!(await zmqAvailable()))('kvindex gateway --index (remote lookups)', () => {
  const publishers: VllmPublisher[] = [];
  const engines: FakeEngine[] = [];
  const replicas: ServeProcess[] = [];
  const urls: string[] = [];
  let hostile: Server;
  let hostileUrl = '';
  let local: Gateway;
  let entries: EngineEntry[] = [];
  /** Prompts with one engine holding the longest prefix, and that engine's overlap (blocks). */
  const prompts: Array<{ tokens: number[]; worker: bigint; blocks: number }> = [];
  /** `kvindex gateway --index` over two closed ports, started with the replicas (start-up is most of the time). */
  let downGateway: ServeProcess;
  let dir = '';

  beforeAll(async () => {
    // A hostile "replica": every answer a 200 that is not a scores document (also the bad peer
    // of the recovering replica below: its /dump is garbage, so it stays recovering).
    hostile = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"scores":{"-1":{"0":"x"}}'));
    await new Promise<void>((r) => hostile.listen(0, '127.0.0.1', () => r()));
    hostileUrl = `http://127.0.0.1:${(hostile.address() as { port: number }).port}`;
    for (const args of [[], [], ['--peers', hostileUrl]]) replicas.push(new ServeProcess(['--http', '127.0.0.1:0', ...args]));
    for (let i = 0; i < 3; i++) publishers.push(await VllmPublisher.start());
    for (let i = 0; i < 3; i++) engines.push(await FakeEngine.start({ model: 'm', blockSize: BS, events: false }));
    dir = mkdtempSync(join(tmpdir(), 'kvindex-remote-'));
    const file = join(dir, 'engines.json');
    writeFileSync(file, `[${engines.map((e, i) => `{"instance_id":${IDS[i]},"endpoint":"tcp://127.0.0.1:1","model_name":"m","block_size":${BS},"url":"${e.url}"}`).join(',')}]`);
    const down = `http://127.0.0.1:${await closedPort()},http://127.0.0.1:${await closedPort()}`;
    downGateway = new ServeProcess(['--http', '127.0.0.1:0', '--engines', file, '--index', down, '--metrics', '127.0.0.1:0'], [], 'gateway');
    for (const r of replicas) urls.push((await r.waitFor('kvindex serve ready'))['address'] as string);
    entries = IDS.map((id, i) => ({ instanceId: id, endpoint: publishers[i]!.endpoint, modelName: 'm', blockSize: BS, tenantId: 'default', dpRank: 0, replayEndpoint: null, url: engines[i]!.url }));
    for (const url of urls.slice(0, 2)) {
      for (const e of entries) {
        const res = await fetch(`${url}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"instance_id":${e.instanceId},"endpoint":"${e.endpoint}","model_name":"m","block_size":${BS}}` });
        expect(res.status).toBe(201);
      }
    }
    local = new Gateway({ healthIntervalMs: 60_000 });
    await local.start(entries);

    // Engine i holds its own 8-block prefix; a shared prefix is held 2, 6 and 4 blocks deep.
    const shared = range(90_000, 6 * BS);
    const depth = [2, 6, 4];
    let hash = 1_000n;
    for (let i = 0; i < 3; i++) {
      const own = range(10_000 * (i + 1), 8 * BS);
      const sharedPart = shared.slice(0, depth[i]! * BS);
      for (const tokens of [own, sharedPart]) {
        const hashes = Array.from({ length: tokens.length / BS }, () => hash++);
        await publishers[i]!.publish([{ stored: { hashes, parent: null, tokens, blockSize: BS } }]);
      }
      prompts.push({ tokens: [...own, ...range(7_000 + i * 100, 9)], worker: IDS[i]!, blocks: 8 });
      prompts.push({ tokens: [...own.slice(0, 5 * BS), 3, 3, 3, 3, 3], worker: IDS[i]!, blocks: 5 });
    }
    prompts.push({ tokens: [...shared, 5, 5, 5], worker: 2n, blocks: 6 });
    // Every subscriber (the local gateway and both replicas) has every block (a late subscriber
    // misses the first batches: they are published again until all have them).
    const probe = new RemoteIndexClient({ replicas: urls.slice(0, 2), deadlineMs: 1_000, hedgeMs: 1_000 });
    try {
      const lastHeld = async (): Promise<boolean> => {
        for (const p of prompts) {
          const l = local.registry.index('m', 'default')!.index.queryTokens(Uint32Array.from(p.tokens), {}).scores.get(p.worker)?.get(0) ?? 0;
          if (l < p.blocks) return false;
        }
        for (const url of urls.slice(0, 2)) {
          for (const p of prompts) {
            const res = await fetch(`${url}/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token_ids: p.tokens, model_name: 'm' }) });
            const scores = readScores(await res.text(), BS);
            if ((scores?.get(p.worker) ?? 0) < p.blocks) return false;
          }
        }
        return true;
      };
      for (let round = 0; !(await lastHeld()); round++) {
        if (round > 100) throw new Error('the events did not reach every index');
        await new Promise((r) => setTimeout(r, 50));
        if (round % 4 === 3) {
          hash = 1_000n;
          for (let i = 0; i < 3; i++) {
            for (const tokens of [range(10_000 * (i + 1), 8 * BS), shared.slice(0, depth[i]! * BS)]) {
              await publishers[i]!.publish([{ stored: { hashes: Array.from({ length: tokens.length / BS }, () => hash++), parent: null, tokens, blockSize: BS } }]);
            }
          }
        }
      }
    } finally {
      await probe.close();
    }
  }, 30_000);

  afterAll(async () => {
    for (const r of replicas) r.signal('SIGCONT');
    for (const r of replicas) r.signal('SIGTERM');
    downGateway?.signal('SIGTERM');
    await Promise.all(replicas.map((r) => r.exited));
    await downGateway?.exited;
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
    await local?.close();
    for (const e of engines) await e.stop().catch(() => undefined);
    for (const p of publishers) p.close();
    await new Promise<void>((r) => hostile.close(() => r()));
  });

  /** A gateway asking `replicaUrls` (in-process; its replicas are the real processes). */
  async function remoteGateway(replicaUrls: string[], deadlineMs = 2_000, hedgeMs = 40): Promise<Gateway> {
    // Silent 50 ms (owing an answer, none came): the default, 10 deadlines, is 20 s here. The
    // deadline is 2 s, not 400 ms: these tests assert no lookup fails open, and a replica
    // process on a loaded 2-core host can take longer than 400 ms to answer. The attempt
    // timeout stays 10 deadlines away, so "at most one deadline" still tells it apart.
    const gw = new Gateway({ healthIntervalMs: 60_000, remoteIndex: new RemoteIndexClient({ replicas: replicaUrls, deadlineMs, hedgeMs, silenceMs: 50, attemptTimeoutMs: 10 * deadlineMs }) });
    await gw.start(entries);
    return gw;
  }

  it('decides as a gateway with its own listeners on the same events (exact u64 ids)', async () => {
    const remote = await remoteGateway(urls.slice(0, 2));
    try {
      for (const p of prompts) {
        const a = await local.pickEngine(request(p.tokens));
        const b = await remote.pickEngine(request(p.tokens));
        local.free(a);
        remote.free(b);
        expect([a.engine.instanceId, a.decision.overlapBlocks]).toEqual([p.worker, p.blocks]);
        expect([b.engine.instanceId, b.decision.overlapBlocks, b.indexFailOpen]).toEqual([p.worker, p.blocks, false]);
      }
      const s = remote.remote!.client.stats;
      expect(s.lookups).toBe(prompts.length);
      expect(s.answered).toBe(prompts.length);
      expect(Object.values(s.failOpen).reduce((x, y) => x + y, 0)).toBe(0);
      // Round robin: both replicas answered.
      expect(s.replicas.map((r) => r.answered > 0)).toEqual([true, true]);
    } finally {
      await remote.close();
    }
  });

  it('a paused replica (SIGSTOP) costs at most one deadline per request, never an error: the other one answers', async () => {
    const deadlineMs = 2_000;
    const remote = await remoteGateway(urls.slice(0, 2), deadlineMs, 40);
    replicas[0]!.signal('SIGSTOP');
    try {
      for (let round = 0; round < 2; round++) {
        for (const p of prompts) {
          const t0 = performance.now();
          const b = await remote.pickEngine(request(p.tokens));
          const ms = performance.now() - t0;
          remote.free(b);
          expect([b.engine.instanceId, b.decision.overlapBlocks, b.indexFailOpen]).toEqual([p.worker, p.blocks, false]);
          expect(ms).toBeLessThan(deadlineMs + 300); // not the 20 s attempt timeout, nor a hang
        }
      }
      const s = remote.remote!.client.stats;
      const [a, b] = s.replicas;
      expect(Object.values(s.failOpen).reduce((x, y) => x + y, 0)).toBe(0);
      expect(a!.answered).toBe(0);
      // Lookups ended without its answer while it was silent for 50 ms: backed off (then probed
      // again after 100 ms, 200 ms, ...): asked a handful of times over the whole run, not per
      // request. Each back-off follows at most 3 attempts (missesBeforeBackoff; a probe starts a
      // fresh count), so attempts <= 3 * (back-offs + 1): 6 on an idle host (one back-off, as
      // the fixed bound of 6 said), and more only where the run outlasted more back-offs (slow
      // lookups on a loaded host), not per request: asked per request, it would have none.
      expect(a!.failures.timeout).toBeGreaterThanOrEqual(1);
      expect(a!.attempts).toBeLessThanOrEqual(3 * (a!.backoffs + 1));
      expect(b!.answered).toBe(2 * prompts.length);
      // Each lookup asking A first was answered by B, second (a hedge to A after a slow B is not).
      expect(s.secondAnswered).toBeGreaterThanOrEqual(1);
      expect(s.secondAnswered).toBeLessThanOrEqual(a!.attempts);
    } finally {
      replicas[0]!.signal('SIGCONT');
      await remote.close();
    }
  });

  it('skips and counts a replica answering garbage and one recovering (503 KVX_RECOVERING), and routes as before', async () => {
    const recovering = urls[2]!;
    const gate = await fetch(`${recovering}/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"token_ids":[1,2,3,4],"model_name":"m"}' });
    expect([gate.status, ((await gate.json()) as { code: string }).code]).toEqual([503, 'KVX_RECOVERING']);
    const remote = await remoteGateway([hostileUrl, recovering, urls[1]!]);
    try {
      for (const p of prompts) {
        const b = await remote.pickEngine(request(p.tokens));
        remote.free(b);
        expect([b.engine.instanceId, b.decision.overlapBlocks, b.indexFailOpen]).toEqual([p.worker, p.blocks, false]);
      }
      const [g, r, good] = remote.remote!.client.stats.replicas;
      expect(g!.failures.garbage).toBeGreaterThanOrEqual(1);
      expect(g!.answered).toBe(0);
      expect(r!.failures.recovering).toBeGreaterThanOrEqual(1);
      expect(r!.answered).toBe(0);
      expect(good!.answered).toBe(prompts.length);
    } finally {
      await remote.close();
    }
  });

  it('with every replica down (closed ports) routes every request by load and counts each fail-open (kvindex gateway --index)', async () => {
    const gw = downGateway;
    {
      const address = (await gw.waitFor('kvindex gateway ready'))['address'] as string;
      const metricsUrl = (await gw.waitFor('metrics, health and readiness served over HTTP'))['metricsUrl'] as string;
      // 12 requests, then more (up to 64) until two engines were seen: the engines are idle, so
      // ties break at random, and 12 all on one of 3 engines has probability 3^-11 = 5.6e-6 (64:
      // 3^-63). Every request counts below, however many were sent.
      let n = 0;
      const workers = new Set<string>();
      for (; n < 12 || (n < 64 && workers.size < 2); n++) {
        const res = await fetch(`${address}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt: prompts[n % prompts.length]!.tokens, max_tokens: 1 }) });
        expect(res.status).toBe(200);
        expect([res.headers.get('x-kvindex-overlap-blocks'), res.headers.get('x-kvindex-index')]).toEqual(['0', 'fail-open']);
        workers.add(res.headers.get('x-kvindex-worker')!);
        await res.text();
      }
      expect(workers.size).toBeGreaterThan(1); // by load (ties at random), not all to one engine
      const text = await (await fetch(`${metricsUrl}/metrics`)).text();
      const failOpen = [...text.matchAll(/^kvindex_gateway_index_fail_open_total\{reason="[a-z_]+"\} (\d+)$/gm)].reduce((k, m) => k + Number(m[1]), 0);
      expect(failOpen).toBe(n);
      expect(text).toMatch(new RegExp(`^kvindex_gateway_index_lookups_total ${n}$`, 'm'));
      // Still ready: fail-open routes by load.
      expect((await fetch(`${address}/ready`)).status).toBe(200);
      // One rate-limited WARN line for all the fail-opens, not one per request.
      expect(gw.lines.filter((l) => l.msg === 'index lookups failed open: routed by load alone')).toHaveLength(1);
      expect(gw.lines.some((l) => l.msg === 'index replica failed: skipped for a while' && l['failure'] === 'error')).toBe(true);
    }
    gw.signal('SIGTERM');
    expect(await gw.exited).toBe(0);
  });
});

describe('readScores: what a replica answers', () => {
  it('reads worker -> best blocks over its ranks, u64 ids exact', () => {
    const s = readScores('{"scores":{"18446744073709551615":{"0":32,"1":48},"7":{"0":16}},"frequencies":[],"tree_sizes":{}}', 16);
    expect(s).toEqual(new Map([[U64_MAX, 3], [7n, 1]]));
  });

  it('refuses anything else (null, never a throw)', () => {
    for (const bad of ['', 'garbage', '[]', '{}', '{"scores":[]}', '{"scores":{"-1":{"0":16}}}', '{"scores":{"18446744073709551616":{"0":16}}}',
      '{"scores":{"01":{"0":16}}}', '{"scores":{"7":{"0":17}}}', '{"scores":{"7":{"0":"16"}}}', '{"scores":{"7":{"x":16}}}', '{"scores":{"7":[16]}}', '{"scores":{"7":{"0":-16}}}']) {
      expect(readScores(bad, 16), bad).toBeNull();
    }
  });
});

describe('kvindex gateway --index flags', () => {
  it('reads the replicas, the deadline (default 2) and the hedge (default: the client\'s)', () => {
    expect(readIndexArgs({ index: 'http://127.0.0.1:8090, http://127.0.0.1:8091' })).toMatchObject({ replicas: ['http://127.0.0.1:8090', 'http://127.0.0.1:8091'], deadlineMs: 2, hedgeMs: null, register: true });
    expect(readIndexArgs({ index: 'http://a:1', 'index-deadline-ms': '5', 'index-hedge-ms': '2', 'index-register': 'off', 'index-token': 's' })).toEqual({ replicas: ['http://a:1'], deadlineMs: 5, hedgeMs: 2, register: false, token: 's' });
    expect(readIndexArgs({})).toBeNull();
    expect(new RemoteIndexClient({ replicas: ['http://a:1'] }).hedgeMs).toBe(1);
  });

  it('refuses bad values with a usage error naming the flag', () => {
    const bad: Array<[Record<string, string>, string]> = [
      [{ 'index-deadline-ms': '2' }, '--index-deadline-ms: only with --index'],
      [{ 'index-token': 's' }, '--index-token: only with --index'],
      [{ index: 'http://a:1', 'index-register': 'yes' }, '--index-register'],
      [{ index: 'http://a:1', 'index-deadline-ms': '0' }, '--index-deadline-ms'],
      [{ index: 'http://a:1', 'index-hedge-ms': '1.5' }, '--index-hedge-ms'],
      [{ index: 'tcp://a:1' }, '--index: replica'],
      [{ index: 'http://user:secret@a:1' }, '--index: replica'],
      [{ index: 'http://a:1,http://a:1/' }, 'listed twice'],
      [{ index: ',' }, '--index'],
      [{ index: 'http://a:1', topic: 'x' }, '--topic'],
    ];
    for (const [values, message] of bad) expect(() => readIndexArgs(values), JSON.stringify(values)).toThrow(message);
    expect(() => readIndexArgs({ index: 'http://user:secret@a:1' })).not.toThrow(/secret/);
  });
});
