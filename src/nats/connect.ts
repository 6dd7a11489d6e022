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
import type { Logger } from 'pino';
import { ErrorCode, KvIndexError } from '../errors.js';
import { API_CONSUMER_NOT_FOUND, API_STREAM_NOT_FOUND, NatsError, NatsErrorCode, isApiError, reason } from './errors.js';
import type { KvNames } from './names.js';

/** URL used when neither an option nor `NATS_SERVER` names one (Dynamo uses localhost:4222). */
export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

/** Dynamo's stream `max_age` (`DYN_NATS_STREAM_MAX_AGE` default), seconds. */
export const DEFAULT_STREAM_MAX_AGE_S = 3600;

export interface NatsConnectOptions {
  /** Server URL(s). Default: env `NATS_SERVER`, else `nats://127.0.0.1:4222`. */
  servers?: string | string[];
  /** How long to keep retrying the first connection before `KVX_NATS_UNREACHABLE`, ms. Default 5,000. */
  connectTimeoutMs?: number;
  /** Client name shown in the server's monitoring. */
  name?: string;
  logger?: Logger;
}

/** The URLs a connection would use: the option, else `NATS_SERVER` (comma-separated), else the default. */
export function resolveServers(servers?: string | string[]): string[] {
  const list = servers ?? process.env['NATS_SERVER'] ?? DEFAULT_NATS_URL;
  const urls = (Array.isArray(list) ? list : list.split(',')).map((s) => s.trim()).filter((s) => s !== '');
  if (urls.length === 0) throw new KvIndexError(ErrorCode.InvalidOption, `servers: expected a NATS URL, got ${JSON.stringify(servers)}`);
  return urls;
}

/**
 * Connects, retrying refused or timed-out attempts (100 ms doubling to 1 s apart) until
 * `connectTimeoutMs` has passed; throws `NatsError` `KVX_NATS_UNREACHABLE` naming the URLs, the
 * attempts and the last failure. The returned connection reconnects forever (250 ms apart).
 */
export async function connectNats(options: NatsConnectOptions = {}): Promise<NatsConnection> {
  const servers = resolveServers(options.servers);
  const budget = options.connectTimeoutMs ?? 5_000;
  if (!(Number.isFinite(budget) && budget > 0)) {
    throw new KvIndexError(ErrorCode.InvalidOption, `connectTimeoutMs: expected a positive number, got ${String(budget)}`);
  }
  const started = Date.now();
  let attempts = 0;
  let wait = 100;
  let last: unknown = null;
  for (;;) {
    attempts++;
    const remaining = budget - (Date.now() - started);
    try {
      return await connect({
        servers,
        timeout: Math.max(100, Math.min(remaining, 2_000)),
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        waitOnFirstConnect: false,
        ...(options.name === undefined ? {} : { name: options.name }),
      });
    } catch (err) {
      last = err;
    }
    const left = budget - (Date.now() - started);
    if (left <= 0) break;
    options.logger?.debug({ servers, attempt: attempts, err: reason(last) }, 'NATS connect failed, retrying');
    await sleep(Math.min(wait, left));
    wait = Math.min(wait * 2, 1_000);
  }
  throw new NatsError(
    NatsErrorCode.Unreachable,
    `cannot reach NATS at ${servers.join(', ')}: ${attempts} attempts in ${Date.now() - started} ms, last error: ${reason(last)}`,
    { cause: last },
  );
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

/**
 * Deletes the durable consumer `name` if it exists and creates it afresh to deliver from stream
 * sequence `fromSeq` (1: everything). Ack policy `all` (one ack per batch acknowledges the batch),
 * `inactive_threshold` 1 h as Dynamo, other fields the server defaults (`ack_wait` 30 s).
 */
export async function createDurableConsumer(
  jsm: JetStreamManager,
  js: JetStreamClient,
  stream: string,
  name: string,
  fromSeq: number,
): Promise<{ consumer: Consumer; existed: boolean }> {
  const existed = await jsm.consumers.delete(stream, name).catch((err: unknown) => {
    if (isApiError(err, API_CONSUMER_NOT_FOUND)) return false;
    throw wrap(`delete consumer ${name}`, err);
  });
  try {
    await jsm.consumers.add(stream, {
      durable_name: name,
      ack_policy: AckPolicy.All,
      inactive_threshold: nanos(3_600_000),
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

export function sleep(ms: number): Promise<void> {
  return new Promise((res) => setTimeout(res, ms));
}
