/**
 * Dynamo's peer routes of the standalone indexer, byte for byte: `POST /register_peer {"url"}`
 * (201 `{"status":"ok"}`, also when the URL was a peer already), `POST /deregister_peer {"url"}`
 * (200 `{"status":"ok"}`, 404 `{"error":"peer not found",...}`), `GET /peers` (`["http://..."]`).
 * Registered by indexer-routes.ts inside its plugin, so the token guard, the JSON parser and
 * the error shape are the same as every other route's.
 */

import type { FastifyInstance, FastifyReply, RouteShorthandOptions } from 'fastify';
import { parseJsonLossless } from '../protocol/json-value.js';
import { JSON_TYPE } from './error-answers.js';
import { checkPeerUrl, type PeerList } from './peer-list.js';
import { HttpRequestError } from './requests.js';

/** The url of a `{"url": "..."}` body (bytes), checked; throws `HttpRequestError`. */
function readPeerBody(body: unknown): string {
  if (!Buffer.isBuffer(body)) throw new HttpRequestError('expected a JSON body (content-type: application/json)', 415);
  let o: unknown;
  try {
    o = parseJsonLossless(body);
  } catch (err) {
    throw new HttpRequestError(`body is not JSON: ${(err as Error).message}`);
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new HttpRequestError('body: expected a JSON object');
  return checkPeerUrl((o as { url?: unknown }).url);
}

/**
 * Adds the three routes to `api`. `options(path)` gives each route its fastify options (the
 * token guard of `TOKEN_ROUTES`, the body limit); `onChange` is told each added or removed URL.
 */
export function registerPeerRoutes(
  api: FastifyInstance,
  peers: PeerList,
  options: (path: string) => RouteShorthandOptions,
  onChange: (change: 'added' | 'removed', url: string) => void = () => {},
): void {
  const ok = (reply: FastifyReply, status: number): FastifyReply => reply.code(status).type(JSON_TYPE).send('{"status":"ok"}');
  api.post('/register_peer', options('/register_peer'), async (req, reply) => {
    const url = readPeerBody(req.body);
    if (peers.add(url)) onChange('added', url);
    return ok(reply, 201);
  });
  api.post('/deregister_peer', options('/deregister_peer'), async (req, reply) => {
    const url = readPeerBody(req.body);
    if (!peers.remove(url)) throw new HttpRequestError('peer not found', 404);
    onChange('removed', url);
    return ok(reply, 200);
  });
  api.get('/peers', options('/peers'), async (_req, reply) => reply.type(JSON_TYPE).send(JSON.stringify(peers.list())));
}
