/**
 * A client of replicated `kvindex serve --http` indexes with a deadline: `lookup` asks one
 * replica for a prompt's overlap scores (`POST /query_by_hash`), asks a second one when no
 * answer came within the hedge delay, and past the deadline gives up (fail-open: the caller
 * routes by load alone). The gateway uses it with `--index` (remote-routing.ts); a library user
 * who routes in their own process uses it directly.
 *
 * Shaped so:
 * - `/query_by_hash` with the block hashes computed here: the router hashes the prompt anyway
 *   (its in-flight bookkeeping needs the hashes), and the body is one number per block instead
 *   of one per token (a 1,024-token prompt: ~1.3 kB instead of ~6 kB), which the replica reads
 *   without hashing. Hashes are written as u64 decimal from the BigUint64Array (exact); the
 *   answer's worker ids are JSON object keys, i.e. strings, so `JSON.parse` keeps them exact.
 * - Keep-alive connections per replica, so a lookup never pays a connect: by default the lean
 *   pipelined HTTP/1.1 client of remote-http1.ts (one writev per event-loop turn, a callback per
 *   answer), or undici's `Pool` (`transport: 'undici'`, and any https replica).
 * - Primaries in round robin over the replicas that are not backed off, so both share the load.
 * - A replica is backed off (skipped) after an error, a refused connection, an answer that is
 *   not 200 with scores (garbage, a 5xx, `503 KVX_RECOVERING` while it recovers from a peer), or
 *   `missesBeforeBackoff` (3) lookups in a row that ended (another replica answered, or the
 *   deadline passed) without its answer while it has been silent (no answer at all, late ones
 *   included) for `silenceMs` (20 ms): dead, not slow. Slow replicas are not backed off, and the
 *   last eligible replica never is for slowness (measured: backing off replicas after 3 slow
 *   answers each failed 95 % of the lookups open on a busy host). The back-off starts at `backoffMs`, doubles at each failure in a row up to
 *   `maxBackoffMs` (1 s: longer left a gateway failing open for seconds after a host stall had
 *   passed, and a probe a second of a dead replica costs one hedge delay); a 200 in time resets it. When it ends, the replica is eligible again and
 *   its next lookup is the probe (one more failure: twice as long).
 * - A late answer (after the deadline) is read and dropped (counted); it proves the replica
 *   alive (its miss streak restarts) but does not end a back-off. Attempts end for good after
 *   `attemptTimeoutMs`, so a paused replica holds at most
 *   its pool's connections.
 * - Timers are `setTimeout`, whose granularity is 1 ms (a fraction is not honoured), so the
 *   hedge and the deadline are whole milliseconds.
 */

import type { Logger } from 'pino';
import { ErrorCode, KvIndexError } from '../errors.js';
import { showValue } from '../protocol/show-value.js';
import { Http1Transport, UndiciTransport, type ReplicaTransport } from './remote-transport.js';
import { CANCELLED } from './remote-http1.js';
import { QueryBodyWriter } from './remote-query-body.js';
import { readScores } from './remote-scores.js';

export { readScores };

/** Why an attempt at one replica failed. */
export const ReplicaFailure = {
  /** Connection refused or reset, a socket error, the attempt timeout. */
  Error: 'error',
  /** `missesBeforeBackoff` lookups in a row ended (by another replica's answer or the deadline) without its answer. */
  Timeout: 'timeout',
  /** `503 KVX_RECOVERING`: the replica is recovering from a peer and answers no lookup yet. */
  Recovering: 'recovering',
  /** Any other status than 200 (404 for a (model, tenant) it does not index included). */
  Status: 'status',
  /** A 200 whose body is not the scores document. */
  Garbage: 'garbage',
} as const;
export type ReplicaFailure = (typeof ReplicaFailure)[keyof typeof ReplicaFailure];

/** The HTTP client of the lookups. */
export const RemoteTransport = {
  /** Pipelined keep-alive HTTP/1.1 over `net`, one writev per turn (remote-http1.ts). */
  Http1: 'http1',
  /** undici's `Pool`. */
  Undici: 'undici',
} as const;
export type RemoteTransport = (typeof RemoteTransport)[keyof typeof RemoteTransport];

/** Why a lookup failed open (the caller routes by load alone). */
export const FailOpen = {
  /** No replica answered within the deadline. */
  Deadline: 'deadline',
  /** Every replica tried failed before the deadline. */
  Failed: 'failed',
  /** Every replica was backed off: nothing was asked. */
  NoReplica: 'no_replica',
} as const;
export type FailOpen = (typeof FailOpen)[keyof typeof FailOpen];

