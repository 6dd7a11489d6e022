/**
 * Every error answer of kvindex's HTTP listeners has one shape, `{"error":"<message>","code":
 * "KVX_..."}`, with a stable code: the API of `kvindex serve --http` and its `--metrics`
 * listener (the process, over real HTTP on loopback), and the operations listener of `kvindex
 * serve --nats` (startOpsServer, with its DELETE /workers route), fastify's own answers included
 * (no route, 415, 413, a body that is not JSON, a bad URL, a malformed request line). Messages
 * quote client values clipped: a /register with a huge endpoint is not echoed back.
 */
import { connect } from 'node:net';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { EngineRegistry } from '../src/http/engine-registry.js';
import { startOpsServer, type OpsServer } from '../src/serve/ops-server.js';
import { quietFastify } from '../src/serve/quiet-fastify.js';
import { ZmqServeMetrics } from '../src/serve/zmq-metrics.js';
import { MAIN, ServeProcess } from './support/serve-process.js';
import { zmqAvailable } from './support/vllm-publisher.js';

interface Answer {
  status: number;
  text: string;
  body: { error?: unknown; code?: unknown; [k: string]: unknown };
}

async function ask(url: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(url, init);
  const text = await res.text();
  expect(res.headers.get('content-type'), text).toBe('application/json; charset=utf-8');
  return { status: res.status, text, body: JSON.parse(text) as Answer['body'] };
}

/** The answer has exactly the two keys, the message a string, the code the one expected. */
function expectError(a: Answer, status: number, code: string): void {
  expect([a.status, Object.keys(a.body).sort(), typeof a.body.error, a.body.code], a.text).toEqual([status, ['code', 'error'], 'string', code]);
}

/** A raw request line Node cannot parse: the answer as text (the socket then closes). */
function rawRequest(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname, () => s.write(bytes));
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString()));
    s.on('close', () => resolve(got));
    s.on('error', reject);
  });
}

const json = (body: string | Uint8Array, extra: Record<string, string> = {}): RequestInit => ({ method: 'POST', body, headers: { 'content-type': 'application/json', authorization: 'Bearer tok', ...extra } });

