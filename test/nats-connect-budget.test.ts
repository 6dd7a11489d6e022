/**
 * The connect budget bounds start-up whatever the address does. A loopback listener that accepts
 * connections and never answers (what a black-holed address looks like to a client) used to keep
 * `kvindex serve` alive long after it had logged the failure: nats.js leaves its socket open
 * after a first-connect TIMEOUT. Here the library rejects within the budget and leaves no socket
 * open, and the process exits.
 */

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats } from '../src/nats/connect.js';
import { NatsErrorCode } from '../src/nats/errors.js';
import { NatsServer, natsServerInstalled } from './support/nats-server.js';
import { ServeProcess } from './support/serve-process.js';

const MAIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

describe('connect budget against a server that never answers', () => {
  let silent: Server;
  let port = 0;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    silent = createServer((s) => {
      sockets.push(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((res) => silent.listen(0, '127.0.0.1', () => res()));
    const addr = silent.address();
    port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((res) => silent.close(() => res()));
  });

  it('rejects with KVX_NATS_UNREACHABLE and leaves no connection open', async () => {
    const before = sockets.length;
    let code: unknown = null;
    try {
      await connectNats({ servers: `nats://kv:pw-never-shown@127.0.0.1:${port}`, connectTimeoutMs: 500 });
    } catch (err) {
      code = (err as { code?: unknown }).code;
      expect((err as Error).message).not.toContain('pw-never-shown');
    }
    expect(code).toBe(NatsErrorCode.Unreachable);
    expect(sockets.length).toBeGreaterThan(before);
    // Every socket the attempt opened is closed by the client (the listener sees them end).
    await waitUntil(() => sockets.slice(before).every((s) => s.destroyed || s.readableEnded), 10_000);
  });

  it.skipIf(!natsServerInstalled())('connects when one of several servers is silent and another answers', async () => {
    const server = await NatsServer.start();
    try {
      const nc = await connectNats({ servers: [`nats://127.0.0.1:${port}`, server.url], connectTimeoutMs: 30_000 });
      expect(nc.isClosed()).toBe(false);
      await nc.close();
    } finally {
      await server.stop();
    }
  });

  it.skipIf(!existsSync(MAIN))('kvindex serve exits with code 1 soon after a 0.5 s budget', async () => {
    const p = spawn(process.execPath, [MAIN, 'serve', '--nats', `nats://127.0.0.1:${port}`, '--connect-timeout', '500'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve, reject) => {
      // Generous for a loaded machine; before the fix the process stayed up indefinitely here.
      const t = setTimeout(() => {
        p.kill('SIGKILL');
        reject(new Error(`kvindex serve still running 20 s after a 0.5 s connect budget:\n${err}`));
      }, 20_000);
      p.once('exit', (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    expect(code).toBe(1);
    expect(err).toContain('KVX_NATS_UNREACHABLE');
  });

  it.skipIf(!existsSync(MAIN))('answers /health 200 and /ready 503 while start-up is still connecting', async () => {
    const serve = new ServeProcess(['--nats', `nats://127.0.0.1:${port}`, '--connect-timeout', '120000', '--metrics', '127.0.0.1:0']);
    try {
      const line = await serve.waitFor('metrics, health and readiness served over HTTP');
      const url = String(line['metricsUrl']);
      expect((await fetch(`${url}/health`)).status).toBe(200);
      const ready = await fetch(`${url}/ready`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ ready: false, reason: expect.stringContaining('starting') });
      const metrics = await fetch(`${url}/metrics`);
      expect(metrics.status).toBe(200);
      const del = await fetch(`${url}/workers/1`, { method: 'DELETE' });
      expect(del.status).toBe(503);
      expect(serve.lines.some((l) => l.msg === 'kvindex serve ready')).toBe(false);
    } finally {
      serve.signal('SIGKILL');
      await serve.exited;
    }
  });
});

async function waitUntil(cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('connect budget bounds', () => {
  it("a budget past Node's longest timer is an option error, not attempts that time out at once", async () => {
    for (const ms of [2 ** 31, 3e9, Infinity, 0, -1]) {
      await expect(connectNats({ servers: 'nats://127.0.0.1:1', connectTimeoutMs: ms }), String(ms)).rejects.toMatchObject({ code: 'KVX_INVALID_OPTION' });
    }
  });
});
