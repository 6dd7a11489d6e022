/**
 * The listeners' connection bounds (src/serve/quiet-fastify.ts) on a real socket: a body that
 * trickles in is cut with 408 once the request timeout passes, headers that trickle in too, a
 * complete request is answered, and sockets beyond the cap are dropped. Short bounds are passed
 * in (the defaults are 30 s / 10 s / 16,384); the waits below are liveness bounds only.
 */
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { HEADERS_TIMEOUT_MS, MAX_CONNECTIONS, quietFastify, REQUEST_TIMEOUT_MS } from '../src/serve/quiet-fastify.js';

const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

async function serve(bounds: Parameters<typeof quietFastify>[1]): Promise<{ app: FastifyInstance; port: number }> {
  const app = quietFastify(undefined, bounds);
  app.post('/echo', async (req) => ({ got: (req.body as { x: number }).x }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  open.push(app);
  return { app, port: (app.server.address() as { port: number }).port };
}

/** Everything the server sends until it closes the socket (or 20 s pass: a liveness bound). */
function readUntilClosed(s: Socket): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    let text = '';
    const t = setTimeout(() => resolve({ text, closed: false }), 20_000);
    s.on('data', (d) => (text += d.toString('latin1')));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(t);
      resolve({ text, closed: true });
    });
  });
}

describe('listener bounds', () => {
  it('the defaults are set on the server', () => {
    const app = quietFastify();
    open.push(app);
    expect(app.server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
    expect(app.server.headersTimeout).toBe(HEADERS_TIMEOUT_MS);
    expect(app.server.maxConnections).toBe(MAX_CONNECTIONS);
  });

  it('a trickling body or trickling headers get 408 and the socket closes; a whole request is answered', async () => {
    const { port } = await serve({ requestTimeoutMs: 600, headersTimeoutMs: 400, checkIntervalMs: 100 });
    const body = connect(port, '127.0.0.1');
    body.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{');
    const drip = setInterval(() => body.write(' '), 50);
    const headers = connect(port, '127.0.0.1');
    headers.write('POST /echo HTTP/1.1\r\nHost: x\r\n');
    const drip2 = setInterval(() => headers.write('X-A: 1\r\n'), 50);
    try {
      const [a, b] = await Promise.all([readUntilClosed(body), readUntilClosed(headers)]);
      expect(a.closed).toBe(true);
      expect(a.text).toMatch(/^HTTP\/1\.1 408 /);
      expect(b.closed).toBe(true);
      expect(b.text).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      clearInterval(drip);
      clearInterval(drip2);
      body.destroy();
      headers.destroy();
    }
    const r = await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', body: '{"x":7}', headers: { 'content-type': 'application/json' } });
    expect(await r.json()).toEqual({ got: 7 });
  });

  it('sockets beyond the cap are dropped, and the server answers again once they go', async () => {
    const { port } = await serve({ maxConnections: 3 });
    const held = await Promise.all([0, 1, 2].map(() => new Promise<Socket>((res) => {
      const s = connect(port, '127.0.0.1', () => res(s));
    })));
    const extra = connect(port, '127.0.0.1');
    extra.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"x":1}');
    const r = await readUntilClosed(extra);
    expect(r).toEqual({ text: '', closed: true });
    for (const s of held) s.destroy();
    let answered = false;
    for (let i = 0; i < 200 && !answered; i++) {
      answered = await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', body: '{"x":2}', headers: { 'content-type': 'application/json' } })
        .then((res) => res.ok, () => false);
      if (!answered) await new Promise((res) => setTimeout(res, 20));
    }
    expect(answered).toBe(true);
  });
});