describe.skipIf(!existsSync(MAIN) || !(await zmqAvailable()))('kvindex serve --http: error answers', () => {
  let serve: ServeProcess;
  let api = '';
  let metrics = '';
  beforeAll(async () => {
    serve = new ServeProcess(['--http', '0', '--metrics', '0', '--token', 'tok']);
    api = (await serve.waitFor('kvindex serve ready')).address as string;
    metrics = (await serve.waitFor('metrics, health and readiness served over HTTP')).metricsUrl as string;
  });
  afterAll(async () => {
    serve.signal('SIGTERM');
    await serve.exited;
  });

  it('API port: no route, token, unknown model, fastify 415 / 400 / 413 / bad URL, all {"error","code"}', async () => {
    expectError(await ask(`${api}/nope`), 404, 'KVX_HTTP_NO_ROUTE');
    expectError(await ask(`${api}/query`), 404, 'KVX_HTTP_NO_ROUTE'); // GET of a POST route
    expectError(await ask(`${api}/register`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }), 401, 'KVX_HTTP_UNAUTHORIZED');
    expectError(await ask(`${api}/query`, json('{"token_ids":[1,2],"model_name":"nope"}')), 404, 'KVX_HTTP_NOT_FOUND');
    expectError(await ask(`${api}/route`, json('{"token_ids":[1,2],"model_name":"nope"}')), 404, 'KVX_HTTP_NOT_FOUND');
    // 415: another type (fastify's text/plain parser once let it through to a 400), none at all.
    expectError(await ask(`${api}/register`, json('{}', { 'content-type': 'text/plain' })), 415, 'KVX_HTTP_UNSUPPORTED_MEDIA_TYPE');
    const untyped = await ask(`${api}/query`, { method: 'POST', body: new Uint8Array([123, 125]) });
    expectError(untyped, 415, 'KVX_HTTP_UNSUPPORTED_MEDIA_TYPE');
    expect(untyped.body.error).toBe('content-type missing: expected application/json');
    expectError(await ask(`${api}/register`, json('{"instance_id":')), 400, 'KVX_HTTP_BAD_REQUEST');
    expectError(await ask(`${api}/register`, json('{"instance_id":1}')), 400, 'KVX_HTTP_BAD_REQUEST');
    expectError(await ask(`${api}/%zz`), 400, 'KVX_HTTP_BAD_REQUEST');
  });

  it('API port body limits: 64 KiB for /register and the like, 8 MiB for lookups', async () => {
    const pad = (n: number): string => `{"model_name":"nope","token_ids":[1],"pad":"${'x'.repeat(n)}"}`;
    expectError(await ask(`${api}/register`, json(pad(65 * 1024))), 413, 'KVX_HTTP_BODY_TOO_LARGE');
    expectError(await ask(`${api}/free`, json(pad(65 * 1024))), 413, 'KVX_HTTP_BODY_TOO_LARGE');
    // A 1 MiB lookup is read (and finds no index); 9 MiB is refused unread.
    expectError(await ask(`${api}/query`, json(pad(1024 * 1024))), 404, 'KVX_HTTP_NOT_FOUND');
    // Answered from the Content-Length alone, before the body is read (fetch, still writing
    // it, fails with EPIPE when the server closes: a raw request reads the answer).
    const big = await rawRequest(api, `POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${9 * 1024 * 1024}\r\nConnection: close\r\n\r\n{`);
    expect(big).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(big.slice(big.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'body larger than 8388608 bytes', code: 'KVX_HTTP_BODY_TOO_LARGE' });
  });

  it('does not echo a huge client value: the answer quotes at most 200 characters of it', async () => {
    const reg = (endpoint: string): string => `{"instance_id":1,"endpoint":"${endpoint}","model_name":"m","block_size":4}`;
    // Invalid and 1,000 characters: quoted, cut at 200, with its length.
    const bad = await ask(`${api}/register`, json(reg('y'.repeat(1000))));
    expectError(bad, 400, 'KVX_HTTP_BAD_REQUEST');
    expect(bad.body.error).toContain(`'${'y'.repeat(200)}... (1000 bytes)'`);
    expect(bad.text).not.toContain('y'.repeat(201));
    // Past what a registration keeps (1,024 characters): refused before it reaches ZMQ.
    const long = await ask(`${api}/register`, json(reg(`tcp://${'h'.repeat(60_000)}:5557`)));
    expectError(long, 400, 'KVX_HTTP_BAD_REQUEST');
    expect(long.body.error).toMatch(/^endpoint: expected at most 1024 characters, got "tcp:\/\/h+"\.\.\. \(60011 bytes\)$/);
    expect(long.text.length).toBeLessThan(300);
    const content = await ask(`${api}/register`, json('{}', { 'content-type': `text/${'z'.repeat(8000)}` }));
    expectError(content, 415, 'KVX_HTTP_UNSUPPORTED_MEDIA_TYPE');
    expect(content.text.length).toBeLessThan(300);
    // The server's log never quoted them either.
    for (const l of serve.lines) expect(JSON.stringify(l).length, l.msg).toBeLessThan(2_000);
  });

  it('metrics port: no route and a bad URL in the same shape', async () => {
    expectError(await ask(`${metrics}/nope`), 404, 'KVX_HTTP_NO_ROUTE');
    expectError(await ask(`${metrics}/metrics`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }), 404, 'KVX_HTTP_NO_ROUTE');
    expectError(await ask(`${metrics}/%zz`), 400, 'KVX_HTTP_BAD_REQUEST');
  });

  it('a malformed request line is answered 400 {"error","code"} on both ports, then the socket closes', async () => {
    for (const url of [api, metrics]) {
      const text = await rawRequest(url, 'NOT HTTP\r\n\r\n');
      expect(text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(text).toContain('Content-Type: application/json; charset=utf-8\r\n');
      expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'malformed HTTP request', code: 'KVX_HTTP_BAD_REQUEST' });
    }
  });
});

