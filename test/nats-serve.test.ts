/**
 * `kvindex serve` as a process (the build in dist/, which `npm test` makes first): it logs a
 * ready line, indexes what is published, answers findMatches over request/reply, and on SIGTERM
 * acks what it applied and exits 0.
 */

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { computeBlockHashes, computeSequenceHashes } from '../src/hash/block-hash.js';
import { kvNames } from '../src/nats/names.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { requestFindMatches } from '../src/nats/query.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';
import { MAIN, ServeProcess } from './support/serve-process.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

describe.skipIf(!installed)('kvindex serve', () => {
  const env = useNatsServer();

  it('serves lookups of published events and exits 0 on SIGTERM after acking them', async () => {
    const serve = new ServeProcess([
      '--nats', env.server.url, '--namespace', 'cli', '--component', 'backend', '--shards', '1', '--block-size', '4',
      '--consumer', 'serve-test', '--keep-consumer',
    ]);
    try {
      const ready = await serve.waitFor('kvindex serve ready');
      const names = kvNames('cli', 'backend');
      expect(ready).toMatchObject({ stream: names.stream, consumer: 'serve-test', querySubject: names.querySubject, restored: 'none' });
      expect(serve.lines.some((l) => /no snapshot in the object store/.test(l.msg))).toBe(true);

      const tokens = Array.from({ length: 12 }, (_, i) => 100 + i);
      const local = computeBlockHashes(tokens, 4);
      const seq = computeSequenceHashes(local);
      const stored = (worker: bigint, n: number): RouterEvent => ({
        workerId: worker,
        event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: Array.from(local.subarray(0, n), (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash })) } },
      });
      const pub = await KvEventPublisher.connect({ namespace: 'cli', component: 'backend', connection: env.nc });
      const { lastSeq } = await pub.publishAll([stored(7587889975016782855n, 3), stored(9007199254740993n, 1)]);

      let reply = await requestFindMatches(env.nc, names.querySubject, { tokens });
      for (let i = 0; i < 100 && (reply.streamSeq ?? 0) < lastSeq; i++) {
        await new Promise((r) => setTimeout(r, 50));
        reply = await requestFindMatches(env.nc, names.querySubject, { tokens });
      }
      expect(reply.streamSeq).toBe(lastSeq);
      expect(new Map(reply.scores)).toEqual(new Map([[7587889975016782855n, 3], [9007199254740993n, 1]]));

      serve.signal('SIGTERM');
      expect(await serve.exited).toBe(0);
      expect(serve.lines.find((l) => l.msg === 'kvindex serve stopped')).toMatchObject({ applied: 2, lastAppliedSeq: lastSeq });
      const ci = await (await env.nc.jetstreamManager()).consumers.info(names.stream, 'serve-test');
      expect(ci.ack_floor.stream_seq).toBe(lastSeq);
    } finally {
      serve.signal('SIGKILL');
      await serve.exited;
    }
  });

  it('prints its usage with --help and rejects a bad option with exit code 2', () => {
    const help = spawnSync(process.execPath, [MAIN, 'serve', '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--snapshot-threshold');
    const bad = spawnSync(process.execPath, [MAIN, 'serve', '--shards', 'many'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("--shards: expected an integer >= 0, got 'many'");
    for (const [ms, why] of [['x', 'expected an integer >= 0'], ['60001', 'expected at most 60000'], ['1.5', 'expected an integer >= 0']]) {
      const r = spawnSync(process.execPath, [MAIN, 'serve', '--keep-warm-ms', ms!], { encoding: 'utf8' });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(`--keep-warm-ms: ${why!}`);
    }
    // Durations past a timer's or the server's range are usage errors, not a serve that never
    // connects (every attempt's timer fired at once) or a server's "invalid json".
    for (const [flag, value, range] of [
      ['--connect-timeout', '2147483648', 'from 1 to 2147483647'],
      ['--max-age', '9223372037', 'from 1 to 9223372036'],
      ['--consumer-inactive-threshold', '9007199254740991', 'from 1 to 9223372036'],
      ['--snapshot-lease-ms', '2147483648', 'from 0 to 2147483647'],
    ]) {
      const r = spawnSync(process.execPath, [MAIN, 'serve', flag!, value!], { encoding: 'utf8' });
      expect(r.status, flag).toBe(2);
      expect(r.stderr, flag).toContain(`${flag!}: expected an integer ${range!}, got '${value!}'`);
    }
    const lease = spawnSync(process.execPath, [MAIN, 'serve', '--snapshot-lease-ms', '500'], { encoding: 'utf8' });
    expect(lease.status).toBe(2);
    expect(lease.stderr).toContain("--snapshot-lease-ms: expected 0 (no lease) or an integer from 1000 to 2147483647, got '500'");
  });

  it('exits 1 with a KVX_NATS_UNREACHABLE log line when NATS is unreachable', async () => {
    const serve = new ServeProcess(['--nats', 'nats://127.0.0.1:1', '--connect-timeout', '500', '--log-level', 'error']);
    const line = await serve.waitFor('kvindex serve could not start');
    expect(line).toMatchObject({ code: 'KVX_NATS_UNREACHABLE' });
    expect(await serve.exited).toBe(1);
  });
});
