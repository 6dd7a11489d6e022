/**
 * What the gateway reads of an OpenAI request body (`/v1/completions`, `/v1/chat/completions`):
 * the model, whether it streams, and the prompt as token ids (a completions `prompt` of
 * integers, used as is), as text (a completions `prompt` string) or as chat `messages` (both
 * tokenized later, by an engine or locally). The body's bytes are forwarded to the engine
 * unchanged; nothing here rewrites them. Token ids are u32, exact through `JSON.parse` (far
 * below 2^53), so the plain parser is used. Every check throws a `GatewayError` (400,
 * `invalid_request`) naming the field.
 *
 * A batch (`prompt` a list of several prompts) is routed by its first prompt: the engine
 * answers the whole batch, and its first prompt is the one whose prefix is most likely shared.
 */

import { showValue } from '../protocol/show-value.js';
import { GatewayError } from './openai-error.js';
import { MAX_TOKEN_COUNT } from '../router/sequence-event.js';

/** The two generation endpoints. */
export const Endpoint = {
  Completions: '/v1/completions',
  Chat: '/v1/chat/completions',
} as const;
export type Endpoint = (typeof Endpoint)[keyof typeof Endpoint];

/** A prompt as the request gave it. */
export type Prompt =
  | { readonly kind: 'tokens'; readonly tokens: Uint32Array }
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'messages'; readonly messages: readonly unknown[]; readonly body: Readonly<Record<string, unknown>> };

/** An OpenAI generation request, read. */
export interface OpenAiRequest {
  readonly endpoint: Endpoint;
  readonly model: string;
  readonly stream: boolean;
  readonly prompt: Prompt;
  /** `max_tokens` (or `max_completion_tokens`), when given: the router's expected output. */
  readonly maxTokens: number | null;
  /** The body as received, forwarded as is. */
  readonly bytes: Buffer;
}

const bad = (param: string, message: string): GatewayError => new GatewayError(400, 'invalid_request', `${param}: ${message}`, param);

function tokenIds(v: readonly unknown[], param: string): Uint32Array {
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const t = v[i];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 0xffff_ffff) throw bad(param, `expected token ids (u32), item ${i} is ${showValue(t)}`);
    out[i] = t;
  }
  return out;
}

function completionsPrompt(p: unknown): Prompt {
  if (typeof p === 'string') return { kind: 'text', text: p };
  if (!Array.isArray(p) || p.length === 0) throw bad('prompt', 'expected a string, token ids, or a non-empty list of either');
  if (typeof p[0] === 'number') return { kind: 'tokens', tokens: tokenIds(p, 'prompt') };
  const first: unknown = p[0];
  for (const item of p) if (typeof item !== typeof first || (Array.isArray(first) && !Array.isArray(item))) throw bad('prompt', 'a batch mixes texts and token ids');
  if (typeof first === 'string') return { kind: 'text', text: first };
  if (Array.isArray(first)) return { kind: 'tokens', tokens: tokenIds(first, 'prompt[0]') };
  throw bad('prompt', `expected a string, token ids, or a list of either, got a list of ${showValue(first)}`);
}

/** Reads a generation request's body. */
export function readOpenAiRequest(endpoint: Endpoint, bytes: unknown): OpenAiRequest {
  if (!Buffer.isBuffer(bytes)) throw new GatewayError(400, 'invalid_request', 'expected a JSON body (content-type: application/json)');
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new GatewayError(400, 'invalid_request', `body is not JSON: ${(err as Error).message}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new GatewayError(400, 'invalid_request', 'body: expected a JSON object');
  const o = body as Record<string, unknown>;
  if (typeof o.model !== 'string' || o.model === '') throw bad('model', 'expected a non-empty string');
  if (o.stream !== undefined && o.stream !== null && typeof o.stream !== 'boolean') throw bad('stream', 'expected a boolean');
  let prompt: Prompt;
  if (endpoint === Endpoint.Chat) {
    if (!Array.isArray(o.messages) || o.messages.length === 0) throw bad('messages', 'expected a non-empty array');
    for (let i = 0; i < o.messages.length; i++) {
      const m: unknown = o.messages[i];
      if (typeof m !== 'object' || m === null || Array.isArray(m) || typeof (m as { role?: unknown }).role !== 'string') throw bad(`messages[${i}]`, 'expected an object with a string role');
    }
    prompt = { kind: 'messages', messages: o.messages, body: o };
  } else {
    prompt = completionsPrompt(o.prompt);
  }
  const max = o.max_tokens ?? o.max_completion_tokens;
  // Only the router's hint: clamped to what it takes (a client's max_tokens of 1e12 is the
  // engine's to refuse, not a reason for the gateway to).
  const maxTokens = typeof max === 'number' && Number.isInteger(max) && max >= 0 ? Math.min(max, MAX_TOKEN_COUNT) : null;
  return { endpoint, model: o.model, stream: o.stream === true, prompt, maxTokens, bytes };
}
