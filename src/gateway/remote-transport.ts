/**
 * The two ways the remote lookup client (remote-index.ts) asks a replica `POST /query_by_hash`,
 * behind one interface chosen once per replica: the lean pipelined HTTP/1.1 client
 * (remote-http1.ts, the default) and undici's keep-alive `Pool` (the first implementation, kept
 * as the benchmark's baseline and for https replicas). Both call back once per request with an
 * error or the status and body text.
 */

import { Pool } from 'undici';
import { Http1Replica, type Http1Callback } from './remote-http1.js';

/** How a replica is asked: the lean HTTP/1.1 client (remote-http1.ts) or an undici `Pool`. */
export interface ReplicaTransport {
  /** `live()` false: the request may be dropped unsent (`CANCELLED`) when it had to wait. */
  post(body: Uint8Array, cb: Http1Callback, live: () => boolean): void;
  /** Requests sent and not answered. */
  readonly inFlight: number;
  close(): Promise<void>;
}

/** The lean client: pipelined keep-alive connections, one writev per turn, callbacks. */
export class Http1Transport implements ReplicaTransport {
  readonly #r: Http1Replica;

  constructor(url: string, connections: number, timeoutMs: number) {
    this.#r = new Http1Replica({ url, path: '/query_by_hash', connections, timeoutMs });
  }

  post(body: Uint8Array, cb: Http1Callback, live: () => boolean): void {
    this.#r.post(body, cb, live);
  }

  get inFlight(): number {
    return this.#r.inFlight;
  }

  close(): Promise<void> {
    this.#r.close();
    return Promise.resolve();
  }
}

/** undici keep-alive pool (what the client used first; https replicas). */
export class UndiciTransport implements ReplicaTransport {
  readonly #pool: Pool;
  readonly #timeoutMs: number;

  constructor(url: string, connections: number, timeoutMs: number) {
    this.#pool = new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 30_000, connect: { timeout: 1_000 } });
    this.#timeoutMs = timeoutMs;
  }

  post(body: Uint8Array, cb: Http1Callback): void {
    this.#pool.request({
      path: '/query_by_hash', method: 'POST', body,
      headers: { 'content-type': 'application/json' },
      headersTimeout: this.#timeoutMs, bodyTimeout: this.#timeoutMs,
    }).then(
      async (res) => {
        let text: string;
        try {
          text = await res.body.text();
        } catch (err) {
          cb(err as Error, 0, '');
          return;
        }
        cb(null, res.statusCode, text);
      },
      (err: Error) => cb(err, 0, ''),
    );
  }

  get inFlight(): number {
    return this.#pool.stats.pending + this.#pool.stats.running;
  }

  async close(): Promise<void> {
    await this.#pool.destroy().catch(() => undefined);
  }
}
