/**
 * Local tokenization (`kvindex gateway --tokenizer <tokenizer.json> [--chat-template <file>]`):
 * text and chat prompts become tokens in the gateway, without an engine's /tokenize round trip.
 * Hugging Face's own pure-JS tokenizer (`@huggingface/tokenizers`) reads the model's
 * `tokenizer.json` (and the `tokenizer_config.json` beside it, when there is one), and
 * `@huggingface/jinja` renders the chat template (`--chat-template`, else the config's
 * `chat_template`). Both are optional dependencies, loaded only when a tokenizer is asked for.
 *
 * As vLLM's /tokenize: a completions text gets the tokenizer's special tokens
 * (`add_special_tokens` true), a rendered chat template does not (the template writes them).
 * One tokenizer serves every model of the gateway; a prompt it cannot map to token ids (a word
 * outside a word-level vocabulary) throws `TokenizeError`, and the gateway asks an engine instead.
 */

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ErrorCode, KvIndexError } from '../errors.js';
import { TokenizeError } from './engine-tokenizer.js';
import type { Prompt } from './openai-request.js';

interface HfTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): { ids: number[] };
}
interface HfTemplate {
  render(items: Record<string, unknown>): string;
}

/** The chat request fields passed to the template (as vLLM passes them). */
const TEMPLATE_FIELDS = ['tools', 'documents', 'continue_final_message'];

async function importOptional<T>(name: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch (err) {
    throw new KvIndexError(ErrorCode.InvalidOption, `--tokenizer needs the optional dependency ${name} (npm install ${name})`, { cause: err });
  }
}

export class LocalTokenizer {
  readonly #tokenizer: HfTokenizer;
  readonly #template: HfTemplate | null;
  readonly #specials: Record<string, unknown>;

  private constructor(tokenizer: HfTokenizer, template: HfTemplate | null, specials: Record<string, unknown>) {
    this.#tokenizer = tokenizer;
    this.#template = template;
    this.#specials = specials;
  }

  /**
   * Loads `tokenizer.json` (and `tokenizer_config.json` from the same folder when present) and
   * the chat template. Throws `KvIndexError` (`KVX_INVALID_OPTION`) for a missing dependency or
   * an unreadable file.
   */
  static async load(tokenizerPath: string, chatTemplatePath: string | null = null): Promise<LocalTokenizer> {
    const read = (path: string): string => {
      try {
        return readFileSync(path, 'utf8');
      } catch (err) {
        throw new KvIndexError(ErrorCode.InvalidOption, `cannot read ${path}: ${(err as Error).message}`, { cause: err });
      }
    };
    const json = (path: string): Record<string, unknown> => {
      try {
        return JSON.parse(read(path)) as Record<string, unknown>;
      } catch (err) {
        if (err instanceof KvIndexError) throw err;
        throw new KvIndexError(ErrorCode.InvalidOption, `${path}: not JSON: ${(err as Error).message}`, { cause: err });
      }
    };
    const tokenizerJson = json(tokenizerPath);
    const configPath = join(dirname(tokenizerPath), 'tokenizer_config.json');
    const config = existsSync(configPath) ? json(configPath) : {};
    const { Tokenizer } = await importOptional<{ Tokenizer: new (t: object, c: object) => HfTokenizer }>('@huggingface/tokenizers');
    let tokenizer: HfTokenizer;
    try {
      tokenizer = new Tokenizer(tokenizerJson, config);
    } catch (err) {
      throw new KvIndexError(ErrorCode.InvalidOption, `${tokenizerPath}: not a tokenizer: ${(err as Error).message}`, { cause: err });
    }
    const source = chatTemplatePath !== null ? read(chatTemplatePath) : typeof config.chat_template === 'string' ? config.chat_template : null;
    let template: HfTemplate | null = null;
    if (source !== null) {
      const { Template } = await importOptional<{ Template: new (s: string) => HfTemplate }>('@huggingface/jinja');
      try {
        template = new Template(source);
      } catch (err) {
        throw new KvIndexError(ErrorCode.InvalidOption, `chat template: ${(err as Error).message}`, { cause: err });
      }
    }
    const specials: Record<string, unknown> = {};
    for (const k of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
      const v = config[k];
      specials[k] = typeof v === 'object' && v !== null ? (v as { content?: unknown }).content : v;
    }
    return new LocalTokenizer(tokenizer, template, specials);
  }

  /** The prompt's tokens. Throws `TokenizeError` (not refused) when it cannot. */
  tokens(prompt: Exclude<Prompt, { kind: 'tokens' }>): Uint32Array {
    let ids: number[];
    try {
      if (prompt.kind === 'text') ids = this.#tokenizer.encode(prompt.text).ids;
      else {
        if (this.#template === null) throw new Error('no chat template (--chat-template, or chat_template in tokenizer_config.json)');
        const b = prompt.body;
        const items: Record<string, unknown> = { ...this.#specials, messages: prompt.messages, add_generation_prompt: b.add_generation_prompt ?? true };
        for (const f of TEMPLATE_FIELDS) if (b[f] !== undefined) items[f] = b[f];
        if (typeof b.chat_template_kwargs === 'object' && b.chat_template_kwargs !== null) Object.assign(items, b.chat_template_kwargs);
        ids = this.#tokenizer.encode(this.#template.render(items), { add_special_tokens: false }).ids;
      }
    } catch (err) {
      throw new TokenizeError(`local tokenizer: ${(err as Error).message}`, false, { cause: err });
    }
    const out = new Uint32Array(ids.length);
    for (let i = 0; i < ids.length; i++) {
      const t = ids[i];
      if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 0xffff_ffff) throw new TokenizeError(`local tokenizer: token ${i} has no id`, false);
      out[i] = t;
    }
    return out;
  }
}
