/**
 * `kvindex serve --http` as a process (the build in dist/, which `npm test` makes first):
 * listens on loopback, registers an engine, answers a query from its ZMQ events, serves its
 * metrics and readiness with `--metrics`, stops on SIGTERM with exit 0.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { until, VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';

const MAIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

describe.skipIf(!existsSync(MAIN) || !(await zmqAvailable()))('kvindex serve --http', () => {
  it('serves the standalone indexer API on 127.0.0.1 and exits 0 on SIGTERM', async () => {
    const proc = spawn(process.execPath, [MAIN, 'serve', '--http', '0', '--token', 'tok', '--metrics', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
    const pub = await VllmPublisher.start();
    try {
      await until(() => stderr.includes('kvindex serve ready'), 20_000, 'ready line');
      const ready = JSON.parse(stderr.split('\n').find((l) => l.includes('kvindex serve ready'))!) as { address: string };
      expect(ready.address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const post = (path: string, body: string, auth = true): Promise<Response> =>
        fetch(ready.address + path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...(auth ? { authorization: 'Bearer tok' } : {}) } });
      const reg = `{"instance_id":18446744073709551615,"endpoint":"${pub.endpoint}","model_name":"m","block_size":2}`;
      expect((await post('/register', reg, false)).status).toBe(401);
      expect((await post('/register', reg)).status).toBe(201);
      await pub.subscribed();
      await pub.publish([{ stored: { hashes: [1n, 2n], tokens: [5, 6, 7, 8], blockSize: 2 } }]);
      let text = '';
      for (const end = Date.now() + 15_000; Date.now() < end && !text.includes('"0":4'); await new Promise((r) => setTimeout(r, 20))) {
        text = await (await post('/query', '{"token_ids":[5,6,7,8,9],"model_name":"m"}', false)).text();
      }
      expect(text).toBe('{"scores":{"18446744073709551615":{"0":4}},"frequencies":[],"tree_sizes":{"18446744073709551615":{"0":2}}}');
      // --metrics: its own loopback listener, named in the log.
      const m = JSON.parse(stderr.split('\n').find((l) => l.includes('metricsUrl'))!) as { metricsUrl: string };
      expect(m.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const metrics = await (await fetch(`${m.metricsUrl}/metrics`)).text();
      expect(metrics).toContain('kvindex_zmq_stored_blocks_total{instance_id="18446744073709551615",dp_rank="0",model="m",tenant="default"} 2');
      expect(metrics).toMatch(/kvindex_http_query_ms_count\{route="\/query"\} [1-9]/);
      expect(metrics).toContain('process_resident_memory_bytes');
      expect((await fetch(`${m.metricsUrl}/ready`)).status).toBe(200);
    } finally {
      proc.kill('SIGTERM');
      pub.close();
    }
    expect(await exited).toBe(0);
    // The stop line counts the engine listeners it closed (it said a hard-coded 0).
    const stopped = stderr.split('\n').find((l) => l.includes('kvindex serve stopped'));
    expect(JSON.parse(stopped!)).toMatchObject({ listeners: 1 });
    // Every stderr line is a pino JSON line: no runtime or library warning (fastify 5.12 printed
    // a deprecation warning for its request-logging option), and no line per request on
    // either listener (quiet-fastify.ts), though requests were answered on both.
    const lines = stderr.split('\n').filter((l) => l !== '');
    for (const l of lines) expect(() => JSON.parse(l) as unknown, l).not.toThrow();
    expect(stderr).not.toMatch(/Warning|FSTDEP/);
    expect(stderr).not.toMatch(/incoming request|request completed/);
  });

  it('rejects a bad --http address with exit 2', () => {
    const r = spawnSync(process.execPath, [MAIN, 'serve', '--http', 'host:99999'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--http');
  });

  it('rejects a bad --metrics address with exit 2', () => {
    const r = spawnSync(process.execPath, [MAIN, 'serve', '--http', '0', '--metrics', 'x:70000'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--metrics');
  });
});
