/**
 * Tokens of a text prompt or a conversation from an engine's own tokenizer: vLLM's
 * `POST /tokenize`, body `{"model","prompt"}` or `{"model","messages",...}` (the chat template
 * applied by the engine, with the request's template fields forwarded), answer
 * `{"tokens":[...],"count","max_model_len"}`. The gateway then routes on exactly the tokens the
 * engine will prefill. Throws `TokenizeError` (the engine failed or answered out of shape);
 * its `refused` says whether the engine could not be reached at all.
 */

import { request, type Dispatcher } from 'undici';
import type { Prompt } from './openai-request.js';

/** The chat request fields that change the template's output, forwarded to /tokenize. */
const TEMPLATE_FIELDS = ['add_generation_prompt', 'continue_final_message', 'chat_template', 'chat_template_kwargs', 'tools', 'documents', 'add_special_tokens'];

export class TokenizeError extends Error {
  readonly refused: boolean;
  constructor(message: string, refused: boolean, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TokenizeError';
    this.refused = refused;
  }
}

/** The /tokenize body of a prompt (text or messages). */
export function tokenizeBody(model: string, prompt: Exclude<Prompt, { kind: 'tokens' }>): string {
  if (prompt.kind === 'text') return JSON.stringify({ model, prompt: prompt.text });
  const o: Record<string, unknown> = { model, messages: prompt.messages };
  for (const f of TEMPLATE_FIELDS) if (prompt.body[f] !== undefined) o[f] = prompt.body[f];
  return JSON.stringify(o);
}

/** Whether an undici error is a refused (or reset before answering) connection. */
export function isRefused(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, i = 0; e !== undefined && e !== null && i < 4; e = e.cause as typeof e, i++) {
    if (e.code === 'ECONNREFUSED' || e.code === 'UND_ERR_CONNECT_TIMEOUT' || e.code === 'EHOSTUNREACH' || e.code === 'ENOTFOUND') return true;
  }
  return false;
}

/** Asks the engine at `url` for the prompt's tokens. */
export async function tokenizeOnEngine(dispatcher: Dispatcher, url: string, model: string, prompt: Exclude<Prompt, { kind: 'tokens' }>, timeoutMs: number, authorization: string | null): Promise<Uint32Array> {
  let text: string;
  let status: number;
  try {
    const res = await request(`${url}/tokenize`, {
      method: 'POST',
      dispatcher,
      body: tokenizeBody(model, prompt),
      headers: authorization === null ? { 'content-type': 'application/json' } : { 'content-type': 'application/json', authorization },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    status = res.statusCode;
    text = await res.body.text();
  } catch (err) {
    throw new TokenizeError(`tokenize on ${url} failed: ${(err as Error).message}`, isRefused(err), { cause: err });
  }
  if (status !== 200) throw new TokenizeError(`tokenize on ${url} answered ${status}: ${text.slice(0, 200)}`, false);
  let tokens: unknown;
  try {
    tokens = (JSON.parse(text) as { tokens?: unknown }).tokens;
  } catch {
    tokens = undefined;
  }
  if (!Array.isArray(tokens)) throw new TokenizeError(`tokenize on ${url}: no "tokens" array in the answer`, false);
  const out = new Uint32Array(tokens.length);
  for (let i = 0; i < tokens.length; i++) {
    const t: unknown = tokens[i];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 0xffff_ffff) throw new TokenizeError(`tokenize on ${url}: token ${i} is not a u32`, false);
    out[i] = t;
  }
  return out;
}
