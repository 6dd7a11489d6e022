/**
 * `kvindex serve` as a process against a nats-server that requires a password: the password in
 * the URL works and is in no log line (at trace level), and --metrics serves /health, /ready and
 * /metrics to a real HTTP client with the applied events counted.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvEventPublisher } from '../src/nats/publisher.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { NATS_SKIP_MESSAGE, NatsServer, natsServerInstalled } from './support/nats-server.js';
import { parsePrometheusText, value } from './support/prometheus-text.js';
import { ServeProcess } from './support/serve-process.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

const PASSWORD = 'serve-pw-7Hq2-never-logged';

describe.skipIf(!installed)('kvindex serve with a password and --metrics', () => {
  let server: NatsServer;
  beforeAll(async () => {
    server = await NatsServer.start(['--user', 'router', '--pass', PASSWORD]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('consumes, serves the operations routes, and never logs the password', async () => {
    const serve = new ServeProcess([
      '--nats', `nats://router:${PASSWORD}@127.0.0.1:${server.port}`, '--namespace', 'sops', '--component', 'backend',
      '--metrics', '127.0.0.1:0', '--ready-max-lag', '0', '--log-level', 'trace', '--keep-warm-ms', '1',
    ]);
    const pub = await KvEventPublisher.connect({ namespace: 'sops', component: 'backend', servers: server.url, auth: { user: 'router', pass: PASSWORD } });
    try {
      const ready = await serve.waitFor('kvindex serve ready');
      const url = String(ready['metricsUrl']);
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const events: RouterEvent[] = Array.from({ length: 20 }, (_, i) => ({
        workerId: 5n,
        event: { eventId: BigInt(i), data: { type: 'stored', parentHash: null, blocks: [{ blockHash: BigInt(100 + i), tokensHash: BigInt(100 + i) }] } },
      }));
      const { lastSeq } = await pub.publishAll(events);
      let all = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
      for (let i = 0; i < 600 && value(all, 'kvindex_stream_last_applied_seq') < lastSeq; i++) {
        await new Promise((r) => setTimeout(r, 100));
        all = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
      }
      expect(value(all, 'kvindex_stream_last_applied_seq')).toBe(lastSeq);
      expect(value(all, 'dynamo_component_kv_cache_events_applied', { event_type: 'stored', status: 'ok' })).toBe(20);
      // --keep-warm-ms 1: idle, the indexer keeps its lookup path warm, counted as a metric.
      for (let i = 0; i < 100 && value(all, 'kvindex_keep_warm_primes_total') === 0; i++) {
        await new Promise((r) => setTimeout(r, 50));
        all = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
      }
      expect(value(all, 'kvindex_keep_warm_primes_total')).toBeGreaterThan(0);
      expect((await fetch(`${url}/health`)).status).toBe(200);
      expect((await fetch(`${url}/ready`)).status).toBe(200);
      serve.signal('SIGTERM');
      expect(await serve.exited).toBe(0);
    } finally {
      serve.signal('SIGKILL');
      await serve.exited;
      await pub.close();
    }
    expect(serve.lines.length).toBeGreaterThan(5);
    expect(serve.dump()).not.toContain(PASSWORD);
  }, 120_000);

  it('reports a wrong password as KVX_NATS_AUTH_FAILED, not as unreachable, without printing it', async () => {
    const serve = new ServeProcess(['--nats', `nats://router:wrong-${PASSWORD}@127.0.0.1:${server.port}`, '--connect-timeout', '60000', '--log-level', 'trace']);
    const line = await serve.waitFor('kvindex serve could not start');
    expect(line).toMatchObject({ code: 'KVX_NATS_AUTH_FAILED' });
    expect(await serve.exited).toBe(1);
    expect(serve.dump()).not.toContain(PASSWORD);
  }, 120_000);
});
