/**
 * The lean lookup client (src/gateway/remote-http1.ts) against real loopback servers: pipelined
 * answers reach their own requests in order, Content-Length and chunked framing, a server that
 * answers garbage or nothing fails every request on the connection (never a crash, never an
 * answer given to the wrong request); and the lookup body writer against bigint decimal.
 */
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { CANCELLED, Http1Replica } from '../src/gateway/remote-http1.js';
import { QueryBodyWriter } from '../src/gateway/remote-query-body.js';

const servers: Array<Server | NetServer> = [];
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const s of sockets) s.destroy();
  sockets.clear();
  for (const s of servers.splice(0)) await new Promise((r) => s.close(() => r(undefined)));
});

async function listen(s: Server | NetServer): Promise<string> {
  servers.push(s);
  s.on('connection', (c: Socket) => sockets.add(c));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(s.address() as { port: number }).port}`;
}

function post(r: Http1Replica, body: string): Promise<{ err: string | null; status: number; body: string }> {
  return new Promise((resolve) => r.post(Buffer.from(body), (err, status, text) => resolve({ err: err?.message ?? null, status, body: text })));
}

describe('Http1Replica', () => {
  it('answers each pipelined request with its own answer, Content-Length and chunked alike', async () => {
    // Echoes the body; even bodies chunked, odd ones with Content-Length; later requests answer first when they can.
    const url = await listen(createServer((req, res) => {
      let b = '';
      req.on('data', (d: Buffer) => (b += d.toString()));
      req.on('end', () => {
        const n = Number(JSON.parse(b).n);
        setTimeout(() => {
          if (n % 2 === 0) res.writeHead(200, { 'content-type': 'application/json' }).end(b);
          else res.writeHead(n % 3 === 0 ? 404 : 200, { 'content-length': Buffer.byteLength(b) }).end(b);
        }, (7 - (n % 7)) % 3);
      });
    }));
    const r = new Http1Replica({ url, path: '/q', connections: 2 });
    const answers = await Promise.all(Array.from({ length: 60 }, (_, n) => post(r, `{"n":${n},"pad":"${'é'.repeat(n)}"}`)));
    answers.forEach((a, n) => expect(a).toEqual({ err: null, status: n % 2 === 1 && n % 3 === 0 ? 404 : 200, body: `{"n":${n},"pad":"${'é'.repeat(n)}"}` }));
    r.close();
  });

  it('fails every request on a connection that answers garbage, and recovers on a new one', async () => {
    let first = true;
    const url = await listen(createNetServer((s) => {
      s.on('data', () => {
        if (first) {
          first = false;
          s.end('SMTP ready\r\n\r\n');
        } else s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}');
      });
    }));
    const r = new Http1Replica({ url, path: '/q', connections: 1 });
    const bad = await Promise.all([post(r, '{}'), post(r, '{}')]);
    for (const a of bad) expect(a.err).toMatch(/not an HTTP\/1.x answer/);
    expect(await post(r, '{}')).toEqual({ err: null, status: 200, body: '{}' });
    expect(r.inFlight).toBe(0);
    r.close();
  });

  it('fails requests not answered within the timeout, and a refused connection at once', async () => {
    const url = await listen(createNetServer(() => undefined)); // accepts, never answers
    const r = new Http1Replica({ url, path: '/q', timeoutMs: 100 });
    const t0 = performance.now();
    expect((await post(r, '{}')).err).toMatch(/no answer within 100 ms/);
    expect(performance.now() - t0).toBeLessThan(1_000);
    r.close();
    const closed = new Http1Replica({ url: 'http://127.0.0.1:1', path: '/q' });
    expect((await post(closed, '{}')).err).not.toBeNull();
    closed.close();
  });
});

describe('Http1Replica: requests past maxInFlight', () => {
  it('wait their turn, and are never sent when no longer wanted by then', async () => {
    const seen: number[] = [];
    const url = await listen(createServer((req, res) => {
      let b = '';
      req.on('data', (d: Buffer) => (b += d.toString()));
      req.on('end', () => {
        seen.push(Number(JSON.parse(b).n));
        setTimeout(() => res.writeHead(200, { 'content-length': Buffer.byteLength(b) }).end(b), 20);
      });
    }));
    const r = new Http1Replica({ url, path: '/q', connections: 1, maxInFlight: 1 });
    const send = (n: number, live: boolean): Promise<string> => new Promise((resolve) => r.post(Buffer.from(`{"n":${n}}`), (err, _s, body) => resolve(err?.message ?? body), () => live));
    const out = await Promise.all([send(0, true), send(1, false), send(2, true)]);
    expect(out).toEqual(['{"n":0}', CANCELLED.message, '{"n":2}']);
    expect(seen).toEqual([0, 2]);
    expect([r.inFlight, r.queued]).toEqual([0, 0]);
    r.close();
  });
});

describe('QueryBodyWriter', () => {
  it('writes the same body as bigint decimal, for random full-range u64 hashes', () => {
    const w = new QueryBodyWriter();
    let seed = 7n;
    for (let round = 0; round < 50; round++) {
      const local = new BigUint64Array(round * 3);
      for (let i = 0; i < local.length; i++) {
        seed = (seed * 6364136223846793005n + 1442695040888963407n) & 0xffff_ffff_ffff_ffffn;
        local[i] = i % 5 === 0 ? seed >> BigInt(i % 64) : seed;
      }
      if (round === 1) local.set([0n, 0xffff_ffff_ffff_ffffn, 1n << 53n]);
      const model = round % 2 === 0 ? 'm' : 'm "ü"';
      const expected = `{"block_hashes":[${[...local].join(',')}],"model_name":${JSON.stringify(model)},"tenant_id":"t"}`;
      expect(w.write(model, 't', local).toString('utf8')).toBe(expected);
    }
  });
});
