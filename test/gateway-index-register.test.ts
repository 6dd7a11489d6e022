/**
 * `kvindex gateway --index --engines`: the gateway registers its engines on the index replicas
 * (remote-register.ts). Real processes on loopback: a replica started without registrations
 * ends up subscribed to the engine of the gateway's engines file (its `/workers`, then its
 * lookups score the blocks a test vLLM-format publisher sends); a replica that is down when the
 * gateway starts (a closed port) is retried with back-off and subscribed once it is up, with one
 * WARN line and counted failures, while routing goes on.
 */
import { createServer } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { registerBody, ReplicaRegistrar } from '../src/gateway/remote-register.js';
import { readRegister } from '../src/http/requests.js';
import { parseJsonLossless } from '../src/protocol/json-value.js';
import { readScores } from '../src/gateway/remote-index.js';
import { FakeEngine } from './support/fake-engine.js';
import { ServeProcess } from './support/serve-process.js';
import { VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';
import { freePort as closedPort } from './support/nats-server.js';

const BS = 4;
const U64_MAX = 18446744073709551615n;

async function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('registerBody: Dynamo\'s /register body of a gateway engine', () => {
  it('reads back as the same registration, u64 instance id exact', () => {
    for (const r of [
      { instanceId: U64_MAX, endpoint: 'tcp://127.0.0.1:5557', modelName: 'm "q"', blockSize: 16, tenantId: 'default', dpRank: 0, replayEndpoint: null },
      { instanceId: 7n, endpoint: 'ipc:///tmp/x', modelName: 'm', blockSize: 64, tenantId: 't', dpRank: 3, replayEndpoint: 'tcp://127.0.0.1:5558' },
    ]) expect(readRegister(parseJsonLossless(registerBody(r)))).toEqual(r);
  });
});

describe('ReplicaRegistrar against a replica that is recovering', () => {
  it('retries 503s with back-off until 201, sends the token, skips engines no longer the gateway\'s, counts each failure', async () => {
    const got: Array<{ auth: string | undefined; body: string }> = [];
    let answers = [503, 503, 201, 201];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        got.push({ auth: req.headers.authorization, body });
        const status = answers.shift() ?? 201;
        res.writeHead(status, { 'content-type': 'application/json' }).end(status === 503 ? '{"error":"recovering","code":"KVX_RECOVERING"}' : '{"status":"ok"}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const gone = new Set<bigint>([9n]);
    const reg = new ReplicaRegistrar({ replicas: [url], token: 's3cret', backoffMs: 20, refreshMs: 0, current: (r) => !gone.has(r.instanceId) });
    try {
      const e = { endpoint: 'tcp://127.0.0.1:5557', modelName: 'm', blockSize: 16, tenantId: 'default', dpRank: 0, replayEndpoint: null };
      reg.register({ ...e, instanceId: 1n });
      reg.register({ ...e, instanceId: 9n }); // unregistered from the gateway before its turn
      reg.register({ ...e, instanceId: U64_MAX });
      await until('settled', async () => reg.settled);
      expect(got.map((g) => (parseJsonLossless(g.body) as { instance_id: bigint }).instance_id)).toEqual([1n, 1n, 1n, U64_MAX]);
      expect(got.every((g) => g.auth === 'Bearer s3cret')).toBe(true);
      expect(reg.stats[0]).toMatchObject({ registered: 2, pending: 0, failures: { error: 0, unavailable: 2, refused: 0 } });
      answers = [409];
      reg.register({ ...e, instanceId: 2n });
      await until('refused', async () => reg.stats[0]!.failures.refused === 1);
      expect(reg.settled).toBe(false); // a refusal is retried (at the longest back-off), not dropped
    } finally {
      await reg.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe.skipIf(!(await zmqAvailable()))('kvindex gateway --index --engines registers its engines on the replicas', () => {
  const procs: ServeProcess[] = [];
  let publisher: VllmPublisher | null = null;
  let engine: FakeEngine | null = null;
  let dir = '';

  afterAll(async () => {
    for (const p of procs) p.signal('SIGKILL');
    publisher?.close();
    await engine?.stop();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('subscribes a replica started without registrations, retries one that is down until it is up', async () => {
    const a = new ServeProcess(['--http', '127.0.0.1:0']);
    procs.push(a);
    publisher = await VllmPublisher.start();
    engine = await FakeEngine.start({ model: 'm', blockSize: BS, events: false });
    const portB = await closedPort();
    const urlA = (await a.waitFor('kvindex serve ready'))['address'] as string;
    const urlB = `http://127.0.0.1:${portB}`;
    dir = mkdtempSync(join(tmpdir(), 'kvindex-register-'));
    const file = join(dir, 'engines.json');
    writeFileSync(file, `[{"instance_id":${U64_MAX},"endpoint":"${publisher.endpoint}","model_name":"m","block_size":${BS},"url":"${engine.url}"}]`);
    const gw = new ServeProcess(['--http', '127.0.0.1:0', '--engines', file, '--index', `${urlA},${urlB}`, '--metrics', '127.0.0.1:0', '--health-interval', '200',
      // A deadline no loaded host misses: this test is about registration, not latency.
      '--index-deadline-ms', '5000', '--index-hedge-ms', '2000'], [], 'gateway');
    procs.push(gw);
    const address = (await gw.waitFor('kvindex gateway ready'))['address'] as string;
    const metricsUrl = (await gw.waitFor('metrics, health and readiness served over HTTP'))['metricsUrl'] as string;

    const listed = async (url: string): Promise<boolean> => {
      try {
        return (await (await fetch(`${url}/workers`)).text()).includes(String(U64_MAX));
      } catch {
        return false;
      }
    };
    await until('replica A lists the engine', () => listed(urlA));
    expect(await listed(urlB)).toBe(false);
    // B down: routing goes on (a request is answered) while its registration is retried.
    const prompt = Array.from({ length: 6 * BS }, (_, i) => 500 + i);
    const first = await fetch(`${address}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt, max_tokens: 1 }) });
    expect(first.status).toBe(200);
    await first.text();

    // B starts now (its start-up takes the gateway's retries at 200 and 400 ms, at least).
    const b = new ServeProcess(['--http', `127.0.0.1:${portB}`]);
    procs.push(b);
    await b.waitFor('kvindex serve ready');
    // Within the gateway's longest back-off (10 s) plus margin: the retries doubled from 200 ms
    // while B was down, and a B slow to start on a loaded host can meet a 10 s gap.
    await until('replica B lists the engine', () => listed(urlB), 25_000);

    // Both replicas are subscribed: the publisher's blocks are scored by both (published again
    // until both have them: a subscriber joining misses the first messages).
    let hash = 100n;
    const scored = async (url: string): Promise<number> => {
      const res = await fetch(`${url}/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token_ids: prompt, model_name: 'm' }) });
      return res.status === 200 ? (readScores(await res.text(), BS)?.get(U64_MAX) ?? 0) : 0;
    };
    await until('both replicas score the blocks', async () => {
      if ((await scored(urlA)) === 6 && (await scored(urlB)) === 6) return true;
      hash = 100n;
      await publisher!.publish([{ stored: { hashes: Array.from({ length: 6 }, () => hash++), parent: null, tokens: prompt, blockSize: BS } }]);
      return false;
    });
    // And the gateway routes with them.
    const res = await fetch(`${address}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt: [...prompt, 1, 2], max_tokens: 1 }) });
    expect(res.status).toBe(200);
    expect([res.headers.get('x-kvindex-overlap-blocks'), res.headers.get('x-kvindex-index')]).toEqual(['6', null]);
    await res.text();

    const text = await (await fetch(`${metricsUrl}/metrics`)).text();
    const value = (re: RegExp): number => Number(re.exec(text)?.[1] ?? NaN);
    expect(value(new RegExp(`^kvindex_gateway_index_registration_failures_total\\{replica="${urlB}",failure="error"\\} (\\d+)$`, 'm'))).toBeGreaterThanOrEqual(2);
    expect(value(new RegExp(`^kvindex_gateway_index_registration_failures_total\\{replica="${urlA}",failure="error"\\} (\\d+)$`, 'm'))).toBe(0);
    for (const url of [urlA, urlB]) {
      expect(value(new RegExp(`^kvindex_gateway_index_registrations_total\\{replica="${url}"\\} (\\d+)$`, 'm'))).toBe(1);
      expect(value(new RegExp(`^kvindex_gateway_index_registrations_pending\\{replica="${url}"\\} (\\d+)$`, 'm'))).toBe(0);
    }
    // One WARN for B's failures (not one per attempt), one INFO when it accepted; none for A.
    const warns = gw.lines.filter((l) => l.msg === 'could not register the gateway\'s engines on an index replica: retrying');
    expect(warns.map((l) => [l['replica'], l['failure']])).toEqual([[urlB, 'error']]);
    expect(gw.lines.filter((l) => l.msg === 'index replica accepts the gateway\'s registrations again').map((l) => l['replica'])).toEqual([urlB]);
    gw.signal('SIGTERM');
    expect(await gw.exited).toBe(0);
  });
});
