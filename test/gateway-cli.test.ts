/**
 * `kvindex gateway` as a process (the build in dist/, which `npm test` makes first): loopback,
 * engines from engines.json, requests proxied with their headers, engines joining over
 * POST /register with their url, metrics measured at the gateway, exit 0 on SIGTERM; bad
 * flags and a bad engines file exit 2.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FakeEngine } from './support/fake-engine.js';
import { MAIN, ServeProcess } from './support/serve-process.js';
import { zmqAvailable } from './support/vllm-publisher.js';

describe.skipIf(!existsSync(MAIN) || !(await zmqAvailable()))('kvindex gateway (CLI)', () => {
  it('proxies to the engines of engines.json and of /register, with metrics, and exits 0 on SIGTERM', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvgw-'));
    const a = await FakeEngine.start({ model: 'm', blockSize: 4 });
    const b = await FakeEngine.start({ model: 'm', blockSize: 4 });
    const file = join(dir, 'engines.json');
    writeFileSync(file, `[{"instance_id":18446744073709551615,"endpoint":"${a.endpoint}","model_name":"m","block_size":4,"url":"${a.url}/"}]`);
    const proc = new ServeProcess(['--http', '0', '--engines', file, '--token', 'tok', '--metrics', '0', '--health-interval', '100', '--health-timeout', '15000'], [], 'gateway');
    try {
      const ready = await proc.waitFor('kvindex gateway ready');
      const url = ready.address as string;
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const post = (path: string, body: string, auth = false): Promise<Response> =>
        fetch(url + path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...(auth ? { authorization: 'Bearer tok' } : {}) } });
      const r = await post('/v1/completions', '{"model":"m","prompt":[1,2,3,4,5,6,7,8],"max_tokens":2}');
      expect(r.status).toBe(200);
      expect(r.headers.get('x-kvindex-worker')).toBe('18446744073709551615');
      expect(r.headers.get('x-kvindex-overlap-blocks')).toBe('0');
      expect(((await r.json()) as { choices: Array<{ text: string }> }).choices[0]!.text).toBe(' w0 w1');
      // A second engine joins over HTTP; url is required, the token too.
      const reg = `{"instance_id":2,"endpoint":"${b.endpoint}","model_name":"m","block_size":4`;
      expect((await post('/register', `${reg},"url":"${b.url}"}`)).status).toBe(401);
      expect((await post('/register', `${reg}}`, true)).status).toBe(400);
      expect((await post('/register', `${reg},"url":"ftp://x"}`, true)).status).toBe(400);
      expect((await post('/register', `${reg},"url":"${b.url}"}`, true)).status).toBe(201);
      const workers = (await (await fetch(`${url}/workers`)).text());
      expect(workers).toContain('"instance_id":2,');
      expect(workers).toContain('"instance_id":18446744073709551615,');
      // Both engines are idle, so ties break at random: 64 tries all on one engine has
      // probability 2 * 2^-64 (16 tries left 2^-15 = 3e-5 per run).
      const seen = new Set<string>();
      for (let i = 0; i < 64 && seen.size < 2; i++) seen.add((await post('/v1/completions', `{"model":"m","prompt":[${9000 + i * 10}],"max_tokens":1}`)).headers.get('x-kvindex-worker')!);
      expect(seen).toEqual(new Set(['18446744073709551615', '2']));
      const m = proc.lines.find((l) => l.msg === 'metrics, health and readiness served over HTTP')!;
      const metrics = await (await fetch(`${m.metricsUrl as string}/metrics`)).text();
      expect(metrics).toMatch(/kvindex_gateway_requests_total\{model="m",engine="18446744073709551615",outcome="ok"\} [1-9]/);
      expect(metrics).toMatch(/kvindex_gateway_overhead_ms_count\{stage="to_upstream"\} [1-9]/);
      expect(metrics).toMatch(/kvindex_gateway_ttft_seconds_count\{engine="2"\} [1-9]/);
      expect(metrics).toContain('kvindex_gateway_matched_blocks_count');
      expect(metrics.split("\n").filter((l) => l.startsWith("kvindex_gateway_engine_up"))).toContain(`kvindex_gateway_engine_up{url="${b.url}"} 1`);
      expect(metrics).toContain('kvindex_zmq_stored_blocks_total{instance_id="18446744073709551615"');
      expect((await fetch(`${m.metricsUrl as string}/ready`)).status).toBe(200);
      expect((await post('/v1/completions', '{"model":"m","prompt":')).status).toBe(400);
      expect(await (await fetch(`${m.metricsUrl as string}/metrics`)).text()).toContain('kvindex_gateway_requests_total{model="none",engine="none",outcome="rejected"} 1');
    } finally {
      proc.signal('SIGTERM');
      await a.stop();
      await b.stop();
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await proc.exited).toBe(0);
    expect(proc.lines.every((l) => l.level > 0)).toBe(true); // every stderr line is pino JSON
    // The stop line counts the engine listeners it closed (it printed a hard-coded 0).
    expect(proc.lines.find((l) => l.msg === 'kvindex gateway stopped')?.['listeners']).toBeGreaterThanOrEqual(2);
  });

  it('exits 2 on bad flags and a bad engines file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvgw-'));
    try {
      const file = join(dir, 'engines.json');
      writeFileSync(file, '[{"instance_id":1,"endpoint":"tcp://127.0.0.1:5557","model_name":"m","block_size":4}]');
      for (const args of [['--http', 'x:99999'], ['--http', '0', '--engines', file], ['--http', '0', '--engines', join(dir, 'none.json')], ['--http', '0', '--health-interval', '0'], ['--http', '0', '--health-timeout', '0'], ['--http', '0', '--chat-template', file], ['--http', '0', '--tokenizer', join(dir, 'none.json')]]) {
        const r = spawnSync(process.execPath, [MAIN, 'gateway', ...args], { encoding: 'utf8' });
        expect([args, r.status]).toEqual([args, 2]);
      }
      const r = spawnSync(process.execPath, [MAIN, 'gateway', '--http', '0', '--engines', file], { encoding: 'utf8' });
      expect(r.stderr).toContain('engines[0]: url');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
