/**
 * Sends a picked request to its engine with undici and relays the answer to the client.
 *
 * - Streams (`"stream": true`, a 2xx answer) are relayed chunk by chunk as they arrive, never
 *   buffered whole, with backpressure both ways: a client that reads slowly stops the reads
 *   from the engine (undici's body is not pulled while a write waits for 'drain').
 * - Other answers are buffered (they are one JSON object) so a failure in their middle can still
 *   be answered with a clean 502.
 * - The first chunk (or the whole answer) marks the prefill done; the end, a client that went
 *   away, or a failure frees the request: exactly once, in `finally`.
 * - A client that disconnects aborts the upstream request at once (the socket's 'close').
 * - A refused connection, a failure before the first byte, or a 502/503/504 before any byte is
 *   retried once on the next-best engine; the client never sees the first try. A refused
 *   engine is marked down at once.
 * - A failure after the first streamed byte ends the stream with an OpenAI-style error event
 *   and `data: [DONE]`, as vLLM ends a stream that fails.
 */

import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { request, type Dispatcher } from 'undici';
import type { EnginePick } from './engine-pick.js';
import type { Gateway } from './gateway.js';
import { isRefused } from './engine-tokenizer.js';
import { errorAnswer, GatewayError, openAiErrorJson } from './openai-error.js';
import type { OpenAiRequest } from './openai-request.js';
import { Outcome } from './observer.js';

/** The answer headers naming the engine (exact u64 instance id). */
export function engineHeaders(pick: EnginePick): Record<string, string> {
  const h: Record<string, string> = {
    'x-kvindex-worker': pick.engine.instanceId.toString(),
    'x-kvindex-dp-rank': String(pick.engine.dpRank),
    'x-kvindex-overlap-blocks': String(pick.decision.overlapBlocks),
  };
  // Remote lookups failed open: the overlap above is the 0 the decision used, not a measurement.
  if (pick.indexFailOpen === true) h['x-kvindex-index'] = 'fail-open';
  return h;
}

const RETRY_STATUS = new Set([502, 503, 504]);

/** Hop-by-hop headers (RFC 9110 7.6.1) and the length the relay sets itself: not forwarded. */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length']);

/** The engine's answer headers, hop-by-hop ones dropped, and the engine named. */
function answerHeaders(upstream: Dispatcher.ResponseData['headers'], pick: EnginePick): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(upstream)) if (v !== undefined && !HOP.has(k)) out[k] = v;
  return Object.assign(out, engineHeaders(pick));
}

/** Client headers not forwarded: hop-by-hop ones, those undici sets, and the gateway's own. */
const NOT_FORWARDED = new Set([...HOP, 'host', 'expect', 'x-kvindex-tenant']);

function upstreamHeaders(gw: Gateway, pick: EnginePick, client: IncomingHttpHeaders, length: number): Record<string, string | string[]> {
  const h: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(client)) if (v !== undefined && !NOT_FORWARDED.has(k)) h[k] = v;
  h['content-type'] = 'application/json';
  h['content-length'] = String(length);
  // vLLM's data-parallel rank header: an engine with several ranks behind one API server.
  if (gw.catalog.multiRank(pick.engine)) h['x-data-parallel-rank'] = String(pick.engine.dpRank);
  return h;
}

/** Resolves when `res` can take more ('drain') or is gone ('close'). */
export function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

function sendError(res: ServerResponse, err: unknown, extra: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const a = errorAnswer(err);
  res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(a.body), ...extra }).end(a.body);
}

/**
 * Relays `request` to `first`'s engine (or a retry's) and answers `res`. Never throws: every
 * failure is answered (or the stream ended) and reported to the observer. `arrival` is the
 * request's arrival, `performance.now()` ms.
 */
