/**
 * A kvindex error prints its code once, in its own place: the `code` field of a log line of
 * `kvindex serve` (its `err` text is the message alone), `error.code` of a NATS reply (its
 * `message` is the message alone), and the `[code]` of an error a client rethrows. Each once
 * printed it twice (`"code":"KVX_NATS_UNREACHABLE","err":"cannot reach NATS ... (KVX_NATS_UNREACHABLE)"`).
 * A library's error keeps its code in the text: nothing else carries it.
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../src/errors.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { NatsError, NatsErrorCode, errorFields, errorReply, reason } from '../src/nats/errors.js';
import { kvNames } from '../src/nats/names.js';
import { KvQueryService, requestFindMatches } from '../src/nats/query.js';
import { startAdminService } from '../src/nats/admin.js';
import { freePort as closedPort, NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';
import { MAIN, ServeProcess } from './support/serve-process.js';

/** How many times `needle` occurs in `text`. */
const count = (text: string, needle: string): number => text.split(needle).length - 1;

/** A loopback port nothing listens on. */
describe('error texts', () => {
  it('a kvindex error: message alone in the text, code in its own field and reply key', () => {
    const e = new NatsError(NatsErrorCode.Unreachable, 'cannot reach NATS at nats://127.0.0.1:1');
    expect(reason(e)).toBe('cannot reach NATS at nats://127.0.0.1:1');
    expect(errorFields(e)).toEqual({ code: 'KVX_NATS_UNREACHABLE', err: 'cannot reach NATS at nats://127.0.0.1:1' });
    expect(JSON.parse(errorReply(e))).toEqual({ error: { code: 'KVX_NATS_UNREACHABLE', message: 'cannot reach NATS at nats://127.0.0.1:1' } });
    // Wrapping one kvindex error in another of the same code (connect.ts, snapshot.ts) says it once.
    const wrapped = new NatsError(NatsErrorCode.RequestFailed, `stream info: ${reason(new NatsError(NatsErrorCode.RequestFailed, 'timeout'))}`);
    expect(count(JSON.stringify(errorFields(wrapped)), 'KVX_')).toBe(1);
  });

  it("a library's error keeps its code in the text, and replies carry KVX_INTERNAL", () => {
    const e = Object.assign(new Error('request timed out'), { code: 'TIMEOUT' });
    expect(reason(e)).toBe('request timed out (TIMEOUT)');
    expect(errorFields(e)).toEqual({ err: 'request timed out (TIMEOUT)' });
    expect(JSON.parse(errorReply(e))).toEqual({ error: { code: ErrorCode.Internal, message: 'request timed out (TIMEOUT)' } });
    expect(JSON.parse(errorReply('x'.repeat(5000))).error.message).toMatch(/\.\.\. \(5000 bytes\)$/);
  });
});

describe.skipIf(!existsSync(MAIN))('kvindex serve --nats: the start-up failure line', () => {
  it('names KVX_NATS_UNREACHABLE once, in its code field', async () => {
    const port = await closedPort();
    const serve = new ServeProcess(['--nats', `nats://127.0.0.1:${port}`, '--connect-timeout', '300']);
    const line = await serve.waitFor('kvindex serve could not start');
    expect(await serve.exited).toBe(1);
    expect(line.code).toBe('KVX_NATS_UNREACHABLE');
    expect(String(line.err)).toMatch(/^cannot reach NATS at nats:\/\/127\.0\.0\.1:\d+/);
    expect(count(JSON.stringify(line), 'KVX_NATS_UNREACHABLE')).toBe(1);
  });
});

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

describe.skipIf(!installed)('NATS request/reply errors', () => {
  const env = useNatsServer();
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();

  it('findMatches and admin replies: the code in error.code, not again in error.message', async () => {
    const indexer = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    const names = kvNames('codes', 'backend');
    const query = KvQueryService.start(env.nc, indexer, names.querySubject);
    const admin = startAdminService(env.nc, names.adminRemoveWorkerSubject, async () => true);
    try {
      for (const [subject, body] of [
        [names.querySubject, '{"tokens":[1,2,4294967296]}'],
        [names.querySubject, 'not json'],
        [names.adminRemoveWorkerSubject, '{"worker_id":-1}'],
      ] as const) {
        const reply = decoder.decode((await env.nc.request(subject, encoder.encode(body), { timeout: 10_000 })).data);
        const e = (JSON.parse(reply) as { error: { code: string; message: string } }).error;
        expect(e.code, reply).toBe('KVX_NATS_BAD_QUERY');
        expect(e.message, reply).not.toContain('KVX_');
      }
      // A client told of an error rethrows it with its code once.
      const err = await requestFindMatches(env.nc, names.querySubject, { tokens: [1, 2, 4294967296] }).catch((x: unknown) => x);
      expect(err).toBeInstanceOf(NatsError);
      expect((err as NatsError).code).toBe('KVX_NATS_BAD_QUERY');
      expect((err as NatsError).message).toMatch(/^findMatches on \S+ failed: tokens\[2\]: /);
      expect(count((err as NatsError).message, 'KVX_')).toBe(0);
      // Another code from the service is named, once.
      await indexer.close();
      const closed = await requestFindMatches(env.nc, names.querySubject, { hashes: [1n] }).catch((x: unknown) => x);
      expect((closed as NatsError).code).toBe('KVX_NATS_BAD_QUERY');
      expect((closed as NatsError).message).toMatch(/\(the service's code: KVX_CLOSED\)$/);
      expect(count((closed as NatsError).message, 'KVX_')).toBe(1);
    } finally {
      admin.unsubscribe();
      await query.stop();
      await indexer.close();
    }
  });
});