export interface RemoteIndexOptions {
  /** Base URLs of the replicas (`http://127.0.0.1:8090`), at least one. */
  replicas: readonly string[];
  /** The whole lookup's budget, ms (default 2). */
  deadlineMs?: number;
  /** Ask a second replica when the first has not answered after this long, ms (default: half the deadline, at least 1). */
  hedgeMs?: number;
  /** First back-off of a failed replica, ms (default 100). */
  backoffMs?: number;
  /** Longest back-off, ms (default 1,000: a dead replica costs one probe a second). */
  maxBackoffMs?: number;
  /** Lookups in a row that ended without the replica's answer (another answered, or the deadline passed) before it is backed off (default 3). */
  missesBeforeBackoff?: number;
  /**
   * A replica owing an answer this long with no answer of any kind (late ones count) is silent,
   * and backed off after `missesBeforeBackoff` lookups missed it (default: 10 deadlines, at least 20 ms).
   */
  silenceMs?: number;
  /** An attempt's answer is awaited this long at most, then it fails (default 1,000 ms). */
  attemptTimeoutMs?: number;
  /** Keep-alive connections per replica (default 4 with `http1`, requests pipelined on them; 16 with `undici`). */
  connections?: number;
  /**
   * How replicas are asked (default `http1`, the lean pipelined client of remote-http1.ts;
   * `undici`, a keep-alive `Pool`, what the client used first). An https replica always uses undici.
   */
  transport?: RemoteTransport;
  /** Minimum ms between two fail-open WARN lines (default 10,000); each line carries the counts since the last one. */
  warnIntervalMs?: number;
  logger?: Logger | null;
  /** Told each lookup's duration, ms, and whether it answered (false: failed open). */
  onLookup?: ((ms: number, answered: boolean) => void) | null;
}

/** What a lookup answered: the scores, or fail-open. */
export type RemoteLookup =
  | {
    readonly ok: true;
    /** Per worker id, its best overlap over its ranks, in blocks (the router prices per worker). */
    readonly scores: Map<bigint, number>;
    /** The URL of the replica that answered. */
    readonly replica: string;
    /** Whether the answer came from a replica asked after the first (a hedge or a fail-over). */
    readonly second: boolean;
    readonly ms: number;
  }
  | { readonly ok: false; readonly reason: FailOpen; readonly ms: number };

/** Counters of one replica. */
export interface ReplicaStats {
  readonly url: string;
  attempts: number;
  /** 200s with scores in time (whether or not another replica answered first). */
  answered: number;
  /** 200s with scores after the lookup's deadline. */
  late: number;
  failures: Record<ReplicaFailure, number>;
  /** Times it was backed off. */
  backoffs: number;
  /** Until when it is skipped (`performance.now()` ms; 0: eligible). */
  backedOffUntil: number;
}

/** Counters of the client. */
export interface RemoteIndexStats {
  lookups: number;
  answered: number;
  /** Lookups that asked a second replica because the first was slow (hedge). */
  hedged: number;
  /** Lookups answered by the second replica asked. */
  secondAnswered: number;
  failOpen: Record<FailOpen, number>;
  replicas: ReplicaStats[];
}


class Replica {
  readonly url: string;
  readonly transport: ReplicaTransport;
  readonly stats: ReplicaStats;
  /** Lookups in a row that ended without this replica's answer. */
  misses = 0;
  /** Since when it owes an answer (its oldest attempt sent after its last answer), or -1. */
  owedSince = -1;
  /** The current back-off, ms (0: none since the last success). */
  backoff = 0;

  constructor(url: string, transport: ReplicaTransport) {
    this.url = url;
    this.transport = transport;
    this.stats = { url, attempts: 0, answered: 0, late: 0, failures: { error: 0, timeout: 0, recovering: 0, status: 0, garbage: 0 }, backoffs: 0, backedOffUntil: 0 };
  }
}

/** One lookup in progress. */
interface Pending {
  readonly body: Uint8Array;
  readonly blockSize: number;
  readonly t0: number;
  readonly tried: Replica[];
  /** The replicas asked whose answer has not come. */
  readonly waiting: Replica[];
  settled: boolean;
  resolve: (r: RemoteLookup) => void;
  hedge: NodeJS.Timeout | null;
  deadline: NodeJS.Timeout | null;
}

