/**
 * A fake OpenAI-compatible engine (vLLM's HTTP surface) for the gateway's tests and benchmark:
 * a real HTTP server on a free 127.0.0.1 port serving `POST /v1/completions` and
 * `/v1/chat/completions` (stream or not; SSE as OpenAI's, ending `data: [DONE]`), `GET /v1/models`
 * (the model and its LoRA adapters, each adapter with `parent` set as vLLM lists them),
 * `GET /health` and `POST /tokenize` (vLLM's shape, fake-tokenizer.ts); for the benchmark,
 * `POST /probe` (the cached tokens of a prompt, nothing admitted) and `POST /reset` (cache cleared). Its simulated prefix
 * cache (fake-cache.ts) publishes real vLLM-format KV events over ZMQ and the answers report
 * `usage.prompt_tokens_details.cached_tokens` as vLLM does.
 *
 * Knobs for the failure cases: delays before the first chunk and between chunks, the next
 * requests failing before their first byte or in mid-stream, an unhealthy /health, and `stop()`
 * (the process is gone: connections refused). Run as a process for the benchmark:
 * `node dist/test/support/fake-engine.js '<FakeEngineOptions as JSON>'` prints one JSON line
 * `{"url","endpoint"}` and serves until SIGTERM.
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { drained } from '../../src/gateway/proxy.js';
import { FakePrefixCache } from './fake-cache.js';
import { answerWord, applyChatTemplate, tokenize, type ChatMessage } from './fake-tokenizer.js';
import { VllmPublisher } from './vllm-publisher.js';

export interface FakeEngineOptions {
  model: string;
  blockSize: number;
  /** Blocks the prefix cache holds (default 4,096). */
  cacheBlocks?: number;
  /** LoRA adapters served beside the model. */
  adapters?: string[];
  /** Publish KV events over ZMQ (default true). */
  events?: boolean;
  /** Delay before the first chunk, ms (default 0). */
  ttftMs?: number;
  /** Delay between chunks, ms (default 0: none). */
  interChunkMs?: number;
  /** Answer words when the request sets no max_tokens (default 8). */
  defaultMaxTokens?: number;
}

/** What the engine saw of one generation request. */
export interface SeenRequest {
  path: string;
  model: string;
  promptTokens: number[];
  cachedTokens: number;
  stream: boolean;
  headers: IncomingMessage['headers'];
  /** The client went away before the answer ended. */
  aborted: boolean;
  finished: boolean;
}

const MAX_MODEL_LEN = 131_072;

export class FakeEngine {
  readonly options: Required<Omit<FakeEngineOptions, 'adapters'>> & { adapters: string[] };
  readonly seen: SeenRequest[] = [];
  readonly cache: FakePrefixCache;
  readonly publisher: VllmPublisher | null;
  /** The next n generation requests fail before their first byte (socket destroyed). */
  failBeforeFirstByte = 0;
  /** The next n streamed generation requests fail after their first chunk. */
  failMidStream = 0;
  /** /tokenize calls answered. */
  tokenizeCalls = 0;
  /** /health answers 503 while true. */
  unhealthy = false;
  /** /health answers this many ms late (a stalled engine). */
  healthDelayMs = 0;
  ttftMs: number;
  interChunkMs: number;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #url = '';

  private constructor(o: FakeEngineOptions, publisher: VllmPublisher | null) {
    this.options = {
      model: o.model,
      blockSize: o.blockSize,
      cacheBlocks: o.cacheBlocks ?? 4096,
      adapters: o.adapters ?? [],
      events: o.events ?? true,
      ttftMs: o.ttftMs ?? 0,
      interChunkMs: o.interChunkMs ?? 0,
      defaultMaxTokens: o.defaultMaxTokens ?? 8,
    };
    this.ttftMs = this.options.ttftMs;
    this.interChunkMs = this.options.interChunkMs;
    this.publisher = publisher;
    this.cache = new FakePrefixCache(o.blockSize, this.options.cacheBlocks, publisher);
    this.#server = createServer((req, res) => void this.#handle(req, res));
    this.#server.keepAliveTimeout = 60_000;
    this.#server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
  }

