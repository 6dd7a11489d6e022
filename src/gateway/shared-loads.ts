/**
 * Loads shared between gateways over NATS (`kvindex gateway --nats <url>`): every request this
 * gateway routes, marks (first token) and frees is published as Dynamo's
 * `ActiveSequenceEvent`, and the other gateways' events are applied to this gateway's routers
 * (peer-loads.ts), so gateways in front of the same engines price every engine with every
 * gateway's requests in flight. Wire format and subjects: shared-loads-wire.ts.
 *
 * Operations, as a production operator expects them:
 * - NATS is never on the request path: publishing is a buffered write, and a gateway whose NATS
 *   is unreachable at start or lost later keeps routing with its local view (its own requests,
 *   and its peers' until their heartbeats are overdue). Connection states are one `as const`
 *   set with one transition function: each change is logged once (WARN when loads stop being
 *   shared, INFO when they are shared again) and counted (`outages`); the first connection is
 *   retried every `retryMs`, a lost one is reconnected by nats.js (connect.ts).
 * - A peer's own events are skipped by its random u64 router id.
 * - A dead peer's loads are freed when its heartbeats stop for `expiryMs` (peer-loads.ts says
 *   why heartbeats and not a short TTL); a clean stop says "leaving" and is freed at once.
 * - A malformed message is counted and logged (the first at once, then at most one line per
 *   10 s with the count since), never thrown.
 * - Credentials never reach a log line: URLs are logged redacted and errors scrubbed
 *   (src/nats/auth.ts).
 */
import { randomBytes } from 'node:crypto';
import { Events, type NatsConnection } from 'nats';
import type { Logger } from 'pino';
import { KvIndexError, ErrorCode } from '../errors.js';
import { redactUrl, resolveAuth, type NatsAuthOptions } from '../nats/auth.js';
import { connectNats, resolveServers } from '../nats/connect.js';
import { errorFields } from '../nats/errors.js';
import { MAX_TIMER_MS } from '../protocol/time-limits.js';
import type { ActiveSequences } from '../router/active-sequences.js';
import { formatActiveSequenceEvent, parseActiveSequenceEvent, type ActiveSequenceEvent } from '../router/sequence-event.js';
import type { Gateway } from './gateway.js';
import { ApplyResult, PeerLoads } from './peer-loads.js';
import { formatHeartbeat, parseHeartbeat, sharedLoadsSubjects, wireRequestId, type SharedLoadsSubjects } from './shared-loads-wire.js';

/** Connection states. */
export const SharedLoadsState = {
  /** The first connection is being made. */
  Connecting: 'connecting',
  /** Loads are shared. */
  Connected: 'connected',
  /** NATS unreachable (at start) or lost (later): the local view only, retrying. */
  Disconnected: 'disconnected',
  Closed: 'closed',
} as const;
export type SharedLoadsState = (typeof SharedLoadsState)[keyof typeof SharedLoadsState];

export interface SharedLoadsOptions {
  /** NATS URL(s); user info is used as credentials and never logged. */
  servers: string | string[];
  auth?: NatsAuthOptions;
  /** Dynamo namespace and component of the subjects (default `dynamo`, `backend`). */
  namespace?: string;
  component?: string;
  /** This gateway's u64 router id (default: random). */
  routerId?: bigint;
  /** Heartbeat interval, ms (default 1,000). */
  heartbeatMs?: number;
  /** A peer silent this long is dropped with its loads, ms (default 5,000; more than the interval). */
  expiryMs?: number;
  /** Delay between first-connection attempts, ms (default 2,000). */
  retryMs?: number;
  logger?: Logger;
}

/** Counters since start (events: messages on the sequences subject). */
export interface SharedLoadsStats {
  state: SharedLoadsState;
  /** This gateway's events published, and those that could not be (no connection, a publish error). */
  published: number;
  unshared: number;
  /** Peer events by what applying them did (peer-loads.ts `ApplyResult`), and malformed messages (both subjects). */
  applied: number;
  own: number;
  unknownWorker: number;
  unknownRequest: number;
  duplicate: number;
  malformed: number;
  heartbeatsSent: number;
  heartbeatsReceived: number;
  /** Times loads stopped being shared (NATS unreachable at start, or lost). */
  outages: number;
  peers: number;
  remoteRequests: number;
  expiredPeers: number;
  expiredRequests: number;
}

