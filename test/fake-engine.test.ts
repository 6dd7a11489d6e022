/**
 * The fake OpenAI engine the gateway is tested against: its answers have OpenAI's shapes, its
 * prefix cache reports cached tokens as vLLM does, and its KV events (real vLLM ZMQ frames)
 * reach an index through kvindex's own ZMQ source, scoring exactly the blocks it cached.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { EngineIndex } from '../src/zmq/engine-index.js';
import { ZmqKvSource } from '../src/zmq/source.js';
import { FakeEngine } from './support/fake-engine.js';
import { applyChatTemplate, tokenize } from './support/fake-tokenizer.js';
import { until, zmqAvailable } from './support/vllm-publisher.js';

const post = (url: string, body: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

describe.skipIf(!(await zmqAvailable()))('fake OpenAI engine', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  it('publishes the blocks it caches and reports them as cached tokens', async () => {
    const e = await FakeEngine.start({ model: 'm', blockSize: 4, cacheBlocks: 4 });
    const index = new EngineIndex({ blockSize: 4 });
    const source = await ZmqKvSource.start({ index, workerId: 7n, endpoint: e.endpoint });
    cleanup.push(async () => {
      await source.close();
      await e.stop();
    });
    await e.publisher!.subscribed();
    const prompt = Array.from({ length: 18 }, (_, i) => i + 1);
    const first = (await (await post(`${e.url}/v1/completions`, { model: 'm', prompt, max_tokens: 2 })).json()) as {
      usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
      choices: Array<{ text: string }>;
    };
    expect(first.usage.prompt_tokens).toBe(18);
    expect(first.usage.prompt_tokens_details.cached_tokens).toBe(0);
    expect(first.choices[0]!.text).toBe(' w0 w1');
    await until(() => index.queryTokens(Uint32Array.from(prompt), {}).scores.get(7n)?.get(0) === 4, 15_000, 'stored blocks');
    const again = (await (await post(`${e.url}/v1/completions`, { model: 'm', prompt: [...prompt.slice(0, 9), 99, 98, 97], max_tokens: 1 })).json()) as {
      usage: { prompt_tokens_details: { cached_tokens: number } };
    };
    expect(again.usage.prompt_tokens_details.cached_tokens).toBe(8);
    // 4 + 1 new block in a cache of 4: one block of the first prompt (a leaf) was evicted.
    await until(() => index.queryTokens(Uint32Array.from(prompt), {}).scores.get(7n)?.get(0) === 3, 15_000, 'eviction');
    expect(index.blockCount(7n, 0)).toBe(4);
  });

  it('streams SSE in OpenAI format, tokenizes text and chat, lists adapters', async () => {
    const e = await FakeEngine.start({ model: 'm', blockSize: 4, adapters: ['sql'], events: false });
    cleanup.push(() => e.stop());
    const res = await post(`${e.url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'hi there' }], stream: true, max_tokens: 2, stream_options: { include_usage: true } });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = (await res.text()).split('\n\n').filter((x) => x !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(events).toHaveLength(5); // role, 2 words, usage, [DONE]
    expect(JSON.parse(events[3]!.slice(6))).toMatchObject({ choices: [], usage: { prompt_tokens: 4 } });
    const t = (await (await post(`${e.url}/tokenize`, { model: 'sql', messages: [{ role: 'user', content: 'hi there' }] })).json()) as { tokens: number[]; count: number };
    expect(t.tokens).toEqual(tokenize(applyChatTemplate([{ role: 'user', content: 'hi there' }])));
    expect(t.count).toBe(4);
    expect((await post(`${e.url}/tokenize`, { model: 'other', prompt: 'x' })).status).toBe(404);
    const models = (await (await fetch(`${e.url}/v1/models`)).json()) as { data: Array<{ id: string; parent: string | null }> };
    expect(models.data.map((m) => [m.id, m.parent])).toEqual([['m', null], ['sql', 'm']]);
  });

  it('fails before the first byte, in mid-stream, and refuses connections once stopped', async () => {
    const e = await FakeEngine.start({ model: 'm', blockSize: 4, events: false });
    e.failBeforeFirstByte = 1;
    await expect(post(`${e.url}/v1/completions`, { model: 'm', prompt: 'a b' })).rejects.toThrow();
    e.failMidStream = 1;
    const res = await post(`${e.url}/v1/completions`, { model: 'm', prompt: 'a b', stream: true });
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
    expect((await post(`${e.url}/v1/completions`, { model: 'm', prompt: 'a b' })).status).toBe(200);
    const url = e.url;
    await e.stop();
    await expect(fetch(`${url}/health`)).rejects.toThrow();
  });
});
