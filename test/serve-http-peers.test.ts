/**
 * `kvindex serve --http --peers`: Dynamo's peer list API (POST /register_peer, /deregister_peer,
 * GET /peers), byte for byte, on the built CLI on a loopback port; peer URLs are checked (http(s)
 * only, clipped in errors, no credentials) and the mutating routes need the token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServeProcess } from './support/serve-process.js';

const post = (address: string, path: string, body: unknown, token: string | null = 'tok'): Promise<Response> =>
  fetch(address + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token === null ? {} : { authorization: `Bearer ${token}` }) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

describe('kvindex serve --http: the peer list', () => {
  let proc: ServeProcess;
  let address: string;
  beforeAll(async () => {
    proc = new ServeProcess(['--http', '127.0.0.1:0', '--token', 'tok', '--peers', 'http://127.0.0.1:1,https://peer.example:8443/idx']);
    address = (await proc.waitFor('kvindex serve ready'))['address'] as string;
  });
  afterAll(async () => {
    proc.signal('SIGTERM');
    await proc.exited;
  });

  it('GET /peers lists the --peers URLs as Dynamo does: a JSON array of strings, in order', async () => {
    const res = await fetch(`${address}/peers`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('["http://127.0.0.1:1","https://peer.example:8443/idx"]');
  });

  it('register_peer answers 201 {"status":"ok"} (again for a known URL, kept once); deregister_peer 200, then 404', async () => {
    const url = 'http://127.0.0.1:2';
    for (let i = 0; i < 2; i++) {
      const res = await post(address, '/register_peer', { url });
      expect(res.status).toBe(201);
      expect(await res.text()).toBe('{"status":"ok"}');
    }
    expect(await (await fetch(`${address}/peers`)).json()).toEqual(['http://127.0.0.1:1', 'https://peer.example:8443/idx', url]);
    const del = await post(address, '/deregister_peer', { url });
    expect(del.status).toBe(200);
    expect(await del.text()).toBe('{"status":"ok"}');
    const again = await post(address, '/deregister_peer', { url });
    expect(again.status).toBe(404);
    expect(await again.json()).toEqual({ error: 'peer not found', code: 'KVX_HTTP_NOT_FOUND' });
    expect(await (await fetch(`${address}/peers`)).json()).toEqual(['http://127.0.0.1:1', 'https://peer.example:8443/idx']);
    expect(proc.lines.some((l) => l.msg === 'peer added' && l['peer'] === url)).toBe(true);
  });

  it('refuses URLs that are not http(s), carry credentials, or are huge, clipped in the 400', async () => {
    const bad: unknown[] = ['ftp://127.0.0.1/x', 'tcp://127.0.0.1:5', 'not a url', '', 7, null, 'http://user:hunter2@127.0.0.1:3', `http://127.0.0.1/${'a'.repeat(10_000)}`];
    for (const url of bad) {
      const res = await post(address, '/register_peer', { url });
      expect(res.status, String(url).slice(0, 40)).toBe(400);
      const body = (await res.json()) as { error: string; code: string };
      expect(body.code).toBe('KVX_HTTP_BAD_REQUEST');
      expect(body.error.length).toBeLessThan(300);
      expect(body.error).not.toContain('hunter2');
    }
    expect((await post(address, '/register_peer', '[1]')).status).toBe(400);
    expect((await post(address, '/register_peer', 'nope')).status).toBe(400);
    expect(await (await fetch(`${address}/peers`)).json()).toHaveLength(2);
    expect(proc.dump()).not.toContain('hunter2');
  });

  it('the mutating peer routes need the token; GET /peers does not', async () => {
    expect((await post(address, '/register_peer', { url: 'http://127.0.0.1:4' }, null)).status).toBe(401);
    expect((await post(address, '/deregister_peer', { url: 'http://127.0.0.1:1' }, 'wrong')).status).toBe(401);
    expect(await (await fetch(`${address}/peers`)).json()).toEqual(['http://127.0.0.1:1', 'https://peer.example:8443/idx']);
  });
});

describe('kvindex serve --http --peers: bad values', () => {
  it('exits 2 naming --peers for a URL that is not http(s)', async () => {
    const proc = new ServeProcess(['--http', '127.0.0.1:0', '--peers', 'http://127.0.0.1:1,zmq://x']);
    expect(await proc.exited).toBe(2);
    expect(proc.dump()).toContain('--peers: expected http:// or https://');
  });
});