describe('kvindex serve --nats --metrics: error answers of the operations listener', () => {
  let ix: ShardedIndexer;
  let registry: EngineRegistry;
  let ops: OpsServer;
  let metrics: ZmqServeMetrics;
  beforeAll(async () => {
    ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    registry = new EngineRegistry({});
    metrics = new ZmqServeMetrics(registry, false);
    ops = await startOpsServer({ host: '127.0.0.1', port: 0 }, {
      metrics,
      readiness: () => metrics.readiness(),
      removeWorker: async (id) => {
        await ix.removeWorker(id);
        return false;
      },
    });
  });
  afterAll(async () => {
    await ops.close();
    await registry.close();
    await ix.close();
  });

  it('route errors, fastify 404 / 415 / 400 / 413 / 414 and bad URLs, all {"error","code"}', async () => {
    expect(await ask(`${ops.url}/workers/7`, { method: 'DELETE' })).toMatchObject({ status: 200, body: { removed: '7', known: false } });
    const badId = await ask(`${ops.url}/workers/${'9'.repeat(30)}`, { method: 'DELETE' });
    expectError(badId, 400, 'KVX_INVALID_FIELD');
    expect(badId.body.error).toBe(`worker id: expected a u64 in decimal, got "${'9'.repeat(30)}"`);
    expectError(await ask(`${ops.url}/workers/${'x'.repeat(101)}`, { method: 'DELETE' }), 414, 'KVX_HTTP_BAD_REQUEST');
    expectError(await ask(`${ops.url}/nope`), 404, 'KVX_HTTP_NO_ROUTE');
    expectError(await ask(`${ops.url}/workers/7`, { method: 'DELETE', body: '<a/>', headers: { 'content-type': 'text/xml' } }), 415, 'KVX_HTTP_UNSUPPORTED_MEDIA_TYPE');
    expectError(await ask(`${ops.url}/workers/7`, { method: 'DELETE', body: new Uint8Array([1]) }), 415, 'KVX_HTTP_UNSUPPORTED_MEDIA_TYPE');
    expectError(await ask(`${ops.url}/workers/7`, { method: 'DELETE', body: '{x', headers: { 'content-type': 'application/json' } }), 400, 'KVX_HTTP_BAD_REQUEST');
    // No operations route reads a body: 64 KiB at most (fastify's default was 1 MiB).
    expectError(await ask(`${ops.url}/workers/7`, { method: 'DELETE', body: `"${'x'.repeat(65 * 1024)}"`, headers: { 'content-type': 'application/json' } }), 413, 'KVX_HTTP_BODY_TOO_LARGE');
    expectError(await ask(`${ops.url}/%zz`), 400, 'KVX_HTTP_BAD_REQUEST');
  });

  it('a request not received whole in time: 408 {"error","code"}, then the socket closes', async () => {
    const app = quietFastify(undefined, { requestTimeoutMs: 300, headersTimeoutMs: 200, checkIntervalMs: 50 });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
      // Headers announce 100 bytes; 1 comes.
      const text = await rawRequest(url, 'POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{');
      expect(text).toMatch(/^HTTP\/1\.1 408 /);
      expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'request not received whole in time', code: 'KVX_HTTP_TIMEOUT' });
    } finally {
      await app.close();
    }
  });

  it('a closed index answers 503 with its own code', async () => {
    const closed = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    await closed.close();
    const server = await startOpsServer({ host: '127.0.0.1', port: 0 }, {
      metrics,
      readiness: () => metrics.readiness(),
      removeWorker: async (id) => {
        await closed.removeWorker(id);
        return true;
      },
    });
    try {
      expectError(await ask(`${server.url}/workers/7`, { method: 'DELETE' }), 503, 'KVX_CLOSED');
    } finally {
      await server.close();
    }
  });
});
