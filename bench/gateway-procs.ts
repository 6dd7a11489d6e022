/**
 * The processes of the gateway benchmark: fake OpenAI engines (test/support/fake-engine.ts,
 * each its own process with its ZMQ publisher) and `kvindex gateway` from dist/, all on
 * loopback, plus an undici client. Everything the benchmark measures crosses real sockets.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { FAKE_ENGINE_MAIN, type FakeEngineOptions } from '../test/support/fake-engine.js';

const MAIN = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));

/** Resolves with the first line of `proc`'s stream that `pick` accepts. */
function firstLine<T>(proc: ChildProcess, stream: 'stdout' | 'stderr', pick: (line: string) => T | null): Promise<T> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: proc[stream]! });
    rl.on('line', (line) => {
      const v = pick(line);
      if (v !== null) {
        rl.removeAllListeners('line');
        resolve(v);
      }
    });
    proc.once('exit', (code) => reject(new Error(`process exited (${code}) before it was ready`)));
  });
}

export interface EngineProc {
  url: string;
  endpoint: string;
  proc: ChildProcess;
}

export async function startEngine(o: FakeEngineOptions): Promise<EngineProc> {
  const proc = spawn(process.execPath, [FAKE_ENGINE_MAIN, JSON.stringify(o)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const { url, endpoint } = await firstLine(proc, 'stdout', (l) => JSON.parse(l) as { url: string; endpoint: string });
  return { url, endpoint, proc };
}

export interface GatewayProc {
  url: string;
  metricsUrl: string;
  proc: ChildProcess;
  dir: string;
}

export async function startGateway(engines: EngineProc[], model: string, blockSize: number, extra: string[] = []): Promise<GatewayProc> {
  const dir = mkdtempSync(join(tmpdir(), 'kvgw-bench-'));
  const file = join(dir, 'engines.json');
  writeFileSync(file, JSON.stringify(engines.map((e, i) => ({ instance_id: i + 1, endpoint: e.endpoint, model_name: model, block_size: blockSize, url: e.url }))));
  const proc = spawn(process.execPath, [MAIN, 'gateway', '--http', '0', '--engines', file, '--metrics', '0', ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  let metricsUrl = '';
  const url = await firstLine(proc, 'stderr', (l) => {
    const j = JSON.parse(l) as { msg: string; address?: string; metricsUrl?: string };
    if (j.metricsUrl !== undefined) metricsUrl = j.metricsUrl;
    return j.msg === 'kvindex gateway ready' ? j.address! : null;
  });
  proc.stderr!.resume();
  return { url, metricsUrl, proc, dir };
}

export function stop(procs: Array<{ proc: ChildProcess; dir?: string }>): Promise<void> {
  return Promise.all(procs.map((p) => new Promise<void>((resolve) => {
    if (p.dir !== undefined) rmSync(p.dir, { recursive: true, force: true });
    if (p.proc.exitCode !== null) return resolve();
    p.proc.once('exit', () => resolve());
    p.proc.kill('SIGTERM');
  }))).then(() => undefined);
}

/** A keep-alive client pool per origin. */
export function client(url: string, connections = 256): Pool {
  return new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 30_000 });
}

export interface Posted {
  status: number;
  /** Monotonic ns at send, at the engine's arrival (its header), at the end. */
  sentNs: bigint;
  arrivalNs: bigint;
  endNs: bigint;
  body: string;
}

/** POSTs JSON and reads the whole answer. */
export async function post(pool: Pool, path: string, body: string, headers: Record<string, string> = {}): Promise<Posted> {
  const sentNs = process.hrtime.bigint();
  const r = await pool.request({ method: 'POST', path, body, headers: { 'content-type': 'application/json', ...headers } });
  const text = await r.body.text();
  const endNs = process.hrtime.bigint();
  const a = r.headers['x-fake-arrival-ns'];
  return { status: r.statusCode, sentNs, arrivalNs: typeof a === 'string' ? BigInt(a) : 0n, endNs, body: text };
}

/** The sum of the Prometheus samples whose line starts with `prefix`, or NaN without one. */
export async function metric(metricsUrl: string, prefix: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const lines = text.split('\n').filter((l) => l.startsWith(prefix));
  return lines.length === 0 ? NaN : lines.reduce((k, l) => k + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/**
 * Upper bounds of the buckets holding the given quantiles of a Prometheus histogram series
 * (`name` with `labels` as written, e.g. `stage="to_upstream"`): bucket resolution only.
 */
export async function histogramQuantiles(metricsUrl: string, name: string, labels: string, qs: number[]): Promise<number[]> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const buckets: Array<[number, number]> = [];
  for (const l of text.split('\n')) {
    if (!l.startsWith(`${name}_bucket{`) || !l.includes(labels)) continue;
    const le = /le="([^"]+)"/.exec(l)![1]!;
    buckets.push([le === '+Inf' ? Infinity : Number(Number(le).toPrecision(3)), Number(l.slice(l.lastIndexOf(' ') + 1))]);
  }
  const total = buckets.at(-1)?.[1] ?? 0;
  return qs.map((q) => buckets.find(([, n]) => n >= q * total)?.[0] ?? NaN);
}
