/**
 * The gateway's registrations forwarded to its index replicas (`kvindex gateway --index` with
 * `--engines`): each engine the gateway routes to is registered on every replica with Dynamo's
 * `POST /register` body, so a replica started without registrations (and without a peer to take
 * them from) subscribes to the gateway's engines by itself. Without it an operator had to
 * register every engine on the replicas by hand, and a replica that restarted empty scored
 * nothing until then: every lookup answered, with no overlap.
 *
 * Shaped so:
 * - In the background, never awaited by routing: a replica that is down or recovering (503
 *   `KVX_RECOVERING`, or 503 without ZMQ) is retried with a back-off that starts at `backoffMs`
 *   (200 ms) and doubles up to `maxBackoffMs` (10 s), one replica at a time in its own loop (a
 *   down replica does not hold the others' registrations). Every failure is counted by kind;
 *   one WARN line per replica when it starts failing (and one INFO when it accepts again),
 *   not one per attempt.
 * - Idempotent: the replica answers the same registration again with 201 and changes nothing
 *   (src/http/engine-registry.ts), so the whole set is sent again every `refreshMs` (30 s): a
 *   replica that restarted empty with no peer has the gateway's engines back within that, at a
 *   cost of one small request per engine and replica. A replica forwards what it accepts to its
 *   own peers as it does for an engine's registration (idempotent there too).
 * - An engine unregistered from the gateway is no longer sent, but not unregistered from the
 *   replicas: other gateways may route to it, and the replicas' own `/unregister` is the
 *   engine's (or the operator's) to call.
 * - Instance ids are u64, written as JSON integer text from the bigint (exact).
 */

import type { Logger } from 'pino';
import type { RegisterRequest } from '../http/requests.js';
import { clipText } from '../protocol/show-value.js';

/** Why a registration at a replica failed. */
export const RegisterFailure = {
  /** Connection refused or reset, or no answer within `timeoutMs`. */
  Error: 'error',
  /** 503: the replica is recovering from a peer, or has no ZMQ; retried. */
  Unavailable: 'unavailable',
  /** Any other status that is not a success (400, 401, 409, 5xx); retried at the longest back-off. */
  Refused: 'refused',
} as const;
export type RegisterFailure = (typeof RegisterFailure)[keyof typeof RegisterFailure];

export interface ReplicaRegistrarOptions {
  /** Base URLs of the replicas (checked by the caller: `readReplicaUrl`). */
  replicas: readonly string[];
  /** Bearer token of the replicas' `/register` (null: none). */
  token?: string | null;
  logger?: Logger | null;
  /** First wait after a failure, ms (default 200). */
  backoffMs?: number;
  /** Longest wait, ms (default 10,000); also the wait after a refusal (4xx). */
  maxBackoffMs?: number;
  /** Every registration is sent again this often, ms (default 30,000; 0: never). */
  refreshMs?: number;
  /** Longest wait for a replica's answer, ms (default 2,000). */
  timeoutMs?: number;
  /** Whether an engine is still the gateway's (one unregistered since is not sent again). */
  current?: (r: RegisterRequest) => boolean;
}

/** Counters of one replica. */
export interface ReplicaRegistrationStats {
  readonly url: string;
  /** Registrations the replica accepted (2xx), refreshes included. */
  registered: number;
  failures: Record<RegisterFailure, number>;
  /** Registrations not yet accepted. */
  pending: number;
}

interface Target {
  readonly stats: ReplicaRegistrationStats;
  /** Engine key -> body, still to send. */
  readonly queue: Map<string, string>;
  running: boolean;
  /** The failure this replica is in (logged once), or null. */
  failing: RegisterFailure | null;
  /** The wait before the next attempt after a failure, ms. */
  backoff: number;
  timer: NodeJS.Timeout | null;
  wake: (() => void) | null;
}

const key = (r: RegisterRequest): string => JSON.stringify([String(r.instanceId), r.modelName, r.tenantId, r.dpRank]);

/** Dynamo's `/register` body of `r` (u64 instance id exact). */
export function registerBody(r: RegisterRequest): string {
  return `{"instance_id":${r.instanceId.toString()},"endpoint":${JSON.stringify(r.endpoint)},"model_name":${JSON.stringify(r.modelName)},"block_size":${r.blockSize},`
    + `"tenant_id":${JSON.stringify(r.tenantId)},"dp_rank":${r.dpRank}${r.replayEndpoint === null ? '' : `,"replay_endpoint":${JSON.stringify(r.replayEndpoint)}`}}`;
}

/** Registers the gateway's engines on its index replicas, in the background, until `close()`. */
export class ReplicaRegistrar {
  readonly #targets: Target[];
  readonly #engines = new Map<string, RegisterRequest>();
  readonly #token: string | null;
  readonly #logger: Logger | null;
  readonly #backoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #timeoutMs: number;
  readonly #current: (r: RegisterRequest) => boolean;
  readonly #refresh: NodeJS.Timeout | null;
  readonly #loops = new Set<Promise<void>>();
  /** Aborts the requests under way at `close()`: shutdown must not wait for a replica's timeout. */
  readonly #stop = new AbortController();
  #closed = false;

