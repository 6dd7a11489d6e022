/**
 * Forwarding of registrations between replicas (issue 38): a `/register` or `/unregister`
 * answered by one replica is sent, with the same body, to each of its peers, so an engine
 * registers once with any replica and every replica listens to it. Forwarded requests carry
 * `FORWARDED_HEADER`; a replica does not forward those again, so two replicas that are each
 * other's peer do not bounce a registration for ever. Registration is idempotent (the same
 * registration again is 201, engine-registry.ts), and an unregister a peer answers 404 was
 * already done there, so a forward that arrives twice changes nothing.
 *
 * Best effort, in the background: the engine's request is answered as soon as this replica
 * has applied it; a peer that fails is named in a WARN line (not retried: a replica that
 * missed it takes the registrations again from a peer when it restarts).
 */

import type { Logger } from 'pino';
import { clipText } from '../protocol/show-value.js';
import { peerRoute, type PeerList } from './peer-list.js';

/** The header that marks a request forwarded by a peer replica (value: `1`). */
export const FORWARDED_HEADER = 'x-kvindex-forwarded';

export interface RegistrationForwarderOptions {
  peers: PeerList;
  /** This replica's bearer token, sent to the peers (replicas of a fleet share one). */
  token?: string | null;
  logger?: Logger;
  /** Longest wait for a peer's answer, ms (default 5,000). */
  timeoutMs?: number;
}

/** Sends registrations to the peers of a replica. */
export class RegistrationForwarder {
  readonly #o: RegistrationForwarderOptions;
  readonly #pending = new Set<Promise<void>>();

  constructor(o: RegistrationForwarderOptions) {
    this.#o = o;
  }

  /** Sends `body` to `path` on every peer, in the background. */
  forward(path: '/register' | '/unregister', body: Uint8Array): void {
    for (const peer of this.#o.peers.list()) {
      const p = this.#send(peer, path, body);
      this.#pending.add(p);
      void p.finally(() => this.#pending.delete(p));
    }
  }

  /** Resolves when every forward under way has ended (shutdown, tests). */
  async settled(): Promise<void> {
    await Promise.all([...this.#pending]);
  }

  async #send(peer: string, path: string, body: Uint8Array): Promise<void> {
    const headers: Record<string, string> = { 'content-type': 'application/json', [FORWARDED_HEADER]: '1' };
    if (this.#o.token != null && this.#o.token !== '') headers.authorization = `Bearer ${this.#o.token}`;
    try {
      const res = await fetch(peerRoute(peer, path), { method: 'POST', headers, body, signal: AbortSignal.timeout(this.#o.timeoutMs ?? 5_000) });
      const text = await res.text();
      // 404 on /unregister: the peer did not have it (gone already): nothing to do there.
      if (res.ok || (path === '/unregister' && res.status === 404)) {
        this.#o.logger?.debug({ peer, path, status: res.status }, 'registration forwarded');
        return;
      }
      this.#o.logger?.warn({ peer, path, status: res.status, answer: clipText(text) }, 'a peer refused a forwarded registration');
    } catch (err) {
      const code = (err as { cause?: { code?: unknown } }).cause?.code;
      this.#o.logger?.warn({ peer, path, err: String(code ?? (err as Error).message) }, 'could not forward a registration to a peer');
    }
  }
}