export async function relay(gw: Gateway, req: OpenAiRequest, first: EnginePick, clientHeaders: IncomingHttpHeaders, res: ServerResponse, arrival: number): Promise<Outcome> {
  const ac = new AbortController();
  const onClose = (): void => {
    if (!res.writableFinished) ac.abort();
  };
  res.on('close', onClose);
  let pick = first;
  let outcome: Outcome = Outcome.Failed;
  try {
    // The client left while the request was read, tokenized or decided.
    if (res.destroyed || res.socket === null || res.socket.destroyed) return (outcome = Outcome.ClientClosed);
    let up: Dispatcher.ResponseData | null = null;
    let messagesAtDispatch = 0;
    for (let attempt = 0; up === null; attempt++) {
      messagesAtDispatch = pick.engine.listener?.source.stats().messages ?? 0;
      let failure: unknown = null;
      try {
        const sending = request(pick.engine.url + req.endpoint, { method: 'POST', dispatcher: gw.dispatcher, headers: upstreamHeaders(gw, pick, clientHeaders, req.bytes.length), body: req.bytes, signal: ac.signal });
        gw.observer.sent(pick, performance.now() - arrival);
        const r = await sending;
        if (!RETRY_STATUS.has(r.statusCode) || attempt > 0) up = r;
        else {
          await r.body.dump().catch(() => undefined);
          failure = new Error(`engine answered ${r.statusCode}`);
        }
      } catch (err) {
        if (ac.signal.aborted) return (outcome = Outcome.ClientClosed);
        if (isRefused(err)) gw.catalog.setHealth(pick.engine.url, 'down');
        failure = err;
      }
      if (up !== null) break;
      gw.logger?.warn({ url: pick.engine.url, attempt, err: (failure as Error).message }, 'engine failed before its first byte');
      if (attempt > 0) {
        sendError(res, new GatewayError(502, 'upstream_failed', `the engines failed: ${(failure as Error).message}`), engineHeaders(pick));
        return (outcome = Outcome.Failed);
      }
      gw.observer.retried(pick);
      try {
        pick = gw.repick(req, pick);
      } catch (err) {
        sendError(res, err);
        return (outcome = Outcome.Failed);
      }
    }
    const ok = up.statusCode >= 200 && up.statusCode < 300;
    const headers = answerHeaders(up.headers, pick);
    if (req.stream && ok) outcome = await relayStream(gw, pick, up, res, headers, arrival);
    else outcome = await relayWhole(gw, pick, up, res, headers, arrival);
    if (outcome === Outcome.Ok && pick.decision.overlapBlocks < pick.decision.requiredBlocks) gw.catalog.owe(pick.engine, messagesAtDispatch, performance.now());
    return outcome;
  } catch (err) {
    // Not expected: answered as an internal error, never thrown into the server.
    gw.logger?.error({ err }, 'relay failed');
    sendError(res, err);
    return (outcome = Outcome.Failed);
  } finally {
    res.off('close', onClose);
    gw.free(pick);
    gw.observer.finished(req.model, pick, outcome, performance.now() - arrival);
  }
}

async function relayStream(gw: Gateway, pick: EnginePick, up: Dispatcher.ResponseData, res: ServerResponse, headers: Record<string, string | string[]>, arrival: number): Promise<Outcome> {
  headers['cache-control'] = 'no-cache';
  res.writeHead(up.statusCode, headers);
  res.flushHeaders();
  let first = true;
  try {
    for await (const chunk of up.body) {
      if (first) {
        first = false;
        gw.markPrefill(pick);
        gw.observer.firstByte(pick, performance.now() - arrival);
      }
      if (!res.write(chunk as Buffer)) await drained(res);
      if (res.destroyed) {
        up.body.destroy();
        return Outcome.ClientClosed;
      }
    }
  } catch (err) {
    if (res.destroyed) return Outcome.ClientClosed;
    gw.logger?.warn({ url: pick.engine.url, err: (err as Error).message }, 'engine failed in mid-stream');
    res.end(`data: ${openAiErrorJson(502, `the engine failed in mid-stream: ${(err as Error).message}`, 'upstream_failed')}\n\ndata: [DONE]\n\n`);
    return Outcome.FailedMidStream;
  }
  res.end();
  return Outcome.Ok;
}

async function relayWhole(gw: Gateway, pick: EnginePick, up: Dispatcher.ResponseData, res: ServerResponse, headers: Record<string, string | string[]>, arrival: number): Promise<Outcome> {
  const parts: Buffer[] = [];
  try {
    for await (const chunk of up.body) {
      if (parts.length === 0) {
        gw.markPrefill(pick);
        gw.observer.firstByte(pick, performance.now() - arrival);
      }
      parts.push(chunk as Buffer);
    }
  } catch (err) {
    if (res.destroyed) return Outcome.ClientClosed;
    sendError(res, new GatewayError(502, 'upstream_failed', `the engine failed in mid-answer: ${(err as Error).message}`), engineHeaders(pick));
    return Outcome.FailedMidStream;
  }
  const body = Buffer.concat(parts);
  headers['content-length'] = String(body.length);
  res.writeHead(up.statusCode, headers).end(body);
  return Outcome.Ok;
}
