/**
 * The gateway's decisions, end to end over fake engines on loopback (their KV events real vLLM
 * ZMQ frames): a prompt goes where its prefix is cached, a conversation's turns stay on one
 * engine, text and chat prompts tokenized by an engine decide as their token ids do, a LoRA
 * adapter hashes with its name, and every answer names its engine exactly.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Fleet } from './support/gateway-fleet.js';
import { applyChatTemplate, tokenize, type ChatMessage } from './support/fake-tokenizer.js';
import { VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);
const U64_MAX = 18446744073709551615n;

describe.skipIf(!(await zmqAvailable()))('kvindex gateway routing', () => {
  let fleet: Fleet | null = null;
  afterEach(async () => {
    await fleet?.close();
    fleet = null;
  });

  it('sends a prompt to the engine holding its prefix, with exact headers', async () => {
    fleet = await Fleet.start({ engines: [1, 2, 3].map((i) => ({ model: 'm', blockSize: 4, instanceId: i === 3 ? U64_MAX : BigInt(i) })) });
    const prefix = range(1000, 32);
    const first = await fleet.send('/v1/completions', { model: 'm', prompt: prefix, max_tokens: 2 });
    expect(first.status).toBe(200);
    expect(first.overlap).toBe(0);
    expect(first.dpRank).toBe('0');
    const holder = BigInt(first.worker!);
    await fleet.indexed('m', prefix, holder, 8);
    for (let i = 0; i < 6; i++) {
      const a = await fleet.send('/v1/completions', { model: 'm', prompt: [...prefix, ...range(5000 + i * 10, 6)], max_tokens: 2 });
      expect(a.worker).toBe(holder.toString());
      expect(a.overlap).toBe(8);
      expect((a.json as { usage: { prompt_tokens_details: { cached_tokens: number } } }).usage.prompt_tokens_details.cached_tokens).toBe(32);
    }
    // End-to-end headers pass both ways; hop-by-hop ones and the gateway's own do not.
    const h = await fleet.send('/v1/completions', { model: 'm', prompt: prefix, max_tokens: 1 }, { 'x-client-tag': 'abc', 'x-kvindex-tenant': 'default', authorization: 'Bearer engine-key' });
    expect(h.headers.get('x-fake-arrival-ns')).toMatch(/^\d+$/);
    const seenHeaders = fleet.engineOf(h.worker).seen.at(-1)!.headers;
    expect([seenHeaders['x-client-tag'], seenHeaders.authorization, seenHeaders['x-kvindex-tenant']]).toEqual(['abc', 'Bearer engine-key', undefined]);
    // The exact u64 id (above 2^53) names the engine that served it. Idle engines tie and ties
    // break at random, so fresh prompts go on until one lands there: 64 misses in a row has
    // probability (2/3)^64 < 1e-11 (a fixed 12 failed one CI run in ~130, as (2/3)^12 = 0.8 %).
    const ids = new Set<string>();
    let onMax: number[] | null = null;
    for (let i = 0; i < 64 && onMax === null; i++) {
      const prompt = range(20_000 + i * 100, 8);
      const worker = (await fleet.send('/v1/completions', { model: 'm', prompt, max_tokens: 1 })).worker!;
      ids.add(worker);
      if (worker === U64_MAX.toString()) onMax = prompt;
    }
    expect(onMax).not.toBeNull();
    for (const id of ids) expect(fleet.engineOf(id).seen.length).toBeGreaterThan(0);
    // And the id is a routing key, not only a label: its cached prompt comes back to it.
    await fleet.indexed('m', onMax!, U64_MAX, 2);
    const back = await fleet.send('/v1/completions', { model: 'm', prompt: [...onMax!, 7, 7, 7, 7], max_tokens: 1 });
    expect([back.worker, back.overlap]).toEqual([U64_MAX.toString(), 2]);
  });

  it('keeps a conversation\'s turns on one engine', async () => {
    fleet = await Fleet.start({ engines: [1, 2, 3].map(() => ({ model: 'm', blockSize: 4 })) });
    const workers = new Map<number, Set<string>>();
    const talks: ChatMessage[][] = [0, 1, 2].map((c) => [{ role: 'system', content: `you are helper number ${c} and you answer in full sentences only` }]);
    for (let turn = 0; turn < 3; turn++) {
      for (let c = 0; c < talks.length; c++) {
        const messages = talks[c]!;
        messages.push({ role: 'user', content: `question ${turn} of conversation ${c} about topic ${c * 7 + turn}` });
        const a = await fleet.send('/v1/chat/completions', { model: 'm', messages, max_tokens: 3 });
        expect(a.status).toBe(200);
        const set = workers.get(c) ?? new Set();
        set.add(a.worker!);
        workers.set(c, set);
        if (turn > 0) expect(a.overlap).toBeGreaterThan(0);
        const prompt = tokenize(applyChatTemplate(messages));
        await fleet.indexed('m', prompt, BigInt(a.worker!), Math.floor(prompt.length / 4));
        messages.push({ role: 'assistant', content: (a.json as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content });
      }
    }
    for (const set of workers.values()) expect(set.size).toBe(1);
  });

  it('decides the same for text, chat and their token ids', async () => {
    fleet = await Fleet.start({ engines: [1, 2, 3].map(() => ({ model: 'm', blockSize: 4 })) });
    const text = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    const seeded = await fleet.send('/v1/completions', { model: 'm', prompt: text, max_tokens: 1 });
    const holder = seeded.worker!;
    await fleet.indexed('m', tokenize(text), BigInt(holder), 10);
    const asText = await fleet.send('/v1/completions', { model: 'm', prompt: `${text} tail`, max_tokens: 1 });
    const asIds = await fleet.send('/v1/completions', { model: 'm', prompt: tokenize(`${text} tail`), max_tokens: 1 });
    expect([asText.worker, asText.overlap]).toEqual([holder, 10]);
    expect([asIds.worker, asIds.overlap]).toEqual([holder, 10]);
    // Chat: the engine's template applied by its /tokenize.
    const messages = [{ role: 'user', content: text }];
    const chat = await fleet.send('/v1/chat/completions', { model: 'm', messages, max_tokens: 1 });
    const chatTokens = tokenize(applyChatTemplate(messages));
    await fleet.indexed('m', chatTokens, BigInt(chat.worker!), Math.floor(chatTokens.length / 4));
    const next = [...messages, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'more' }];
    const nextTokens = tokenize(applyChatTemplate(next));
    const expected = fleet.gateway.registry.index('m', 'default')!.index.queryTokens(Uint32Array.from(nextTokens), {}).scores.get(BigInt(chat.worker!))!.get(0);
    const chatAgain = await fleet.send('/v1/chat/completions', { model: 'm', messages: next, max_tokens: 1 });
    expect(chatAgain.worker).toBe(chat.worker);
    expect(chatAgain.overlap).toBe(expected);
    expect(chatAgain.overlap).toBeGreaterThanOrEqual(10);
  });

  it('hashes an adapter\'s requests with its LoRA name, among the engines that serve it', async () => {
    fleet = await Fleet.start({ engines: [{ model: 'm', blockSize: 4, adapters: ['sql'] }, { model: 'm', blockSize: 4 }] });
    const prompt = range(300, 16);
    const a = await fleet.send('/v1/completions', { model: 'sql', prompt, max_tokens: 1 });
    expect(a.status).toBe(200);
    expect(a.worker).toBe('1'); // the only engine listing the adapter
    expect(fleet.engines[0]!.seen.at(-1)!.model).toBe('sql');
    await fleet.indexed('m', prompt, 1n, 4, 'sql');
    expect((await fleet.send('/v1/completions', { model: 'sql', prompt, max_tokens: 1 })).overlap).toBe(4);
    // The base model's hashes differ: no overlap for the same tokens.
    expect((await fleet.send('/v1/completions', { model: 'm', prompt, max_tokens: 1 })).overlap).toBe(0);
    const models = (await (await fetch(`${fleet.url}/v1/models`)).json()) as { object: string; data: Array<{ id: string }> };
    expect(models.object).toBe('list');
    expect(models.data.map((m) => m.id).sort()).toEqual(['m', 'sql']);
    expect((await fleet.send('/v1/completions', { model: 'nope', prompt, max_tokens: 1 })).status).toBe(404);
  });

  it('names the data-parallel rank to an engine serving several behind one URL', async () => {
    fleet = await Fleet.start({ engines: [{ model: 'm', blockSize: 4 }] });
    const e = fleet.engines[0]!;
    const rank1 = await VllmPublisher.start({ rank: 1 });
    try {
      await fleet.gateway.register({ instanceId: 1n, endpoint: rank1.endpoint, modelName: 'm', blockSize: 4, tenantId: 'default', dpRank: 1, replayEndpoint: null, url: e.url });
      // Both ranks are idle, so ties break at random: 64 fresh prompts all on one rank has
      // probability 2 * 2^-64 (16 left 2^-15 = 3e-5 per run).
      const ranks = new Set<string>();
      for (let i = 0; i < 64 && ranks.size < 2; i++) {
        const a = await fleet.send('/v1/completions', { model: 'm', prompt: range(40_000 + i * 100, 8), max_tokens: 1 });
        expect(a.worker).toBe('1');
        expect(e.seen.at(-1)!.headers['x-data-parallel-rank']).toBe(a.dpRank);
        ranks.add(a.dpRank!);
      }
      expect(ranks).toEqual(new Set(['0', '1']));
    } finally {
      rank1.close();
    }
  });
});
