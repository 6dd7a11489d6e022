/**
 * `kvindex serve --route-workers` as a process (the build in dist/): it answers `route` with
 * the worker holding the published blocks, and `free`, over NATS request/reply.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { computeBlockHashes, computeSequenceHashes } from '../src/hash/block-hash.js';
import { kvNames } from '../src/nats/names.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { routeSubjects } from '../src/nats/route-service.js';
import { parseJsonLossless, type JsonObject } from '../src/protocol/json-value.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';
import { parsePrometheusText, value } from './support/prometheus-text.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);
const MAIN = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
const W1 = 7587889975016782855n;
const W2 = 18446744073709551557n;

describe.skipIf(!installed || !existsSync(MAIN))('kvindex serve --route-workers', () => {
  const env = useNatsServer();

  it('routes to the worker holding the published prefix, frees the request, exits 0', async () => {
    const proc = spawn(process.execPath, [MAIN, 'serve', '--nats', env.server.url, '--namespace', 'routecli', '--block-size', '4',
      '--route-workers', `${W1},${W2}`, '--metrics', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise<number | null>((res) => proc.once('exit', (code) => res(code)));
    try {
      const ready = await new Promise<JsonObject>((resolve, reject) => {
        createInterface({ input: proc.stderr! }).on('line', (text) => {
          const line = parseJsonLossless(text) as JsonObject;
          if (line['msg'] === 'kvindex serve ready') resolve(line);
        });
        void exited.then(() => reject(new Error('serve exited before it was ready')));
      });
      const names = kvNames('routecli', 'backend');
      const subjects = routeSubjects(names);
      expect(ready['routeSubject']).toBe(subjects.route);

      const tokens = Array.from({ length: 12 }, (_, i) => 100 + i);
      const local = computeBlockHashes(tokens, 4);
      const seq = computeSequenceHashes(local);
      const pub = await KvEventPublisher.connect({ namespace: 'routecli', component: 'backend', connection: env.nc });
      await pub.publishAll([{ workerId: W2, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash })) } } }]);
      const ask = async (subject: string, body: string): Promise<JsonObject> =>
        parseJsonLossless((await env.nc.request(subject, new TextEncoder().encode(body), { timeout: 10_000 })).data) as JsonObject;
      // The event reaches the indexer asynchronously: route until the decision sees it (a liveness bound only).
      let r: JsonObject = {};
      for (let i = 0; i < 200; i++) {
        r = await ask(subjects.route, `{"tokens":[${tokens.join(',')}],"request_id":"r${i}"}`);
        await ask(subjects.free, `{"request_id":"r${i}"}`);
        if (r['overlap_blocks'] === 3n) break;
        await new Promise((res) => setTimeout(res, 25));
      }
      expect(r).toMatchObject({ worker_id: W2.toString(), overlap_blocks: 3n, required_blocks: 3n });
      expect(await ask(subjects.free, '{"request_id":"nope"}')).toEqual({ ok: false });
      const rounds = Number(/^r(\d+)$/.exec(String(r['request_id']))![1]) + 1;
      expect(await ask(subjects.route, '{"tokens":[1,2,3,4],"request_id":"last"}')).toMatchObject({ request_id: 'last' });
      const all = parsePrometheusText(await (await fetch(`${String(ready['metricsUrl'])}/metrics`)).text());
      // Every route had its free; the "nope" free is unknown; the last route is still in flight.
      expect(value(all, 'kvindex_route_sequences_total', { event: 'added' })).toBe(rounds + 1);
      expect(value(all, 'kvindex_route_sequences_total', { event: 'freed' })).toBe(rounds);
      expect(value(all, 'kvindex_route_sequences_total', { event: 'unknown' })).toBe(1);
      expect(value(all, 'kvindex_route_sequences_total', { event: 'expired' })).toBe(0);
      expect(value(all, 'kvindex_route_active_requests', {})).toBe(1);
      expect(value(all, 'kvindex_route_requests_total', { outcome: 'served' })).toBe(2 * rounds + 2);
      expect(value(all, 'kvindex_route_unshared_events_total', {})).toBe(0);
      proc.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      proc.kill('SIGKILL');
      await exited;
    }
  });
});
