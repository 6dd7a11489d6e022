/**
 * Getting the NATS resources kvindex needs: a connection (bounded retry on the first connect,
 * then nats.js reconnects on its own for as long as the process lives, which is what rides out a
 * server restart), the JetStream handles, the KV-event stream (get or create, Dynamo's
 * config: subjects `<stream>.*`, `max_age` 1 h by default, everything else the server default),
 * and a router's durable pull consumer.
 */

import {
  AckPolicy,
  DeliverPolicy,
  connect,
  nanos,
  type Consumer,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
  type StreamInfo,
} from 'nats';
import { createConnection } from 'node:net';
import type { Logger } from 'pino';
import { ErrorCode, KvIndexError } from '../errors.js';
import { showValue } from '../protocol/show-value.js';
import { MAX_TIMER_MS } from '../protocol/time-limits.js';
import { API_CONSUMER_NOT_FOUND, API_STREAM_NOT_FOUND, NatsError, NatsErrorCode, errorFields, isApiError, reason } from './errors.js';
import type { KvNames } from './names.js';
import { redactUrl, resolveAuth, scrub, type NatsAuthOptions } from './auth.js';

/** URL used when neither an option nor `NATS_SERVER` names one (Dynamo uses localhost:4222). */
export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

/** Dynamo's stream `max_age` (`DYN_NATS_STREAM_MAX_AGE` default), seconds. */
export const DEFAULT_STREAM_MAX_AGE_S = 3600;

export interface NatsConnectOptions {
  /** Server URL(s); user info in a URL is used as credentials and never logged. Default: env `NATS_SERVER`, else `nats://127.0.0.1:4222`. */
  servers?: string | string[];
  /** Credentials and TLS (auth.ts); unset fields fall back to the URL, then the environment. */
  auth?: NatsAuthOptions;
  /** How long the first connection may take, all attempts included, before `KVX_NATS_UNREACHABLE`, ms. Default 5,000. */
  connectTimeoutMs?: number;
  /** Client name shown in the server's monitoring. */
  name?: string;
  logger?: Logger;
}

/**
 * The URLs a connection would use: the option, else `NATS_SERVER` (comma-separated), else the
 * default. A list whose comma could sit inside user info (`nats://u:pa,ss@host` splits into
 * `nats://u:pa` and `ss@host`) is refused with `KVX_INVALID_OPTION`, without the URL in the
 * message: split there, the first half kept part of the password in every log line (found by
 * fuzzing). Write such a comma as `%2C`, or pass the credentials as options.
 */
export function resolveServers(servers?: string | string[]): string[] {
  const list = servers ?? process.env['NATS_SERVER'] ?? DEFAULT_NATS_URL;
  const urls = (Array.isArray(list) ? list : list.split(',')).map((s) => s.trim()).filter((s) => s !== '');
  if (urls.length === 0) throw new KvIndexError(ErrorCode.InvalidOption, 'servers: expected a NATS URL, got none');
  for (let i = 1; i < urls.length; i++) {
    if (urls[i]!.includes('@') && !urls[i]!.includes('://') && !urls[i - 1]!.includes('@')) {
      throw new KvIndexError(ErrorCode.InvalidOption, `servers: URL ${i + 1} of the list holds user info but no scheme, after a URL without user info: a comma inside a password or token? Write it as %2C, or pass the credentials as options`);
    }
  }
  for (let i = 0; i < urls.length; i++) {
    // Not a URL at all ('not a url'): an option error at once, not a connect retried until the
    // budget ends and reported as an unreachable server (found by fuzzing). Never echoed: it may
    // hold credentials.
    const u = redactUrl(urls[i]!); // user info aside: raw passwords may hold '/'
    if (!URL.canParse(u.includes('://') ? u : `nats://${u}`)) {
      throw new KvIndexError(ErrorCode.InvalidOption, `servers: URL ${i + 1} of the list is not a URL (nats://[user:pass@]host:port)`);
    }
  }
  return urls;
}