  /** Starts the HTTP server (and the ZMQ publisher) on free loopback ports. */
  static async start(o: FakeEngineOptions): Promise<FakeEngine> {
    const publisher = o.events === false ? null : await VllmPublisher.start();
    const e = new FakeEngine(o, publisher);
    await new Promise<void>((resolve, reject) => {
      e.#server.once('error', reject);
      e.#server.listen(0, '127.0.0.1', () => resolve());
    });
    const a = e.#server.address();
    e.#url = `http://127.0.0.1:${typeof a === 'object' && a !== null ? a.port : 0}`;
    return e;
  }

  /** The OpenAI base URL, `http://127.0.0.1:<port>`. */
  get url(): string {
    return this.#url;
  }

  /** The ZMQ endpoint of the KV events. */
  get endpoint(): string {
    return this.publisher?.endpoint ?? '';
  }

  /** The generation requests currently being answered. */
  get inFlight(): number {
    return this.seen.filter((s) => !s.finished && !s.aborted).length;
  }

  /** The process is gone: the listener closes, open connections are cut, events stop. */
  async stop(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.publisher?.close();
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // The arrival on the host's monotonic clock (shared by every process): the benchmark
    // subtracts its send time to get the request leg's latency.
    res.setHeader('x-fake-arrival-ns', process.hrtime.bigint().toString());
    try {
      const body = req.method === 'POST' ? await readBody(req) : null;
      const path = (req.url ?? '/').split('?')[0]!;
      if (req.method === 'GET' && path === '/health') {
        if (this.healthDelayMs > 0) await new Promise((r) => setTimeout(r, this.healthDelayMs));
        return void res.writeHead(this.unhealthy ? 503 : 200).end();
      }
      if (req.method === 'GET' && path === '/v1/models') return json(res, 200, this.#models());
      if (body === null) return error(res, 404, `no route ${req.method ?? ''} ${path}`);
      const parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      if (path === '/tokenize') return this.#tokenize(res, parsed);
      // The benchmark's hindsight oracle: what this engine holds of a prompt, without admitting it.
      if (path === '/probe') return json(res, 200, { cached_tokens: this.cache.probe(this.#promptTokens(parsed), parsed.model === this.options.model ? null : String(parsed.model)) * this.options.blockSize });
      if (path === '/reset') {
        this.cache.clear();
        return json(res, 200, {});
      }
      if (path === '/v1/completions' || path === '/v1/chat/completions') return await this.#generate(req, res, path, parsed);
      return error(res, 404, `no route ${req.method ?? ''} ${path}`);
    } catch (err) {
      if (!res.headersSent) error(res, 400, (err as Error).message);
      else res.destroy();
    }
  }

  #models(): unknown {
    const created = 1_700_000_000;
    const base = { id: this.options.model, object: 'model', created, owned_by: 'vllm', root: this.options.model, parent: null, max_model_len: MAX_MODEL_LEN };
    const loras = this.options.adapters.map((a) => ({ id: a, object: 'model', created, owned_by: 'vllm', root: `/adapters/${a}`, parent: this.options.model, max_model_len: null }));
    return { object: 'list', data: [base, ...loras] };
  }

  #served(model: unknown): model is string {
    return model === this.options.model || this.options.adapters.includes(model as string);
  }

  /** Prompt tokens of a body: `prompt` (text, token ids, or a one-element list) or chat `messages`. */
  #promptTokens(b: Record<string, unknown>): number[] {
    if (Array.isArray(b.messages)) {
      const add = b.add_generation_prompt === undefined ? true : b.add_generation_prompt === true;
      return tokenize(applyChatTemplate(b.messages as ChatMessage[], add));
    }
    let p = b.prompt;
    if (Array.isArray(p) && p.length === 1 && (typeof p[0] === 'string' || Array.isArray(p[0]))) p = p[0];
    if (typeof p === 'string') return tokenize(p);
    if (Array.isArray(p) && p.every((t) => Number.isInteger(t))) return p as number[];
    throw new Error('prompt: expected a string or token ids');
  }

  #tokenize(res: ServerResponse, b: Record<string, unknown>): void {
    if (!this.#served(b.model)) return error(res, 404, `The model \`${String(b.model)}\` does not exist.`);
    this.tokenizeCalls++;
    const tokens = this.#promptTokens(b);
    json(res, 200, { count: tokens.length, max_model_len: MAX_MODEL_LEN, tokens, token_strs: null });
  }

  async #generate(req: IncomingMessage, res: ServerResponse, path: string, b: Record<string, unknown>): Promise<void> {
    if (!this.#served(b.model)) return error(res, 404, `The model \`${String(b.model)}\` does not exist.`);
    const model = b.model as string;
    const chat = path === '/v1/chat/completions';
    const stream = b.stream === true;
    const tokens = this.#promptTokens(b);
    const seen: SeenRequest = { path, model, promptTokens: tokens, cachedTokens: 0, stream, headers: req.headers, aborted: false, finished: false };
    this.seen.push(seen);
    res.on('close', () => {
      if (!seen.finished) seen.aborted = true;
    });
    if (this.failBeforeFirstByte > 0) {
      this.failBeforeFirstByte--;
      req.socket.destroy();
      return;
    }
    const lora = model === this.options.model ? null : model;
    seen.cachedTokens = this.cache.admit(tokens, lora) * this.options.blockSize;
    const maxTokens = typeof b.max_tokens === 'number' ? b.max_tokens : typeof b.max_completion_tokens === 'number' ? b.max_completion_tokens : this.options.defaultMaxTokens;
    const id = `${chat ? 'chatcmpl' : 'cmpl'}-${this.seen.length}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = {
      prompt_tokens: tokens.length,
      total_tokens: tokens.length + maxTokens,
      completion_tokens: maxTokens,
      prompt_tokens_details: { cached_tokens: seen.cachedTokens },
    };
    const ttft = typeof req.headers['x-fake-ttft-ms'] === 'string' ? Number(req.headers['x-fake-ttft-ms']) : this.ttftMs;
    if (ttft > 0) await sleep(ttft);
    if (seen.aborted) return;
    if (!stream) {
      const text = Array.from({ length: maxTokens }, (_, i) => ` ${answerWord(i)}`).join('');
      const choice = chat
        ? { index: 0, message: { role: 'assistant', content: text, tool_calls: [] }, logprobs: null, finish_reason: 'length' }
        : { index: 0, text, logprobs: null, finish_reason: 'length' };
      seen.finished = true;
      return json(res, 200, { id, object: chat ? 'chat.completion' : 'text_completion', created, model, choices: [choice], usage });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    const object = chat ? 'chat.completion.chunk' : 'text_completion';
    const chunk = (choice: unknown, extra: Record<string, unknown> = {}): string => `data: ${JSON.stringify({ id, object, created, model, choices: choice === null ? [] : [choice], ...extra })}\n\n`;
    const failMid = this.failMidStream > 0;
    if (failMid) this.failMidStream--;
    if (chat) await write(res, chunk({ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }));
    for (let i = 0; i < maxTokens; i++) {
      if (seen.aborted) return;
      if (failMid && i === 1) {
        // The first chunk is on the wire before the socket is cut.
        await new Promise<void>((r) => res.write('', () => r()));
        res.destroy();
        return;
      }
      const last = i === maxTokens - 1 ? 'length' : null;
      const word = ` ${answerWord(i)}`;
      await write(res, chunk(chat ? { index: 0, delta: { content: word }, logprobs: null, finish_reason: last } : { index: 0, text: word, logprobs: null, finish_reason: last }));
      if (this.interChunkMs > 0) await sleep(this.interChunkMs);
    }
    const so = b.stream_options as { include_usage?: boolean } | undefined;
    if (so?.include_usage === true) await write(res, chunk(null, { usage }));
    seen.finished = true;
    res.end('data: [DONE]\n\n');
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** vLLM's error object. */
function error(res: ServerResponse, status: number, message: string): void {
  json(res, status, { error: { message, type: status === 404 ? 'NotFoundError' : 'BadRequestError', param: null, code: status } });
}

/** Writes, waiting for 'drain' when the socket's buffer is full (the reader is slow). */
function write(res: ServerResponse, text: string): Promise<void> {
  return res.write(text) || res.destroyed ? Promise.resolve() : drained(res);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** This file, to run as a process (`node <FAKE_ENGINE_MAIN> '<options>'`). */
export const FAKE_ENGINE_MAIN = fileURLToPath(import.meta.url);

// As a process (the benchmark): the options as a JSON argument, one JSON line out.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const e = await FakeEngine.start(JSON.parse(process.argv[2] ?? '{}') as FakeEngineOptions);
  process.stdout.write(`${JSON.stringify({ url: e.url, endpoint: e.endpoint })}\n`);
  process.on('SIGTERM', () => void e.stop().then(() => process.exit(0)));
}