const encoder = new TextEncoder();
const MALFORMED_LOG_MS = 10_000;

export class SharedLoads {
  readonly routerId: bigint;
  readonly subjects: SharedLoadsSubjects;
  readonly #hex: string;
  readonly #servers: string[];
  readonly #shown: string;
  readonly #auth: NatsAuthOptions;
  readonly #heartbeatMs: number;
  readonly #expiryMs: number;
  readonly #retryMs: number;
  readonly #logger: Logger | null;
  #state: SharedLoadsState = SharedLoadsState.Connecting;
  #nc: NatsConnection | null = null;
  #peers: PeerLoads | null = null;
  #gateway: Gateway | null = null;
  #timer: NodeJS.Timeout | null = null;
  #wake: (() => void) | null = null;
  #everConnected = false;
  #malformedSinceLog = 0;
  #lastMalformedLog = -Infinity;
  readonly #c = { published: 0, unshared: 0, applied: 0, own: 0, unknownWorker: 0, unknownRequest: 0, duplicate: 0, malformed: 0, heartbeatsSent: 0, heartbeatsReceived: 0, outages: 0 };

  /** Checks the options (throws `KvIndexError` `InvalidOption`, never with a secret); connects on `start`. */
  constructor(options: SharedLoadsOptions) {
    this.#servers = resolveServers(options.servers);
    this.#auth = options.auth ?? {};
    resolveAuth(this.#servers, this.#auth); // unreadable files and bad TLS pairs fail now, not in the retry loop
    this.#shown = this.#servers.map(redactUrl).join(', ');
    this.subjects = sharedLoadsSubjects(options.namespace, options.component);
    this.routerId = options.routerId ?? randomBytes(8).readBigUInt64LE(0);
    this.#hex = this.routerId.toString(16);
    const ms = (name: string, v: number | undefined, dflt: number): number => {
      const x = v ?? dflt;
      if (!(Number.isInteger(x) && x >= 1 && x <= MAX_TIMER_MS)) throw new KvIndexError(ErrorCode.InvalidOption, `${name}: expected an integer from 1 to ${MAX_TIMER_MS} ms, got ${String(x)}`);
      return x;
    };
    this.#heartbeatMs = ms('heartbeatMs', options.heartbeatMs, 1_000);
    this.#expiryMs = ms('expiryMs', options.expiryMs, 5_000);
    if (this.#expiryMs <= this.#heartbeatMs) throw new KvIndexError(ErrorCode.InvalidOption, `expiryMs: expected more than heartbeatMs (${this.#heartbeatMs}), got ${this.#expiryMs}`);
    this.#retryMs = ms('retryMs', options.retryMs, 2_000);
    this.#logger = options.logger ?? null;
  }

  /** Router options that publish this gateway's decisions: spread them into `GatewayOptions.routing`. */
  routerOptions(): { routerId: bigint; onSequenceEvent: (e: ActiveSequenceEvent) => void } {
    return { routerId: this.routerId, onSequenceEvent: (e) => this.#publish(e) };
  }

  get state(): SharedLoadsState {
    return this.#state;
  }

  /** Starts applying peers' events to `gateway`'s routers and connects in the background (never throws, never waits). */
  start(gateway: Gateway): void {
    if (this.#gateway !== null) return;
    this.#gateway = gateway;
    this.#peers = new PeerLoads({ routerId: this.routerId, expiryMs: this.#expiryMs, sequencesOf: (w, r) => sequencesOf(gateway, w, r) });
    this.#timer = setInterval(() => this.#tick(), this.#heartbeatMs);
    this.#timer.unref();
    this.#runConnectLoop();
  }

  /** Resolves once loads are shared (or after `ms`; then false). For tests and start-up scripts. */
  async connected(ms = 10_000): Promise<boolean> {
    const until = performance.now() + ms;
    while (this.#state !== SharedLoadsState.Connected) {
      if (this.#state === SharedLoadsState.Closed || performance.now() > until) return false;
      await new Promise((r) => setTimeout(r, 10));
    }
    return true;
  }

  stats(): SharedLoadsStats {
    const p = this.#peers?.stats() ?? { peers: 0, remoteRequests: 0, expiredPeers: 0, expiredRequests: 0 };
    return { state: this.#state, ...this.#c, ...p };
  }

  /** Says "leaving" to the peers, frees their loads here and closes the connection. */
  async close(): Promise<void> {
    if (this.#state === SharedLoadsState.Closed) return;
    const nc = this.#nc;
    if (nc !== null && this.#state === SharedLoadsState.Connected) {
      try {
        nc.publish(this.subjects.heartbeat, encoder.encode(formatHeartbeat({ routerId: this.routerId, intervalMs: this.#heartbeatMs, inFlight: this.#inFlight(), leaving: true })));
      } catch {
        // closing anyway
      }
    }
    this.#state = SharedLoadsState.Closed;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#wake?.();
    // A first connection still being attempted is not awaited (up to retryMs: past the 1 s stop
    // deadline of the CLI); the loop closes it if it completes.
    this.#peers?.clear();
    this.#nc = null;
    if (nc === null) return;
    // Drain flushes the leaving heartbeat; a server that does not answer gets 500 ms.
    const drained = await Promise.race([nc.drain().then(() => true, () => false), new Promise<boolean>((r) => setTimeout(() => r(false), 500).unref())]);
    if (!drained) await nc.close().catch(() => undefined);
  }

  #closed(): boolean {
    return this.#state === SharedLoadsState.Closed;
  }

  /** The one transition: logs and counts each change once. */
  #enter(next: SharedLoadsState, fields: Record<string, unknown> = {}): void {
    const prev = this.#state;
    if (prev === next || prev === SharedLoadsState.Closed) return;
    this.#state = next;
    const log = this.#logger;
    if (next === SharedLoadsState.Connected) {
      log?.info({ servers: this.#shown, subject: this.subjects.sequences, routerId: this.#hex, ...fields }, this.#everConnected ? 'NATS back: sharing loads again' : 'sharing loads with the other gateways over NATS');
      this.#everConnected = true;
    } else if (next === SharedLoadsState.Disconnected) {
      this.#c.outages++;
      log?.warn({ servers: this.#shown, ...fields }, prev === SharedLoadsState.Connecting
        ? 'NATS unreachable: loads not shared, routing with this gateway\'s view; retrying'
        : 'NATS connection lost: loads not shared, routing with this gateway\'s view; reconnecting');
    }
  }

  /** Starts the connect loop; a failure it did not expect is logged, never an unhandled rejection. */
  #runConnectLoop(): void {
    this.#connectLoop().catch((err: unknown) => {
      this.#enter(SharedLoadsState.Disconnected, errorFields(err));
      this.#logger?.error(errorFields(err), 'shared loads: the NATS connect loop failed; loads stay local');
    });
  }

  async #connectLoop(): Promise<void> {
    while (this.#state !== SharedLoadsState.Closed) {
      let nc: NatsConnection;
      try {
        nc = await connectNats({ servers: this.#servers, auth: this.#auth, connectTimeoutMs: this.#retryMs, name: `kvindex-gateway-${this.#hex}`, ...(this.#logger === null ? {} : { logger: this.#logger }) });
      } catch (err) {
        this.#enter(SharedLoadsState.Disconnected, errorFields(err));
        this.#logger?.debug({ servers: this.#shown, ...errorFields(err) }, 'NATS still unreachable');
        await this.#sleep(this.#retryMs);
        continue;
      }
      if (this.#closed()) {
        await nc.close().catch(() => undefined);
        return;
      }
      this.#nc = nc;
      // Closed with the connection (drain in close()).
      nc.subscribe(this.subjects.sequences, { callback: (err, m) => (err === null ? this.#onEvent(m.data) : undefined) });
      nc.subscribe(this.subjects.heartbeat, { callback: (err, m) => (err === null ? this.#onHeartbeat(m.data) : undefined) });
      this.#watch(nc);
      // A heartbeat now: peers learn of this gateway before its first request.
      this.#enter(SharedLoadsState.Connected);
      this.#heartbeat();
      return;
    }
  }

  /** Follows nats.js's reconnects; a connection closed under us is made again. */
  #watch(nc: NatsConnection): void {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === Events.Disconnect) this.#enter(SharedLoadsState.Disconnected, { server: redactUrl(String(s.data)) });
        else if (s.type === Events.Reconnect) {
          this.#enter(SharedLoadsState.Connected);
          this.#heartbeat();
        }
      }
    })().catch(() => undefined);
    void nc.closed().then(() => {
      if (this.#state === SharedLoadsState.Closed || this.#nc !== nc) return;
      this.#nc = null;
      this.#enter(SharedLoadsState.Disconnected, { err: 'connection closed' });
      this.#runConnectLoop();
    });
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.#wake = null;
        resolve();
      }, ms);
      this.#wake = () => {
        clearTimeout(t);
        this.#wake = null;
        resolve();
      };
    });
  }

  #publish(e: ActiveSequenceEvent): void {
    const nc = this.#nc;
    if (nc === null) {
      this.#c.unshared++;
      return;
    }
    try {
      // While nats.js reconnects it buffers the publish; the peers get it once back.
      nc.publish(this.subjects.sequences, encoder.encode(formatActiveSequenceEvent({ ...e, requestId: wireRequestId(e.requestId, this.#hex) })));
      this.#c.published++;
    } catch (err) {
      this.#c.unshared++;
      this.#logger?.debug({ type: e.data.type, ...errorFields(err) }, 'active sequence event not shared');
    }
  }

  #onEvent(data: Uint8Array): void {
    let e: ActiveSequenceEvent;
    try {
      e = parseActiveSequenceEvent(data);
    } catch (err) {
      this.#malformed(this.subjects.sequences, data, err);
      return;
    }
    const r = this.#peers!.apply(e);
    if (r === ApplyResult.Applied) this.#c.applied++;
    else if (r === ApplyResult.Own) this.#c.own++;
    else if (r === ApplyResult.UnknownWorker) this.#c.unknownWorker++;
    else if (r === ApplyResult.UnknownRequest) this.#c.unknownRequest++;
    else this.#c.duplicate++;
  }

  #onHeartbeat(data: Uint8Array): void {
    let h;
    try {
      h = parseHeartbeat(data);
    } catch (err) {
      this.#malformed(this.subjects.heartbeat, data, err);
      return;
    }
    if (h.routerId === this.routerId) return;
    this.#c.heartbeatsReceived++;
    if (h.leaving) {
      const gone = this.#peers!.leave(h.routerId);
      if (gone !== null) this.#logger?.info({ peer: gone.routerId.toString(16), freed: gone.requests }, 'a gateway left: its loads are freed');
    } else {
      this.#peers!.heartbeat(h.routerId, h.intervalMs);
    }
  }

  #malformed(subject: string, data: Uint8Array, err: unknown): void {
    this.#c.malformed++;
    this.#malformedSinceLog++;
    const now = performance.now();
    if (now - this.#lastMalformedLog < MALFORMED_LOG_MS) return;
    this.#logger?.warn({ subject, bytes: data.length, count: this.#malformedSinceLog, ...errorFields(err) }, 'malformed shared-loads message ignored');
    this.#lastMalformedLog = now;
    this.#malformedSinceLog = 0;
  }

  #tick(): void {
    for (const p of this.#peers?.sweep() ?? []) {
      this.#logger?.warn({ peer: p.routerId.toString(16), silentMs: Math.round(p.silentMs), freed: p.requests }, 'a gateway stopped sending heartbeats: its loads are freed');
    }
    this.#heartbeat();
  }

  #heartbeat(): void {
    const nc = this.#nc;
    if (nc === null || this.#state !== SharedLoadsState.Connected) return;
    try {
      nc.publish(this.subjects.heartbeat, encoder.encode(formatHeartbeat({ routerId: this.routerId, intervalMs: this.#heartbeatMs, inFlight: this.#inFlight(), leaving: false })));
      this.#c.heartbeatsSent++;
    } catch (err) {
      this.#logger?.debug(errorFields(err), 'heartbeat not sent');
    }
  }

  /** This gateway's own requests in flight. */
  #inFlight(): number {
    const gw = this.#gateway;
    if (gw === null) return 0;
    let n = 0;
    for (const ix of gw.registry.indexes()) n += ix.router?.sequences.size ?? 0;
    return Math.max(0, n - (this.#peers?.remoteRequests ?? 0));
  }
}

/** The in-flight tables of the routers having (worker, rank) as a candidate. */
function sequencesOf(gw: Gateway, workerId: bigint, dpRank: number): ActiveSequences[] {
  const out: ActiveSequences[] = [];
  for (const l of gw.registry.listeners()) {
    if (l.instanceId !== workerId || l.dpRank !== dpRank) continue;
    const s = gw.registry.router(l.modelName, l.tenantId)?.sequences;
    if (s !== undefined && !out.includes(s)) out.push(s);
  }
  return out;
}