/**
 * Connects, retrying refused or timed-out attempts (100 ms doubling to 1 s apart) until
 * `connectTimeoutMs` has passed, however the address behaves (an attempt still pending at the
 * deadline is abandoned and its connection closed if it completes later). Throws `NatsError`:
 * `KVX_NATS_AUTH_FAILED` at once when the server refuses the credentials, `KVX_NATS_TLS_FAILED`
 * at once when the TLS handshake fails, else `KVX_NATS_UNREACHABLE` naming the (redacted) URLs,
 * the attempts and the last failure. The returned connection reconnects forever (250 ms apart).
 */
export async function connectNats(options: NatsConnectOptions = {}): Promise<NatsConnection> {
  const auth = resolveAuth(resolveServers(options.servers), options.auth);
  const servers = auth.servers;
  const budget = options.connectTimeoutMs ?? 5_000;
  if (!(Number.isFinite(budget) && budget > 0 && budget <= MAX_TIMER_MS)) {
    // Past MAX_TIMER_MS every attempt's timer fired at once: serve never connected (fuzzing).
    throw new KvIndexError(ErrorCode.InvalidOption, `connectTimeoutMs: expected a number from 1 to ${MAX_TIMER_MS}, got ${showValue(budget)}`);
  }
  const shown = servers.map(redactUrl).join(', ');
  const why = (err: unknown): string => scrub(reason(err), auth.secrets);
  const started = Date.now();
  let attempts = 0;
  let wait = 100;
  let last: unknown = null;
  for (;;) {
    attempts++;
    const remaining = budget - (Date.now() - started);
    // nats.js leaves its socket open when a first connect times out (measured: a listener that
    // never answers kept the process alive after the TIMEOUT rejection), so an address is first
    // probed with a socket of our own that is always destroyed; nats.js only dials a server that
    // has just greeted.
    const probe = await probeGreeting(servers, remaining);
    if (probe !== null) {
      last = probe;
      const left = budget - (Date.now() - started);
      if (left <= 0) break;
      options.logger?.debug({ servers: shown, attempt: attempts, err: why(last) }, 'NATS connect failed, retrying');
      await sleep(Math.min(wait, left));
      wait = Math.min(wait * 2, 1_000);
      continue;
    }
    const attempt = connect({
      servers,
      ...auth.connect,
      timeout: Math.max(50, Math.min(remaining, 2_000)),
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      waitOnFirstConnect: false,
      ...(options.name === undefined ? {} : { name: options.name }),
    });
    try {
      const nc = await withDeadline(attempt, remaining);
      if (nc !== null) return nc;
      // The deadline passed first: whatever the attempt does later, it must not keep a connection.
      void attempt.then((late) => late.close()).catch(() => undefined);
      last = new Error(`no answer within ${Math.round(remaining)} ms`);
    } catch (err) {
      last = err;
      const kind = classify(err);
      if (kind === 'auth') {
        throw new NatsError(
          NatsErrorCode.AuthFailed,
          `NATS at ${shown} refused the credentials (${auth.method === 'none' ? 'none were given' : `method: ${auth.method}`}): ${why(err)}`,
        );
      }
      if (kind === 'tls') throw new NatsError(NatsErrorCode.TlsFailed, `TLS with NATS at ${shown} failed: ${why(err)}`);
    }
    const left = budget - (Date.now() - started);
    if (left <= 0) break;
    options.logger?.debug({ servers: shown, attempt: attempts, err: why(last) }, 'NATS connect failed, retrying');
    await sleep(Math.min(wait, left));
    wait = Math.min(wait * 2, 1_000);
  }
  throw new NatsError(
    NatsErrorCode.Unreachable,
    `cannot reach NATS at ${shown}: ${attempts} attempts in ${Date.now() - started} ms, last error: ${why(last)}`,
  );
}

