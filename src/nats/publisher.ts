/**
 * `KvEventPublisher`: the engine side (or a test) publishing RouterEvents to
 * `<stream>.queue` as Dynamo's serde JSON, the format Dynamo routers and `KvEventSubscriber`
 * read. Each publish is a JetStream publish acknowledged by the server with the message's stream
 * sequence. `publishAll` keeps a window of publishes in flight instead of waiting for each ack
 * in turn (NATS keeps their order on the connection), which is where batching pays: one round
 * trip per window instead of per event (figures in bench/nats.bench.ts).
 */

import type { JetStreamClient, NatsConnection } from 'nats';
import type { Logger } from 'pino';
import { ErrorCode, KvIndexError } from '../errors.js';
import { formatRouterEvent } from '../protocol/json-format.js';
import type { RouterEvent } from '../protocol/types.js';
import type { NatsAuthOptions } from './auth.js';
import { DEFAULT_STREAM_MAX_AGE_S, connectNats, ensureStream, openJetStream } from './connect.js';
import { NatsError, NatsErrorCode, reason } from './errors.js';
import { kvNames, type KvNames } from './names.js';

export interface KvEventPublisherOptions {
  namespace: string;
  component: string;
  /** NATS URL(s); default env `NATS_SERVER`, else `nats://127.0.0.1:4222`. Ignored with `connection`. */
  servers?: string | string[];
  /** An open connection to use (and leave open on close). */
  connection?: NatsConnection;
  /** First-connect retry budget, ms. Default 5,000. */
  connectTimeoutMs?: number;
  /** Credentials and TLS (see auth.ts); unset fields fall back to the URL, then the environment. */
  auth?: NatsAuthOptions;
  /** `max_age` of the stream if the publisher creates it, seconds. Default 3,600. */
  streamMaxAgeS?: number;
  /** How long a publish waits for the server's ack before failing, ms. Default 5,000. */
  publishTimeoutMs?: number;
  /** Publishes in flight in `publishAll`. Default 256. */
  window?: number;
  logger?: Logger;
}

export interface PublishOptions {
  /** JetStream message id: a repeat within the stream's duplicate window (2 min) is dropped. */
  msgId?: string;
}

const encoder = new TextEncoder();

export class KvEventPublisher {
  readonly names: KvNames;
  /** `<stream>.queue`. */
  readonly subject: string;
  private readonly nc: NatsConnection;
  private readonly js: JetStreamClient;
  private readonly ownsConnection: boolean;
  private readonly window: number;
  private last = 0;

  private constructor(names: KvNames, nc: NatsConnection, js: JetStreamClient, owns: boolean, window: number) {
    this.names = names;
    this.subject = names.publishSubject;
    this.nc = nc;
    this.js = js;
    this.ownsConnection = owns;
    this.window = window;
  }

  /**
   * Connects (unless given a connection) and gets or creates the stream. Throws
   * `KvIndexError` `InvalidOption`, or `NatsError` as `connectNats` / `ensureStream`.
   */
  static async connect(options: KvEventPublisherOptions): Promise<KvEventPublisher> {
    const names = kvNames(options.namespace, options.component);
    const window = options.window ?? 256;
    if (!Number.isInteger(window) || window < 1) {
      throw new KvIndexError(ErrorCode.InvalidOption, `window: expected a positive integer, got ${String(window)}`);
    }
    const timeout = options.publishTimeoutMs;
    if (timeout !== undefined && !(Number.isFinite(timeout) && timeout > 0)) {
      throw new KvIndexError(ErrorCode.InvalidOption, `publishTimeoutMs: expected a positive number, got ${String(timeout)}`);
    }
    const nc =
      options.connection ??
      (await connectNats({
        ...(options.servers === undefined ? {} : { servers: options.servers }),
        ...(options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs }),
        ...(options.auth === undefined ? {} : { auth: options.auth }),
        ...(options.logger === undefined ? {} : { logger: options.logger }),
        name: 'kvindex-publisher',
      }));
    try {
      const { jsm } = await openJetStream(nc);
      await ensureStream(jsm, names, options.streamMaxAgeS ?? DEFAULT_STREAM_MAX_AGE_S, options.logger);
      const js = nc.jetstream({ timeout: options.publishTimeoutMs ?? 5_000 });
      return new KvEventPublisher(names, nc, js, options.connection === undefined, window);
    } catch (err) {
      if (options.connection === undefined) await nc.close().catch(() => undefined);
      throw err;
    }
  }

  /** Highest stream sequence the server has acknowledged to this publisher (0 before any). */
  get lastSeq(): number {
    return this.last;
  }

  /** Publishes one event; resolves with its stream sequence. Throws `NatsError` `KVX_NATS_REQUEST_FAILED`. */
  publish(event: RouterEvent, options: PublishOptions = {}): Promise<number> {
    return this.publishRaw(encoder.encode(formatRouterEvent(event)), options);
  }

  /** Publishes bytes as they are (already-serialised events; malformed input in tests). */
  async publishRaw(data: Uint8Array | string, options: PublishOptions = {}): Promise<number> {
    const bytes = typeof data === 'string' ? encoder.encode(data) : data;
    try {
      const ack = await this.js.publish(this.subject, bytes, options.msgId === undefined ? {} : { msgID: options.msgId });
      if (ack.seq > this.last) this.last = ack.seq;
      return ack.seq;
    } catch (err) {
      throw new NatsError(NatsErrorCode.RequestFailed, `publish to ${this.subject}: ${reason(err)}`, { cause: err });
    }
  }

  /**
   * Publishes events in order with up to `window` publishes in flight; resolves with the count
   * and the last stream sequence once all are acknowledged. After a failure it sends nothing
   * more, waits for the publishes in flight, then throws the first `NatsError`.
   * `msgIdPrefix` gives event i the message id `<prefix>:<i>`, so a retried call does not
   * duplicate the events that had reached the stream.
   */
  async publishAll(
    events: Iterable<RouterEvent> | AsyncIterable<RouterEvent>,
    options: { msgIdPrefix?: string } = {},
  ): Promise<{ count: number; lastSeq: number }> {
    const inFlight: Promise<number>[] = [];
    let head = 0;
    let count = 0;
    let failure: unknown = null;
    const prefix = options.msgIdPrefix;
    for await (const ev of events as AsyncIterable<RouterEvent>) {
      const p = this.publish(ev, prefix === undefined ? {} : { msgId: `${prefix}:${count}` });
      p.catch((err: unknown) => {
        failure ??= err;
      });
      inFlight.push(p);
      count++;
      if (inFlight.length - head >= this.window) {
        await inFlight[head++]!.catch(() => 0);
        if (head > 4096) {
          inFlight.splice(0, head);
          head = 0;
        }
      }
      if (failure !== null) break;
    }
    await Promise.all(inFlight.slice(head).map((p) => p.catch(() => 0)));
    if (failure !== null) throw failure;
    return { count, lastSeq: this.last };
  }

  /** Closes the connection if the publisher opened it. */
  async close(): Promise<void> {
    if (this.ownsConnection) await this.nc.close().catch(() => undefined);
  }
}
