/**
 * The peers of a standalone indexer replica: other `kvindex serve --http` (or Dynamo
 * standalone indexer) replicas fed by the same engines. A replica that starts with peers
 * recovers from the first reachable one (peer-recovery.ts), and registrations made on one are
 * forwarded to the others. The list is Dynamo's: URLs as they were given, in the order they
 * were added, each once (`GET /peers` answers them as a JSON array of strings).
 *
 * A peer URL is checked before it is kept: http or https only (the replica sends requests to
 * it), at most `PEER_URL_MAX_CHARS` characters, and no user or password in it (the URL is
 * logged, and secrets never reach logs).
 */

import { showValue } from '../protocol/show-value.js';
import { HttpRequestError } from './requests.js';

/** Longest peer URL kept, in characters (a host name is at most 253, a path prefix a few more). */
export const PEER_URL_MAX_CHARS = 2048;

/**
 * `url` if it is an http(s) URL a replica can send requests to; else throws `HttpRequestError`
 * (400, `KVX_HTTP_BAD_REQUEST`) whose message quotes the value clipped (showValue). `field`
 * names it in the message (`url` in a request body, `--peers` on the command line).
 */
export function checkPeerUrl(url: unknown, field = 'url'): string {
  if (typeof url !== 'string' || url === '') throw new HttpRequestError(`${field}: expected an http(s) URL, got ${showValue(url)}`);
  if (url.length > PEER_URL_MAX_CHARS) throw new HttpRequestError(`${field}: expected at most ${PEER_URL_MAX_CHARS} characters, got ${showValue(url)}`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new HttpRequestError(`${field}: ${showValue(url)} is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new HttpRequestError(`${field}: expected http:// or https://, got ${showValue(parsed.protocol)}`);
  }
  // Never echo the credentials themselves: the message names the host only.
  if (parsed.username !== '' || parsed.password !== '') throw new HttpRequestError(`${field}: a peer URL carries no user or password (host ${showValue(parsed.host)})`);
  if (parsed.search !== '' || parsed.hash !== '') throw new HttpRequestError(`${field}: a peer URL has no query or fragment, got ${showValue(url)}`);
  return url;
}

/**
 * The URL of `path` (`/dump`, `/register`) on `peer`, whatever the peer URL ends with: a path
 * prefix is kept (`http://h/indexer` -> `http://h/indexer/dump`).
 */
export function peerRoute(peer: string, path: string): string {
  return `${peer.replace(/\/+$/, '')}${path}`;
}

/** The peer URLs of a replica, in the order added, each once. */
export class PeerList {
  readonly #urls = new Set<string>();

  constructor(urls: Iterable<string> = []) {
    for (const u of urls) this.add(u);
  }

  /** Adds a checked URL (`checkPeerUrl`); returns false when it was there already. */
  add(url: string): boolean {
    if (this.#urls.has(url)) return false;
    this.#urls.add(url);
    return true;
  }

  /** Removes `url`; returns false when it was not a peer. */
  remove(url: string): boolean {
    return this.#urls.delete(url);
  }

  /** The URLs, in the order added. */
  list(): string[] {
    return [...this.#urls];
  }

  get size(): number {
    return this.#urls.size;
  }
}