/**
 * Null when one of the servers sends the first bytes of a NATS greeting within `ms`, else the
 * failure (refused, silent, ...). A URL whose host and port cannot be read is not probed (null).
 */
async function probeGreeting(servers: readonly string[], ms: number): Promise<Error | null> {
  const targets = servers.map(hostPort);
  if (targets.some((t) => t === null)) return null;
  // All servers at once, each within the whole remaining time: the first greeting wins.
  return new Promise((resolve) => {
    let left = targets.length;
    let failure: Error | null = null;
    for (const hp of targets as Array<{ host: string; port: number }>) {
      void probeOne(hp, ms).then((err) => {
        if (err === null) resolve(null);
        else failure = err;
        if (--left === 0) resolve(failure);
      });
    }
  });
}

function probeOne(hp: { host: string; port: number }, ms: number): Promise<Error | null> {
  return new Promise<Error | null>((resolve) => {
    const sock = createConnection({ host: hp.host, port: hp.port });
    const done = (e: Error | null): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve(e);
    };
    const timer = setTimeout(() => done(new Error(`no NATS greeting within ${Math.round(ms)} ms`)), Math.max(0, ms));
    sock.once('error', (e) => done(e));
    sock.once('data', (d) => done(d.toString('latin1').startsWith('INFO') ? null : new Error('the server did not greet as NATS does')));
    sock.once('close', () => done(new Error('connection closed before a greeting')));
  });
}

/** Host and port of a NATS URL (`nats://h:p`, `tls://h:p`, `h:p`, `h`; default port 4222). */
function hostPort(url: string): { host: string; port: number } | null {
  try {
    const u = new URL(/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(url) ? url : `nats://${url}`);
    if (!['nats:', 'tls:'].includes(u.protocol)) return null;
    const host = u.hostname.replace(/^\[|\]$/g, '');
    return { host, port: u.port === '' ? 4222 : Number(u.port) };
  } catch {
    return null;
  }
}

/** The promise's value, or null when `ms` pass first (the promise is left running). */
function withDeadline<T>(p: Promise<T>, ms: number): Promise<T | null> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => resolve(null), Math.max(0, ms));
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(t);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/** Which first-connect failures are not worth retrying: refused credentials and failed TLS. */
function classify(err: unknown): 'auth' | 'tls' | 'other' {
  const code = String((err as { code?: unknown } | null)?.code ?? '');
  const text = `${code} ${err instanceof Error ? err.message : String(err)}`;
  if (/AUTHORIZATION_VIOLATION|AUTHENTICATION_EXPIRED|Authorization Violation|authentication/i.test(text)) return 'auth';
  if (/TLS|SSL|CERT|self[- ]signed|unable to verify/i.test(text)) return 'tls';
  return 'other';
}

/** JetStream manager and client of a connection; `KVX_NATS_JETSTREAM_UNAVAILABLE` if JetStream is off. */
export async function openJetStream(nc: NatsConnection): Promise<{ jsm: JetStreamManager; js: JetStreamClient }> {
  try {
    const jsm = await nc.jetstreamManager();
    return { jsm, js: nc.jetstream() };
  } catch (err) {
    throw new NatsError(
      NatsErrorCode.JetStreamUnavailable,
      `JetStream is not available on ${nc.getServer()} (is the server started with -js?): ${reason(err)}`,
      { cause: err },
    );
  }
}

/**
 * Gets the KV-event stream, creating it when missing with `maxAgeS` (seconds) as `max_age`.
 * An existing stream is used as it is, whatever its limits (another router or Dynamo created it).
 */