function positive(name: string, v: number | undefined, fallback: number, integer = true): number {
  const x = v ?? fallback;
  if (typeof x !== 'number' || !Number.isFinite(x) || x <= 0 || (integer && !Number.isInteger(x))) {
    throw new KvIndexError(ErrorCode.InvalidOption, `${name}: expected a positive ${integer ? 'integer' : 'number'}, got ${showValue(x)}`);
  }
  return x;
}

/** Checks a replica URL: absolute http(s), no query, fragment or credentials; returned without a trailing slash. */
export function readReplicaUrl(text: string): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new KvIndexError(ErrorCode.InvalidOption, `replica: not a URL: ${showValue(text)}`);
  }
  // Never echoed: the URL may hold a password.
  if (u.username !== '' || u.password !== '') throw new KvIndexError(ErrorCode.InvalidOption, 'replica: a URL with credentials is not accepted');
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.search !== '' || u.hash !== '' || (u.pathname !== '/' && u.pathname !== '')) {
    throw new KvIndexError(ErrorCode.InvalidOption, `replica: expected http(s)://host:port, got ${showValue(text)}`);
  }
  return u.origin;
}

/**
 * Remote overlap lookups against replicas of `kvindex serve --http`, with a hedge and a
 * deadline. `lookup` never throws and never takes longer than the deadline (plus the event
 * loop's lag). Call `close()` to end the connections.
 *
 * ```ts
 * const index = new RemoteIndexClient({ replicas: ['http://127.0.0.1:8090', 'http://127.0.0.1:8091'] });
 * const local = computeBlockHashes(tokens, 16);
 * const r = await index.lookup('llama', 'default', local, 16);
 * const overlap = r.ok ? r.scores : new Map(); // fail-open: route by load alone
 * ```
 */
export class RemoteIndexClient {
  readonly deadlineMs: number;
  readonly hedgeMs: number;
  readonly #replicas: Replica[];
  readonly #backoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #misses: number;
  readonly #silenceMs: number;
  readonly #attemptTimeoutMs: number;
  readonly #warnIntervalMs: number;
  readonly #logger: Logger | null;
  readonly #onLookup: ((ms: number, answered: boolean) => void) | null;
  readonly #stats: RemoteIndexStats;
  readonly #bodies = new QueryBodyWriter();
  #turn = 0;
  #lastWarn = -Infinity;
  /** Fail-opens since the last WARN line, by reason. */
  #unwarned: Record<FailOpen, number> = { deadline: 0, failed: 0, no_replica: 0 };
  #closed = false;

