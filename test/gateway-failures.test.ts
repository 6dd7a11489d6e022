/**
 * The gateway when clients and engines misbehave: a client that goes away frees its load and
 * aborts the engine's request; an engine that is killed, refuses, or fails before its first
 * byte costs no request (retried once on the next-best engine); one that fails in mid-stream
 * ends the stream with an OpenAI error event; malformed, oversized and unknown-model requests
 * get OpenAI error objects and leave the gateway and its index as they were.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Endpoint, readOpenAiRequest } from '../src/gateway/openai-request.js';
import { Fleet } from './support/gateway-fleet.js';
import { until, zmqAvailable } from './support/vllm-publisher.js';

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

describe.skipIf(!(await zmqAvailable()))('kvindex gateway failures', () => {
  let fleet: Fleet | null = null;
  afterEach(async () => {
    await fleet?.close();
    fleet = null;
  });

  /** Sends `prompt` once and waits until its holder's blocks are indexed; returns the holder. */
  async function seed(f: Fleet, prompt: number[]): Promise<string> {
    const a = await f.send('/v1/completions', { model: 'm', prompt, max_tokens: 1 });
    expect(a.status).toBe(200);
    await f.indexed('m', prompt, BigInt(a.worker!), Math.floor(prompt.length / 4));
    return a.worker!;
  }

  it('a client that goes away frees the load and aborts the upstream request', async () => {
    fleet = await Fleet.start({ engines: [{ model: 'm', blockSize: 4, interChunkMs: 20 }] });
    const ac = new AbortController();
    const res = await fetch(`${fleet.url}/v1/completions`, { method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt: range(1, 8), stream: true, max_tokens: 1000 }) });
    const reader = res.body!.getReader();
    await reader.read();
    expect(fleet.inFlight('m', 1n)).toBe(1);
    ac.abort();
    const seen = fleet.engines[0]!.seen[0]!;
    await until(() => seen.aborted, 5_000, 'the engine to see the abort');
    expect(seen.finished).toBe(false);
    await until(() => fleet!.inFlight('m', 1n) === 0, 5_000, 'load freed');
  });

  it('an engine killed mid-run loses no unstarted request', async () => {
    // A long health interval: the gateway learns of the death from the refused connections.
    fleet = await Fleet.start({ engines: [1, 2].map(() => ({ model: 'm', blockSize: 4 })), gateway: { healthIntervalMs: 60_000 } });
    const prompt = range(100, 32);
    const holder = await seed(fleet, prompt);
    const dead = fleet.engineOf(holder);
    await dead.stop();
    const answers = await Promise.all(range(0, 10).map((i) => fleet!.send('/v1/completions', { model: 'm', prompt: [...prompt, i], max_tokens: 1 })));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.worker).not.toBe(holder);
    }
    expect(fleet.gateway.catalog.health(dead.url)).toBe('down');
    for (const id of fleet.ids) expect(fleet.inFlight('m', id)).toBe(0);
  });

  it('retries a failure before the first byte on the next-best engine', async () => {
    fleet = await Fleet.start({ engines: [1, 2].map(() => ({ model: 'm', blockSize: 4 })) });
    const prompt = range(100, 32);
    const holder = await seed(fleet, prompt);
    fleet.engineOf(holder).failBeforeFirstByte = 1;
    const a = await fleet.send('/v1/completions', { model: 'm', prompt, max_tokens: 1, stream: true });
    expect(a.status).toBe(200);
    expect(a.worker).not.toBe(holder);
    expect(a.text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(fleet.engineOf(holder).failBeforeFirstByte).toBe(0); // it was tried first
    // Failing on both: 502 with an OpenAI error object.
    for (const e of fleet.engines) e.failBeforeFirstByte = 1;
    const b = await fleet.send('/v1/completions', { model: 'm', prompt, max_tokens: 1 });
    expect(b.status).toBe(502);
    expect((b.json as { error: { code: string; type: string } }).error).toMatchObject({ code: 'upstream_failed', type: 'api_error' });
    for (const id of fleet.ids) expect(fleet.inFlight('m', id)).toBe(0);
  });

  it('ends a stream that fails in its middle with an error event and [DONE]', async () => {
    fleet = await Fleet.start({ engines: [{ model: 'm', blockSize: 4 }] });
    fleet.engines[0]!.failMidStream = 1;
    const a = await fleet.send('/v1/completions', { model: 'm', prompt: range(1, 8), max_tokens: 5, stream: true });
    expect(a.status).toBe(200);
    const events = a.text.split('\n\n').filter((e) => e !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    const err = JSON.parse(events.at(-2)!.slice(6)) as { error: { code: string; message: string } };
    expect(err.error.code).toBe('upstream_failed');
    expect(JSON.parse(events[0]!.slice(6))).toMatchObject({ choices: [{ text: ' w0' }] });
    expect(fleet.inFlight('m', 1n)).toBe(0);
  });

  it('answers malformed, oversized and unknown requests with OpenAI error objects, and goes on', async () => {
    fleet = await Fleet.start({ engines: [{ model: 'm', blockSize: 4 }], bodyLimit: 4096 });
    const prompt = range(1, 16);
    await seed(fleet, prompt);
    const ix = fleet.gateway.registry.index('m', 'default')!.index;
    const before = ix.blockCount(1n, 0);
    const cases: Array<[unknown, number, string, string | null]> = [
      ['{"model":', 400, 'invalid_request', null],
      ['[1,2]', 400, 'invalid_request', null],
      [{ prompt }, 400, 'invalid_request', 'model'],
      [{ model: 'm', prompt: [1.5, 2] }, 400, 'invalid_request', 'prompt'],
      [{ model: 'm', prompt: [-1] }, 400, 'invalid_request', 'prompt'],
      [{ model: 'm', prompt: [2 ** 32] }, 400, 'invalid_request', 'prompt'],
      [{ model: 'm', prompt: {} }, 400, 'invalid_request', 'prompt'],
      [{ model: 'm', prompt: [], stream: 'yes' }, 400, 'invalid_request', 'stream'],
      [{ model: 'm', prompt: range(0, 2000) }, 413, 'body_too_large', null],
      [{ model: 'zzz', prompt }, 404, 'model_not_found', 'model'],
    ];
    for (const [body, status, code, param] of cases) {
      const a = await fleet.send('/v1/completions', body);
      expect([a.status, JSON.stringify(body).slice(0, 30)]).toEqual([status, JSON.stringify(body).slice(0, 30)]);
      const e = (a.json as { error: { message: string; type: string; param: string | null; code: string } }).error;
      expect(Object.keys(e).sort()).toEqual(['code', 'message', 'param', 'type']);
      expect([e.code, e.param]).toEqual([code, param]);
    }
    const chat = await fleet.send('/v1/chat/completions', { model: 'm', messages: [{ content: 'no role' }] });
    expect([chat.status, (chat.json as { error: { param: string } }).error.param]).toEqual([400, 'messages[0]']);
    const wrongType = await fetch(`${fleet.url}/v1/completions`, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } });
    expect(wrongType.status).toBe(400);
    expect(((await wrongType.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    const wrongPath = await fetch(`${fleet.url}/v1/embeddings`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect([wrongPath.status, ((await wrongPath.json()) as { error: { code: string } }).error.code]).toEqual([404, 'not_found']);
    expect((await fetch(`${fleet.url}/v1/completions`)).status).toBe(404);
    // Nothing changed in the index, nothing is in flight, and the next request is served.
    expect(ix.blockCount(1n, 0)).toBe(before);
    expect(fleet.inFlight('m', 1n)).toBe(0);
    expect((await fleet.send('/v1/completions', { model: 'm', prompt, max_tokens: 1 })).overlap).toBe(4);
  });

  it('survives hostile bodies and headers: no 500, nothing left in flight, the index unchanged', async () => {
    fleet = await Fleet.start({ engines: [1, 2].map(() => ({ model: 'm', blockSize: 4 })) });
    const prompt = range(1, 16);
    const holder = await seed(fleet, prompt);
    const ix = fleet.gateway.registry.index('m', 'default')!.index;
    const blocks = fleet.ids.map((id) => ix.blockCount(id, 0));
    const deep = '['.repeat(200_000) + ']'.repeat(200_000);
    const bodies: unknown[] = [
      deep,
      `{"model":"m","prompt":${deep}}`,
      `{"model":"m","messages":[{"role":"user","content":${'['.repeat(3000)}${']'.repeat(3000)}}]}`,
      `{"model":"m","messages":[{"role":"user","content":${deep}}]}`,
      { model: '__proto__', prompt },
      { model: 'constructor', prompt: 'x' },
      { model: 'm', prompt: 'x'.repeat(100_000) },
      { model: 'm', prompt: '' },
      { model: 'm', prompt: [[1, 2], 'a'] },
      { model: 'm', prompt: [[]] },
      { model: 'm', prompt, max_tokens: 1e300 },
      { model: 'm', prompt, max_tokens: -5, stream: null },
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] },
      { model: 'm', messages: 'hi' },
      { model: 'm'.repeat(1_000_000), prompt },
      '\u0000\uffff',
      'null',
    ];
    for (const body of bodies) {
      const a = await fleet.send('/v1/completions', body);
      expect(a.status, String(body).slice(0, 40)).toBeLessThan(500);
      const c = await fleet.send('/v1/chat/completions', body);
      expect(c.status === 502 || c.status < 500, String(body).slice(0, 40)).toBe(true);
    }
    // A max_tokens past what the router takes is only clamped as its hint (it was a 400).
    const big = readOpenAiRequest(Endpoint.Completions, Buffer.from(JSON.stringify({ model: 'm', prompt, max_tokens: 2 ** 40 })));
    const pick = await fleet.gateway.pickEngine(big);
    fleet.gateway.free(pick);
    for (const tenant of ['x'.repeat(8000), '__proto__', '']) {
      expect((await fleet.send('/v1/completions', { model: 'm', prompt }, { 'x-kvindex-tenant': tenant })).status).toBeLessThan(500);
    }
    for (const id of fleet.ids) expect(fleet.inFlight('m', id)).toBe(0);
    // Only the valid prompts above stored blocks, and only fresh ones: the seeded prefix is whole.
    expect(fleet.ids.map((id) => ix.blockCount(id, 0)).every((n, i) => n >= blocks[i]!)).toBe(true);
    const again = await fleet.send('/v1/completions', { model: 'm', prompt, max_tokens: 1 });
    expect([again.status, again.worker, again.overlap]).toEqual([200, holder, 4]);
  });
});
