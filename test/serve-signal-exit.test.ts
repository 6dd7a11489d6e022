/**
 * `kvindex serve` (NATS) and `kvindex serve --http` exit promptly on SIGTERM or SIGINT,
 * whoever started them (issue 36: about 2 s after the "stopped" line before the fix). Each run
 * holds what kept the process alive: a registered engine with a live ZMQ publisher, one whose
 * endpoint nothing listens on, a keep-alive HTTP connection on both listeners, a NATS
 * connection with its consumer. The 1 s is the process's own deadline (800 ms from the
 * signal, src/cli/shutdown.ts): past it the process exits, logging the step that hung or the
 * handles left open, so a clean stop is exit 0 with neither line, whatever the host's load.
 */
import { connect } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FakeEngine } from './support/fake-engine.js';
import { ServeProcess } from './support/serve-process.js';
import { closedEndpoint, VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';
import { FreezableProxy } from './support/freezable-proxy.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

/**
 * A liveness bound on the wall time from the signal to the exit seen here: signal delivery and
 * exit on a loaded host, beside the process's own 800 ms deadline (which the forced-exit lines
 * below check, on the process's clock). Not the 1 s: a bound of 1.5 s failed at 1,541 ms
 * in 1 of 10 runs beside another copy of this file at load average 10, with a clean stop. It still
 * tells apart what the deadline exists for: the 30 s connect timeout, a 10 s replay timeout, a hang.
 */
const EXIT_BOUND_MS = 8_000;

/** Opens a keep-alive HTTP/1.1 connection that has answered one request and stays open. */
async function keepAlive(url: string): Promise<() => void> {
  const { hostname, port } = new URL(url);
  const sock = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => {
    sock.once('error', reject);
    sock.write(`GET /health HTTP/1.1\r\nhost: ${hostname}\r\nconnection: keep-alive\r\n\r\n`);
    sock.once('data', () => resolve());
  });
  sock.on('error', () => undefined);
  return () => sock.destroy();
}

/** Sends `sig` and resolves with the exit code and the ms from the signal to the exit. */
async function stopTimed(proc: ServeProcess, sig: NodeJS.Signals): Promise<{ code: number | null; ms: number; afterStopped: number }> {
  const t0 = performance.now();
  proc.signal(sig);
  const code = await proc.exited;
  const ms = performance.now() - t0;
  const stopped = proc.lines.find((l) => l.msg === 'kvindex serve stopped');
  const afterStopped = stopped === undefined ? -1 : Date.now() - (stopped['time'] as number);
  return { code, ms, afterStopped };
}

/** Messages of the forced exits (src/cli/shutdown.ts): a clean stop logs neither. */
const FORCED = ['shutdown did not finish in time: exiting now', 'second stop signal during the shutdown: exiting now'];

/** Stops `proc` with `sig` and expects exit 0 within the bound, without a forced exit. */
async function expectCleanStop(proc: ServeProcess, sig: NodeJS.Signals): Promise<void> {
  const t = await stopTimed(proc, sig);
  expect(t.code, proc.dump()).toBe(0);
  expect(t.ms, `exit took ${Math.round(t.ms)} ms after ${sig} (bound ${EXIT_BOUND_MS} ms; ${t.afterStopped} ms after the stopped line)`).toBeLessThan(EXIT_BOUND_MS);
  expect(proc.lines.filter((l) => FORCED.includes(l.msg) || l.msg.startsWith('handles still open')), proc.dump()).toEqual([]);
}

const zmq = await zmqAvailable();

