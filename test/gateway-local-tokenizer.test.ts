/**
 * `--tokenizer` / `--chat-template`: text and chat prompts tokenized in the gateway by Hugging
 * Face's tokenizer and Jinja packages give the decisions the engine's own /tokenize gives, with
 * no /tokenize call; a prompt the tokenizer cannot map goes to an engine instead. The
 * tokenizer.json is word-level over the fake engine's word ids, the template the fake engine's.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalTokenizer } from '../src/gateway/local-tokenizer.js';
import { Fleet } from './support/gateway-fleet.js';
import { applyChatTemplate, tokenize, wordToken } from './support/fake-tokenizer.js';
import { zmqAvailable } from './support/vllm-publisher.js';

const dir = mkdtempSync(join(tmpdir(), 'kvgw-tok-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TEXT = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
const VOCAB_WORDS = [...TEXT.split(' '), 'tail', 'ok', 'more', '<|user|>', '<|assistant|>', '<|system|>', 'be', 'brief'];

function writeTokenizer(): { tokenizer: string; template: string } {
  const vocab: Record<string, number> = { '[UNK]': 0 };
  for (const w of VOCAB_WORDS) vocab[w] = wordToken(w);
  const tokenizer = join(dir, 'tokenizer.json');
  writeFileSync(tokenizer, JSON.stringify({ version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, pre_tokenizer: { type: 'WhitespaceSplit' }, post_processor: null, decoder: null, model: { type: 'WordLevel', vocab, unk_token: '[UNK]' } }));
  const template = join(dir, 'chat.jinja');
  writeFileSync(template, '{% for m in messages %}<|{{ m.role }}|> {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}');
  return { tokenizer, template };
}

describe.skipIf(!(await zmqAvailable()))('kvindex gateway local tokenizer', () => {
  it('tokenizes text and chat as the engine does, without asking it', async () => {
    const files = writeTokenizer();
    const local = await LocalTokenizer.load(files.tokenizer, files.template);
    const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: TEXT }];
    expect([...local.tokens({ kind: 'text', text: TEXT })]).toEqual(tokenize(TEXT));
    expect([...local.tokens({ kind: 'messages', messages, body: {} })]).toEqual(tokenize(applyChatTemplate(messages)));
    const fleet = await Fleet.start({ engines: [1, 2, 3].map(() => ({ model: 'm', blockSize: 4 })), gateway: { tokenizer: local } });
    try {
      const seeded = await fleet.send('/v1/completions', { model: 'm', prompt: TEXT, max_tokens: 1 });
      await fleet.indexed('m', tokenize(TEXT), BigInt(seeded.worker!), 10);
      const asText = await fleet.send('/v1/completions', { model: 'm', prompt: `${TEXT} tail`, max_tokens: 1 });
      const asIds = await fleet.send('/v1/completions', { model: 'm', prompt: tokenize(`${TEXT} tail`), max_tokens: 1 });
      expect([asText.worker, asText.overlap]).toEqual([seeded.worker, 10]);
      expect([asIds.worker, asIds.overlap]).toEqual([seeded.worker, 10]);
      const chat = await fleet.send('/v1/chat/completions', { model: 'm', messages, max_tokens: 1 });
      const chatTokens = tokenize(applyChatTemplate(messages));
      await fleet.indexed('m', chatTokens, BigInt(chat.worker!), Math.floor(chatTokens.length / 4));
      const again = await fleet.send('/v1/chat/completions', { model: 'm', messages: [...messages, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'more' }], max_tokens: 1 });
      expect(again.worker).toBe(chat.worker);
      expect(again.overlap).toBe(Math.floor(chatTokens.length / 4));
      expect(fleet.engines.reduce((k, e) => k + e.tokenizeCalls, 0)).toBe(0);
      // A word outside the vocabulary: the engine's /tokenize answers instead.
      const unknown = await fleet.send('/v1/completions', { model: 'm', prompt: `${TEXT} zebra`, max_tokens: 1 });
      expect([unknown.status, unknown.worker, unknown.overlap]).toEqual([200, seeded.worker, 10]);
      expect(fleet.engines.reduce((k, e) => k + e.tokenizeCalls, 0)).toBe(1);
      expect(fleet.gateway.localTokenizerMisses).toBe(1);
    } finally {
      await fleet.close();
    }
  });

  it('refuses a missing or malformed tokenizer with a typed error', async () => {
    await expect(LocalTokenizer.load(join(dir, 'none.json'))).rejects.toMatchObject({ code: 'KVX_INVALID_OPTION' });
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"model":');
    await expect(LocalTokenizer.load(bad)).rejects.toMatchObject({ code: 'KVX_INVALID_OPTION' });
    const files = writeTokenizer();
    const noTemplate = await LocalTokenizer.load(files.tokenizer);
    expect(() => noTemplate.tokens({ kind: 'messages', messages: [{ role: 'user', content: 'x' }], body: {} })).toThrow(/no chat template/);
  });
});