export async function ensureStream(jsm: JetStreamManager, names: KvNames, maxAgeS: number, logger?: Logger): Promise<StreamInfo> {
  try {
    return await jsm.streams.info(names.stream);
  } catch (err) {
    if (!isApiError(err, API_STREAM_NOT_FOUND)) throw wrap(`stream info ${names.stream}`, err);
  }
  try {
    const info = await jsm.streams.add({ name: names.stream, subjects: names.streamSubjects, max_age: nanos(maxAgeS * 1000) });
    logger?.info({ stream: names.stream, subjects: names.streamSubjects, maxAgeS }, 'created the KV event stream');
    return info;
  } catch (err) {
    // Another router may have created it between the two calls.
    try {
      return await jsm.streams.info(names.stream);
    } catch {
      throw wrap(`create stream ${names.stream}`, err);
    }
  }
}

/** Default `inactive_threshold` of kvindex's durable consumers, seconds. */
export const DEFAULT_CONSUMER_INACTIVE_S = 60;

/**
 * Deletes the durable consumer `name` if it exists and creates it afresh to deliver from stream
 * sequence `fromSeq` (1: everything). Ack policy `all` (one ack per batch acknowledges the batch),
 * `inactive_threshold` `inactiveS` (the server deletes the consumer after that long without a
 * pull: a crashed router's consumer then stops holding back purges; Dynamo uses 1 h, which let a
 * stream with a snapshot threshold of 500 grow to 3,090 messages), other fields the server
 * defaults (`ack_wait` 30 s). A live router pulls at least every second, so it never goes idle.
 */
export async function createDurableConsumer(
  jsm: JetStreamManager,
  js: JetStreamClient,
  stream: string,
  name: string,
  fromSeq: number,
  inactiveS: number = DEFAULT_CONSUMER_INACTIVE_S,
): Promise<{ consumer: Consumer; existed: boolean }> {
  const existed = await jsm.consumers.delete(stream, name).catch((err: unknown) => {
    if (isApiError(err, API_CONSUMER_NOT_FOUND)) return false;
    throw wrap(`delete consumer ${name}`, err);
  });
  try {
    await jsm.consumers.add(stream, {
      durable_name: name,
      ack_policy: AckPolicy.All,
      inactive_threshold: nanos(inactiveS * 1000),
      ...(fromSeq > 1 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: fromSeq } : { deliver_policy: DeliverPolicy.All }),
    });
    return { consumer: await js.consumers.get(stream, name), existed };
  } catch (err) {
    throw wrap(`create consumer ${name} on ${stream}`, err);
  }
}

/** `NatsError` `KVX_NATS_REQUEST_FAILED` for a failed JetStream call named by `what`. */
export function wrap(what: string, err: unknown): NatsError {
  if (err instanceof NatsError) return err;
  return new NatsError(NatsErrorCode.RequestFailed, `${what}: ${reason(err)}`, { cause: err });
}

/** How long start-up retries a JetStream request that timed out or found no responder, ms. */
export const STARTUP_RETRY_MS = 60_000;

/** The nats.js codes of `err` and its causes. */
function natsCodes(err: unknown): string[] {
  const out: string[] = [];
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') out.push(code);
  }
  return out;
}

/**
 * Runs a start-up step, again while it fails on a passing outage (a request timed out, the
 * connection dropped, or, unless `noRespondersIsFinal`, no JetStream answered: a restarting
 * server), 250 ms apart, for up to `budgetMs`; other failures throw at once. A nats-server
 * restarted while `kvindex serve` started made it exit on its first timed-out request, though
 * a running router rides out any outage (found by fuzzing). The step must be safe to repeat.
 */
export async function retryStartup<T>(what: string, step: () => Promise<T>, logger?: Logger, budgetMs = STARTUP_RETRY_MS, noRespondersIsFinal = false): Promise<T> {
  const deadline = Date.now() + budgetMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      const codes = natsCodes(err);
      const passing = codes.some((c) => c === 'TIMEOUT' || c === 'DISCONNECT' || (c === '503' && !noRespondersIsFinal));
      if (!passing || Date.now() + 250 > deadline) throw err;
      logger?.warn({ step: what, attempt, ...errorFields(err) }, 'start-up step failed on a NATS outage: retrying');
      await sleep(250);
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((res) => setTimeout(res, ms));
}