describe.skipIf(!zmq)('kvindex serve --http exits on a signal', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('%s with engines registered and keep-alive connections open: exit 0 within the bound', async (sig) => {
    const pub = await VllmPublisher.start();
    const proc = new ServeProcess(['--http', '127.0.0.1:0', '--metrics', '127.0.0.1:0']);
    const closers: Array<() => void> = [];
    try {
      const ready = await proc.waitFor('kvindex serve ready');
      const address = ready['address'] as string;
      const metricsUrl = proc.lines.find((l) => typeof l['metricsUrl'] === 'string')!['metricsUrl'] as string;
      const register = async (id: number, endpoint: string): Promise<void> => {
        const res = await fetch(`${address}/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: `{"instance_id":${id},"endpoint":"${endpoint}","model_name":"m","block_size":4}`,
        });
        expect(res.status, await res.text()).toBe(201);
      };
      await register(1, pub.endpoint);
      await register(2, await closedEndpoint());
      await pub.subscribed();
      closers.push(await keepAlive(address), await keepAlive(metricsUrl));
      await expectCleanStop(proc, sig);
    } finally {
      for (const c of closers) c();
      pub.close();
      proc.signal('SIGKILL');
    }
  });
});

describe.skipIf(!zmq)('kvindex gateway exits on a signal', () => {
  it('SIGTERM with an engine, a request relayed and keep-alive connections open: exit 0 within the bound', async () => {
    const engine = await FakeEngine.start({ model: 'm', blockSize: 4 });
    const dir = mkdtempSync(join(tmpdir(), 'kvindex-gw-signal-'));
    const file = join(dir, 'engines.json');
    writeFileSync(file, JSON.stringify([{ instance_id: 1, endpoint: engine.endpoint, model_name: 'm', block_size: 4, url: engine.url }]));
    const proc = new ServeProcess(['--http', '127.0.0.1:0', '--engines', file, '--metrics', '127.0.0.1:0'], [], 'gateway');
    const closers: Array<() => void> = [];
    try {
      const address = (await proc.waitFor('kvindex gateway ready'))['address'] as string;
      const res = await fetch(`${address}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"m","prompt":[1,2,3,4,5,6,7,8],"max_tokens":4}' });
      expect(res.status, await res.text()).toBe(200);
      closers.push(await keepAlive(address));
      await expectCleanStop(proc, 'SIGTERM');
    } finally {
      for (const c of closers) c();
      await engine.stop();
      proc.signal('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!zmq)('kvindex serve --http exits on a signal during a replay', () => {
  it('SIGTERM while a gap waits on a replay endpoint that never answers: exit 0 within the bound', async () => {
    const pub = await VllmPublisher.start();
    // --replay-timeout 10000: the replay would hold close() for 10 s if shutdown waited on it.
    const proc = new ServeProcess(['--http', '127.0.0.1:0', '--replay-timeout', '10000']);
    try {
      const ready = await proc.waitFor('kvindex serve ready');
      const res = await fetch(`${ready['address'] as string}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"instance_id":1,"endpoint":"${pub.endpoint}","replay_endpoint":"${await closedEndpoint()}","model_name":"m","block_size":4}`,
      });
      expect(res.status, await res.text()).toBe(201);
      await pub.subscribed();
      await pub.publish([{ stored: { hashes: [1n], tokens: [1, 2, 3, 4], blockSize: 4 } }]);
      pub.drop([{ stored: { hashes: [2n], parent: 1n, tokens: [5, 6, 7, 8], blockSize: 4 } }]);
      await pub.publish([{ stored: { hashes: [3n], parent: 2n, tokens: [9, 10, 11, 12], blockSize: 4 } }]);
      // The gap's replay request is in flight now (it fails only after --replay-timeout).
      await new Promise((r) => setTimeout(r, 300));
      await expectCleanStop(proc, 'SIGTERM');
      expect(proc.lines.some((l) => l.msg.startsWith('unreplayable')), 'the replay had not failed before the signal').toBe(false);
    } finally {
      pub.close();
      proc.signal('SIGKILL');
    }
  });
});

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

describe.skipIf(!installed)('kvindex serve (NATS) exits on a signal', () => {
  const env = useNatsServer();
  it.each(['SIGTERM', 'SIGINT'] as const)('%s with a metrics keep-alive connection open: exit 0 within the bound', async (sig) => {
    const proc = new ServeProcess(['--nats', env.server.url, '--namespace', `sig${sig}`, '--shards', '1', '--metrics', '127.0.0.1:0']);
    let close = (): void => undefined;
    try {
      const ready = await proc.waitFor('kvindex serve ready');
      close = await keepAlive(ready['metricsUrl'] as string);
      await expectCleanStop(proc, sig);
    } finally {
      close();
      proc.signal('SIGKILL');
    }
  });

  // A NATS server that stops answering (frozen behind a proxy) holds the shutdown: draining a
  // subscription and deleting the consumer wait on the server. The deadline ends it.
  async function frozenServe(namespace: string): Promise<{ proc: ServeProcess; proxy: FreezableProxy }> {
    const proxy = await FreezableProxy.start(Number(new URL(env.server.url).port));
    const proc = new ServeProcess(['--nats', `nats://127.0.0.1:${proxy.port}`, '--namespace', namespace]);
    await proc.waitFor('kvindex serve ready');
    proxy.freeze();
    return { proc, proxy };
  }

  it('a shutdown that hangs on a frozen NATS server exits 1 within the bound, naming the step', async () => {
    const { proc, proxy } = await frozenServe('frozen1');
    try {
      const t = await stopTimed(proc, 'SIGTERM');
      expect(t.code, proc.dump()).toBe(1);
      expect(t.ms, `exit took ${Math.round(t.ms)} ms (bound ${EXIT_BOUND_MS} ms)`).toBeLessThan(EXIT_BOUND_MS);
      const line = proc.lines.find((l) => l.msg === FORCED[0]);
      // The first step that needs the server: draining the admin subscription, as measured.
      expect(line, proc.dump()).toMatchObject({ level: 40, step: expect.stringMatching(/^(drain|stop|close) /), deadlineMs: 800 });
      expect(proc.lines.some((l) => l.msg === 'kvindex serve stopped')).toBe(false);
    } finally {
      proxy.close();
      proc.signal('SIGKILL');
    }
  });

  it('a second signal during a hung shutdown exits 1 at once', async () => {
    const { proc, proxy } = await frozenServe('frozen2');
    try {
      proc.signal('SIGTERM');
      await proc.waitFor('shutting down: stop fetching, apply and ack what was delivered');
      proc.signal('SIGINT');
      expect(await proc.exited, proc.dump()).toBe(1);
      expect(proc.lines.find((l) => l.msg === FORCED[1]), proc.dump()).toMatchObject({ level: 40, signal: 'SIGINT' });
      expect(proc.lines.some((l) => l.msg === FORCED[0])).toBe(false);
    } finally {
      proxy.close();
      proc.signal('SIGKILL');
    }
  });

  it('a signal during start-up (connecting to a frozen server) exits 1 at once with a WARN line', async () => {
    // A signal left to its default action would be dropped by a container's PID 1 (node in
    // exec form): the handler makes it work wherever the process runs.
    const proxy = await FreezableProxy.start(Number(new URL(env.server.url).port));
    proxy.freeze();
    const proc = new ServeProcess(['--nats', `nats://127.0.0.1:${proxy.port}`, '--namespace', 'frozen3', '--connect-timeout', '30000', '--metrics', '127.0.0.1:0']);
    try {
      await proc.waitFor('metrics, health and readiness served over HTTP');
      const t = await stopTimed(proc, 'SIGTERM');
      expect(t.code, proc.dump()).toBe(1);
      expect(t.ms, `exit took ${Math.round(t.ms)} ms (bound ${EXIT_BOUND_MS} ms)`).toBeLessThan(EXIT_BOUND_MS);
      expect(proc.lines.find((l) => l.msg === 'stop signal during start-up: exiting now'), proc.dump()).toMatchObject({ level: 40, signal: 'SIGTERM' });
    } finally {
      proxy.close();
      proc.signal('SIGKILL');
    }
  });
});
