/**
 * The snapshot lease: one router at a time snapshots a stream. Routers snapshot independently
 * (each when the stream passes its threshold, checks ±10 % apart), so two could dump, upload and
 * purge at once; the rules in `takeSnapshot` make such races settle on a covering snapshot, but
 * only after the fact, and each router uploaded its own copy of the whole index. The lease is a
 * key of a NATS KV bucket (`<bucket>-lease`, key `snapshot`) created with `create` (which fails
 * while the key exists) and deleted after the snapshot, only if it is still this router's
 * revision. The bucket's max age is the lease's time to live: a router that dies holding it
 * stops blocking the others after `snapshotLeaseMs` (default 60 s). A snapshot that outlasts
 * its lease is logged; it is still safe, by the rules it falls back to.
 *
 * Where the KV bucket cannot be made or read (an account without the permission, a server
 * refusing it), snapshots go on without a lease, logged once at warn: the lease is an
 * optimisation of the rules above, not what makes snapshots safe.
 */
import type { JetStreamClient, KV } from 'nats';
import type { Logger } from 'pino';
import { MAX_TIMER_MS } from '../protocol/time-limits.js';
import { errorFields, isApiError } from './errors.js';

/** Default time to live of the lease, ms: far longer than a snapshot takes (seconds at most). */
export const DEFAULT_LEASE_MS = 60_000;
/** Below this a lease (the KV bucket's max age, checked by the server about once a second) means little. */
const MIN_LEASE_MS = 1_000;

/** What an integer lease time (0: no lease) should have been, or null when it is fine: for the option and the CLI flag alike. */
export function leaseMsProblem(ms: number): string | null {
  return ms > 0 && ms < MIN_LEASE_MS ? `expected 0 (no lease) or an integer from ${MIN_LEASE_MS} to ${MAX_TIMER_MS}` : null;
}
const LEASE_KEY = 'snapshot';
/** JetStream `err_code` of a conditional write whose expected last sequence does not hold. */
const API_WRONG_LAST_SEQUENCE = 10071;

/** What `acquire` got: the lease's revision, `busy` (another router holds it) or `none` (no lease to take). */
export type LeaseGrant = { revision: number } | 'busy' | 'none';

export class SnapshotLease {
  /** The KV bucket once opened; null when it is unavailable (then every grant is `none`). */
  #kv: KV | null | undefined;
  #acquiredAt = 0;

  /**
   * `ttlMs` 0 turns the lease off. `holder` names this router in the key's value (for an
   * operator reading the bucket).
   */
  constructor(
    private readonly js: JetStreamClient,
    private readonly bucket: string,
    private readonly ttlMs: number,
    private readonly holder: string,
    private readonly logger: Logger | null,
  ) {
    if (ttlMs === 0) this.#kv = null;
  }

  /** Takes the lease if no router holds it. Errors other than "held" give `none`. */
  async acquire(): Promise<LeaseGrant> {
    const kv = await this.#open();
    if (kv === null) return 'none';
    try {
      const revision = await kv.create(LEASE_KEY, new TextEncoder().encode(this.holder));
      this.#acquiredAt = performance.now();
      return { revision };
    } catch (err) {
      if (isApiError(err, API_WRONG_LAST_SEQUENCE)) return 'busy';
      this.logger?.warn({ bucket: this.bucket, ...errorFields(err) }, 'snapshot lease could not be taken: snapshotting without it');
      return 'none';
    }
  }

  /** Gives the lease back, unless it expired and another router took it since (then that one's stays). */
  async release(grant: LeaseGrant): Promise<void> {
    if (typeof grant !== 'object') return;
    const held = performance.now() - this.#acquiredAt;
    if (held >= this.ttlMs) {
      this.logger?.warn({ bucket: this.bucket, heldMs: Math.round(held), leaseMs: this.ttlMs }, 'a snapshot outlasted its lease (raise snapshotLeaseMs): another router may have snapshotted meanwhile');
    }
    try {
      await this.#kv!.delete(LEASE_KEY, { previousSeq: grant.revision });
    } catch (err) {
      // Expired and taken by another router (its revision is newer), or NATS failed: the lease
      // then ends with its time to live.
      this.logger?.debug({ bucket: this.bucket, ...errorFields(err) }, 'snapshot lease not released');
    }
  }

  async #open(): Promise<KV | null> {
    if (this.#kv !== undefined) return this.#kv;
    try {
      this.#kv = await this.js.views.kv(this.bucket, { ttl: this.ttlMs, history: 1 });
    } catch (err) {
      try {
        // Made by a router with another snapshotLeaseMs: use it as it is.
        this.#kv = await this.js.views.kv(this.bucket, { bindOnly: true });
      } catch (bindErr) {
        // The server refused (an API error: permissions, limits): no lease from now on. A
        // timeout or a lost connection: none this time, try again at the next snapshot.
        const refused = (bindErr as { api_error?: unknown }).api_error !== undefined || (err as { api_error?: unknown }).api_error !== undefined;
        this.logger?.warn({ bucket: this.bucket, ...errorFields(err) }, `snapshot lease bucket unavailable: snapshotting without a lease${refused ? '' : ' this time'}`);
        if (refused) this.#kv = null;
        return null;
      }
    }
    return this.#kv;
  }
}