  constructor(options: RemoteIndexOptions) {
    if (!Array.isArray(options?.replicas) || options.replicas.length === 0) throw new KvIndexError(ErrorCode.InvalidOption, 'replicas: expected at least one URL');
    const urls = options.replicas.map(readReplicaUrl);
    if (new Set(urls).size !== urls.length) throw new KvIndexError(ErrorCode.InvalidOption, `replicas: a URL is listed twice: ${urls.join(',')}`);
    this.deadlineMs = positive('deadlineMs', options.deadlineMs, 2);
    this.hedgeMs = positive('hedgeMs', options.hedgeMs, Math.max(1, Math.floor(this.deadlineMs / 2)));
    this.#backoffMs = positive('backoffMs', options.backoffMs, 100);
    this.#maxBackoffMs = Math.max(this.#backoffMs, positive('maxBackoffMs', options.maxBackoffMs, 1_000));
    this.#misses = positive('missesBeforeBackoff', options.missesBeforeBackoff, 3);
    this.#silenceMs = positive('silenceMs', options.silenceMs, Math.max(20, 10 * this.deadlineMs));
    this.#attemptTimeoutMs = Math.max(this.deadlineMs, positive('attemptTimeoutMs', options.attemptTimeoutMs, 1_000));
    this.#warnIntervalMs = positive('warnIntervalMs', options.warnIntervalMs, 10_000);
    const transport = options.transport ?? RemoteTransport.Http1;
    if (transport !== RemoteTransport.Http1 && transport !== RemoteTransport.Undici) throw new KvIndexError(ErrorCode.InvalidOption, `transport: expected http1 or undici, got ${showValue(transport)}`);
    const connections = positive('connections', options.connections, transport === RemoteTransport.Http1 ? 4 : 16);
    this.#logger = options.logger ?? null;
    this.#onLookup = options.onLookup ?? null;
    // The lean client speaks plain HTTP only: an https replica is asked through undici.
    this.#replicas = urls.map((u) => new Replica(u, transport === RemoteTransport.Http1 && u.startsWith('http:')
      ? new Http1Transport(u, connections, this.#attemptTimeoutMs)
      : new UndiciTransport(u, connections, this.#attemptTimeoutMs)));
    this.#stats = { lookups: 0, answered: 0, hedged: 0, secondAnswered: 0, failOpen: { deadline: 0, failed: 0, no_replica: 0 }, replicas: this.#replicas.map((r) => r.stats) };
  }

  /** The replicas' URLs, in the order given. */
  get replicas(): string[] {
    return this.#replicas.map((r) => r.url);
  }

  /** Live counters (the same object each time; read, do not write). */
  get stats(): RemoteIndexStats {
    return this.#stats;
  }

  /** How many replicas are not backed off now. */
  eligibleCount(now = performance.now()): number {
    let n = 0;
    for (const r of this.#replicas) if (r.stats.backedOffUntil <= now) n++;
    return n;
  }

  /**
   * The overlap scores of a prompt whose block hashes are `local` (`computeBlockHashes` with
   * the index's `blockSize` and the request's LoRA name) in the index of (model, tenant), or
   * fail-open. Never throws.
   */
  lookup(modelName: string, tenantId: string, local: BigUint64Array, blockSize: number): Promise<RemoteLookup> {
    const t0 = performance.now();
    this.#stats.lookups++;
    if (this.#closed) return Promise.resolve(this.#failOpen(FailOpen.NoReplica, t0));
    const body = this.#bodies.write(modelName, tenantId, local);
    return new Promise<RemoteLookup>((resolve) => {
      const p: Pending = { body, blockSize, t0, tried: [], waiting: [], settled: false, resolve, hedge: null, deadline: null };
      if (!this.#ask(p)) {
        this.#settle(p, this.#failOpen(FailOpen.NoReplica, t0));
        return;
      }
      // Checked in the next check phase, after the poll phase read what had arrived: when the
      // event loop runs late, the timers phase comes first, and an answer already in the socket
      // would otherwise lose to its own deadline.
      p.deadline = setTimeout(() => setImmediate(() => this.#onDeadline(p)), this.deadlineMs);
      if (this.#replicas.length > 1 && this.hedgeMs < this.deadlineMs) {
        p.hedge = setTimeout(() => {
          p.hedge = null;
          if (!p.settled && this.#ask(p)) this.#stats.hedged++;
        }, this.hedgeMs);
      }
    });
  }

  /** Sends `p` to the next eligible replica it has not tried; false when there is none. */
  #ask(p: Pending): boolean {
    const now = performance.now();
    const n = this.#replicas.length;
    for (let k = 0; k < n; k++) {
      const r = this.#replicas[(this.#turn + k) % n]!;
      if (r.stats.backedOffUntil > now || p.tried.includes(r)) continue;
      if (p.tried.length === 0) this.#turn = (this.#turn + k + 1) % n;
      p.tried.push(r);
      p.waiting.push(r);
      if (r.stats.backedOffUntil > 0) {
        // The probe after a back-off starts a fresh record: misses and silence from before the
        // back-off must not back it off again at its first slow answer (its first request pays
        // a new connection: ~1.4 ms measured after a SIGSTOP/SIGCONT, over the 1 ms hedge, and
        // the resumed replica stayed skipped for good in the benchmark's fail-over).
        r.stats.backedOffUntil = 0;
        r.misses = 0;
        r.owedSince = -1;
      }
      if (r.owedSince < 0) r.owedSince = now;
      r.stats.attempts++;
      this.#attempt(p, r, p.tried.length > 1);
      return true;
    }
    return false;
  }

  #attempt(p: Pending, r: Replica, second: boolean): void {
    r.transport.post(p.body, (err, status, text) => this.#answered(p, r, second, err, status, text), () => !p.settled);
  }

  #answered(p: Pending, r: Replica, second: boolean, err: Error | null, status: number, text: string): void {
    let failure: ReplicaFailure | null = null;
    let scores: Map<bigint, number> | null = null;
    let detail = '';
    if (err === CANCELLED) {
      // Never sent: the lookup had ended while it waited for room. Not the replica's failure.
      p.waiting.splice(p.waiting.indexOf(r), 1);
      return;
    }
    if (err !== null) {
      failure = ReplicaFailure.Error;
      detail = err.message;
    } else if (status === 200) {
      scores = readScores(text, p.blockSize);
      if (scores === null) {
        failure = ReplicaFailure.Garbage;
        detail = `a 200 that is not a scores document: ${showValue(text.slice(0, 80))}`;
      }
    } else {
      failure = status === 503 && text.includes('"KVX_RECOVERING"') ? ReplicaFailure.Recovering : ReplicaFailure.Status;
      detail = `status ${status}: ${showValue(text.slice(0, 120))}`;
    }
    p.waiting.splice(p.waiting.indexOf(r), 1);
    // Any HTTP answer, late or failed, shows the replica alive: slow is not silent.
    if (failure !== ReplicaFailure.Error) r.owedSince = r.transport.inFlight > 0 ? performance.now() : -1;
    if (failure === null && scores !== null) {
      r.misses = 0;
      if (p.settled) {
        r.stats.late++;
        return;
      }
      r.stats.answered++;
      r.backoff = 0;
      this.#stats.answered++;
      if (second) this.#stats.secondAnswered++;
      this.#settle(p, { ok: true, scores, replica: r.url, second, ms: performance.now() - p.t0 });
      return;
    }
    r.stats.failures[failure!]++;
    this.#backOff(r, failure!, detail);
    if (p.settled) return;
    // Fail over at once: the next eligible replica, if any, else fail open when nothing is left.
    if (!this.#ask(p) && p.waiting.length === 0) this.#settle(p, this.#failOpen(FailOpen.Failed, p.t0));
  }

  #onDeadline(p: Pending): void {
    p.deadline = null;
    if (!p.settled) this.#settle(p, this.#failOpen(FailOpen.Deadline, p.t0));
  }

  #backOff(r: Replica, failure: ReplicaFailure, detail: string): void {
    const now = performance.now();
    r.backoff = r.backoff === 0 ? this.#backoffMs : Math.min(this.#maxBackoffMs, r.backoff * 2);
    const was = r.stats.backedOffUntil > now;
    r.stats.backedOffUntil = now + r.backoff;
    r.stats.backoffs++;
    // One line per back-off (a failed probe included), not per failed attempt: at most one per
    // `backoffMs` per replica.
    if (!was) this.#logger?.warn({ replica: r.url, failure, err: detail, backoffMs: r.backoff }, 'index replica failed: skipped for a while');
  }

  #failOpen(reason: FailOpen, t0: number): RemoteLookup {
    this.#stats.failOpen[reason]++;
    this.#unwarned[reason]++;
    const now = performance.now();
    if (this.#logger !== null && now - this.#lastWarn >= this.#warnIntervalMs) {
      this.#logger.warn({ failOpen: this.#unwarned, sinceMs: Number.isFinite(this.#lastWarn) ? Math.round(now - this.#lastWarn) : null, deadlineMs: this.deadlineMs }, 'index lookups failed open: routed by load alone');
      this.#lastWarn = now;
      this.#unwarned = { deadline: 0, failed: 0, no_replica: 0 };
    }
    return { ok: false, reason, ms: now - t0 };
  }

  #settle(p: Pending, r: RemoteLookup): void {
    if (p.settled) return;
    p.settled = true;
    if (p.hedge !== null) clearTimeout(p.hedge);
    if (p.deadline !== null) clearTimeout(p.deadline);
    p.hedge = null;
    p.deadline = null;
    // The replicas asked and still silent missed this lookup (answered by another, or past the
    // deadline). A paused replica is backed off after `missesBeforeBackoff` of them, so it costs
    // at most that many hedge delays, not one per lookup.
    const now = performance.now();
    for (const rep of p.waiting) {
      ++rep.misses;
      // Silent (no answer at all) for `silenceMs`, not merely slow: a loaded replica that answers
      // late was backed off after 3 slow answers, and both replicas of a busy host then were,
      // failing 95 % of lookups open (bench, 1,000 lookups/s). Never the last eligible replica
      // for slowness alone: then the lookups wait for it up to their deadline.
      if (rep.misses >= this.#misses && rep.owedSince >= 0 && now - rep.owedSince >= this.#silenceMs && rep.stats.backedOffUntil <= now && this.eligibleCount(now) > 1) {
        rep.stats.failures.timeout++;
        this.#backOff(rep, ReplicaFailure.Timeout, `${rep.misses} lookups in a row without its answer (deadline ${this.deadlineMs} ms)`);
      }
    }
    this.#onLookup?.(r.ms, r.ok);
    p.resolve(r);
  }

  /** Closes the connections; later lookups fail open at once. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#replicas.map((r) => r.transport.close()));
  }
}