  constructor(o: ReplicaRegistrarOptions) {
    this.#targets = o.replicas.map((url) => ({
      stats: { url, registered: 0, failures: { error: 0, unavailable: 0, refused: 0 }, pending: 0 },
      queue: new Map(), running: false, failing: null, backoff: 0, timer: null, wake: null,
    }));
    this.#token = o.token ?? null;
    this.#logger = o.logger ?? null;
    this.#backoffMs = o.backoffMs ?? 200;
    this.#maxBackoffMs = Math.max(this.#backoffMs, o.maxBackoffMs ?? 10_000);
    this.#timeoutMs = o.timeoutMs ?? 2_000;
    this.#current = o.current ?? (() => true);
    const refreshMs = o.refreshMs ?? 30_000;
    this.#refresh = refreshMs > 0 ? setInterval(() => this.#sendAll(), refreshMs).unref() : null;
  }

  /** Per replica: registrations accepted, failures by kind, registrations still to send (live objects). */
  get stats(): readonly ReplicaRegistrationStats[] {
    return this.#targets.map((t) => t.stats);
  }

  /** Registers `r` on every replica (in the background) and keeps it in the refreshed set. */
  register(r: RegisterRequest): void {
    if (this.#closed) return;
    const k = key(r);
    this.#engines.set(k, r);
    const body = registerBody(r);
    for (const t of this.#targets) this.#enqueue(t, k, body);
  }

  /** Whether every registration given so far was accepted by every replica (since its last refresh). */
  get settled(): boolean {
    return this.#targets.every((t) => t.queue.size === 0);
  }

  #sendAll(): void {
    for (const [k, r] of this.#engines) {
      if (!this.#current(r)) {
        this.#engines.delete(k);
        continue;
      }
      const body = registerBody(r);
      for (const t of this.#targets) this.#enqueue(t, k, body);
    }
  }

  #enqueue(t: Target, k: string, body: string): void {
    t.queue.set(k, body);
    t.stats.pending = t.queue.size;
    if (!t.running) {
      t.running = true;
      const loop = this.#run(t).finally(() => {
        t.running = false;
        this.#loops.delete(loop);
      });
      this.#loops.add(loop);
    }
  }

  /** Sends `t`'s queue in order; after a failure waits its back-off and tries the same one again. */
  async #run(t: Target): Promise<void> {
    while (!this.#closed && t.queue.size > 0) {
      const [k, body] = t.queue.entries().next().value as [string, string];
      const r = this.#engines.get(k);
      if (r !== undefined && !this.#current(r)) {
        this.#engines.delete(k);
        t.queue.delete(k);
        t.stats.pending = t.queue.size;
        continue;
      }
      const failure = await this.#send(t, body);
      if (this.#closed) return;
      if (failure === null) {
        t.queue.delete(k);
        t.stats.pending = t.queue.size;
        t.stats.registered++;
        t.backoff = 0;
        if (t.failing !== null) {
          this.#logger?.info({ replica: t.stats.url, failures: { ...t.stats.failures } }, 'index replica accepts the gateway\'s registrations again');
          t.failing = null;
        }
        continue;
      }
      t.stats.failures[failure.kind]++;
      t.backoff = failure.kind === RegisterFailure.Refused ? this.#maxBackoffMs : Math.min(this.#maxBackoffMs, t.backoff === 0 ? this.#backoffMs : t.backoff * 2);
      if (t.failing !== failure.kind) {
        this.#logger?.warn({ replica: t.stats.url, failure: failure.kind, err: failure.detail, retryMs: t.backoff }, 'could not register the gateway\'s engines on an index replica: retrying');
        t.failing = failure.kind;
      }
      await new Promise<void>((resolve) => {
        t.wake = resolve;
        t.timer = setTimeout(resolve, t.backoff);
      });
      t.timer = null;
      t.wake = null;
    }
  }

  async #send(t: Target, body: string): Promise<{ kind: RegisterFailure; detail: string } | null> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.#token !== null) headers.authorization = `Bearer ${this.#token}`;
    try {
      const res = await fetch(`${t.stats.url}/register`, { method: 'POST', headers, body, signal: AbortSignal.any([this.#stop.signal, AbortSignal.timeout(this.#timeoutMs)]) });
      const text = await res.text();
      if (res.ok) return null;
      return { kind: res.status === 503 ? RegisterFailure.Unavailable : RegisterFailure.Refused, detail: `status ${res.status}: ${clipText(text)}` };
    } catch (err) {
      const code = (err as { cause?: { code?: unknown } }).cause?.code;
      return { kind: RegisterFailure.Error, detail: String(code ?? (err as Error).message) };
    }
  }

  /** Stops sending; a request under way is aborted. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#stop.abort();
    if (this.#refresh !== null) clearInterval(this.#refresh);
    for (const t of this.#targets) {
      if (t.timer !== null) clearTimeout(t.timer);
      t.wake?.();
    }
    await Promise.all([...this.#loops]);
  }
}
