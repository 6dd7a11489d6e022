/**
 * `KvEventSubscriber`: feeds a `ShardedIndexer` from the JetStream stream that engines publish
 * RouterEvents to, as a Dynamo router does (reference §5.2), with these differences:
 *
 * - Batches: one pull fetches up to 512 messages (fewer when messages are large, so a batch stays
 *   near 1 MiB), instead of one message per round trip.
 * - Ack after apply: the batch's last message is acked (consumer ack policy `all`) only after
 *   `indexer.flush()` says every event of the batch is applied; Dynamo acks on receipt.
 * - Position: the router owns the last stream sequence it handed to the indexer; redeliveries
 *   at or below it are skipped, and deliveries lost in transit make it recreate its consumer
 *   right after it (each message's intake, gaps and per-worker bookkeeping: intake.ts;
 *   the rules: delivery.ts). Startup resumes right after the snapshot's `stream_seq`
 *   (snapshot.ts).
 *
 * Malformed messages are counted, logged with their stream sequence, acked with the batch and
 * otherwise ignored. A failing indexer (closed, shard thread died) stops the subscriber: see
 * `whenStopped()`.
 */

import {
  Events,
  type Consumer,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type NatsConnection,
  type Status,
} from 'nats';
import type { Logger } from 'pino';
import { ErrorCode, KvIndexError } from '../errors.js';
import type { ShardedIndexer } from '../indexer/sharded-indexer.js';
import { connectNats, createDurableConsumer, ensureStream, openJetStream, retryStartup, sleep } from './connect.js';
import { API_CONSUMER_NOT_FOUND, errorFields, isApiError, reason } from './errors.js';
import { MessageIntake } from './intake.js';
import { kvNames, type KvNames } from './names.js';
import { restoreSnapshot, type RestoreReport, type SnapshotReport } from './snapshot.js';
import { SnapshotScheduler } from './snapshot-schedule.js';
import { PauseGate } from './pause-gate.js';
import { ReadinessTracker, type Readiness } from './readiness.js';
import { SeqWaiters } from './seq-waiters.js';
import { SnapshotLease } from './snapshot-lease.js';
import type { WorkerActivity } from './worker-activity.js';
import {
  checkSubscriberOptions,
  type KvEventSubscriberOptions,
  type SubscriberConfig,
  type SubscriberStats,
} from './subscriber-options.js';

export type { KvEventSubscriberOptions, SubscriberStats } from './subscriber-options.js';

export class KvEventSubscriber {
  readonly names: KvNames;
  readonly consumerName: string;
  /** What startup loaded (or skipped). */
  readonly restored: RestoreReport;
  private readonly nc: NatsConnection;
  private readonly ownsConnection: boolean;
  private readonly jsm: JetStreamManager;
  private readonly js: JetStreamClient;
  private readonly indexer: ShardedIndexer;
  private readonly logger: Logger | null;
  private readonly o: SubscriberConfig;
  private readonly snapshots: SnapshotScheduler;
  private readonly intake: MessageIntake;
  private consumer: Consumer | null = null;
  private activeFetch: ConsumerMessages | null = null;
  private inFlightCommit: Promise<void> | null = null;
  private appliedSeq: number;
  private resetNeeded = false;
  private avgMessageBytes = 0;
  private stopping = false;
  private closed = false;
  private readonly pauseGate = new PauseGate();
  private loopDone: Promise<Error | null> = Promise.resolve(null);
  private readonly waiters = new SeqWaiters();
  private failingSince = 0;
  private readonly onShardMalformed: ((err: KvIndexError, streamSeq?: number) => void) | null;
  private status: AsyncIterable<Status> | null = null;
  private readonly readinessTracker: ReadinessTracker;
  private workersRemoved = 0;
  private idleTimer: NodeJS.Timeout | null = null;
  private snapshotsSeen = 0;

  private constructor(
    o: SubscriberConfig,
    opts: KvEventSubscriberOptions,
    names: KvNames,
    nc: NatsConnection,
    jet: { jsm: JetStreamManager; js: JetStreamClient },
    restored: RestoreReport,
  ) {
    this.o = o;
    this.names = names;
    this.consumerName = o.consumerName;
    this.restored = restored;
    this.nc = nc;
    this.ownsConnection = opts.connection === undefined;
    this.jsm = jet.jsm;
    this.js = jet.js;
    this.indexer = opts.indexer;
    this.logger = opts.logger ?? null;
    this.readinessTracker = new ReadinessTracker(o.readyMaxLag);
    this.intake = new MessageIntake(
      {
        indexer: opts.indexer,
        jsm: jet.jsm,
        stream: names.stream,
        consumerName: o.consumerName,
        parseInShards: o.parseInShards,
        readiness: this.readinessTracker,
        logger: this.logger,
        onLost: () => {
          this.resetNeeded = true;
        },
      },
      restored.resumeAfter,
    );
    this.appliedSeq = restored.resumeAfter;
    // The dump is requested in the same tick as this read (see takeSnapshot).
    this.snapshots = new SnapshotScheduler(
      {
        jsm: jet.jsm, js: jet.js, names, indexer: opts.indexer, logger: this.logger, consumerName: o.consumerName,
        lease: new SnapshotLease(jet.js, names.leaseBucket, o.snapshotLeaseMs, `consumer ${o.consumerName}, pid ${process.pid}`, this.logger),
      },
      o.snapshotThreshold,
      o.snapshotIntervalMs,
      o.encoding,
      () => this.intake.position.position,
    );
    if (restored.outcome === 'skipped') this.readinessTracker.setPartial(true, this.appliedSeq);
    this.onShardMalformed = o.parseInShards ? (err, streamSeq) => this.intake.shardRejected(err, streamSeq) : null;
    if (this.onShardMalformed !== null) opts.indexer.on('malformed', this.onShardMalformed);
  }

  /**
   * Connects, gets or creates the stream, loads the snapshot (or resets), creates the durable
   * consumer right after the snapshot's sequence, then starts consuming and, with a threshold,
   * checking for snapshots. Throws `KvIndexError` `InvalidOption` for bad options, `NatsError`
   * (`KVX_NATS_UNREACHABLE`, `KVX_NATS_JETSTREAM_UNAVAILABLE`, `KVX_NATS_REQUEST_FAILED`), or
   * the snapshot's `SnapshotDecodeError`.
   */
  static async start(options: KvEventSubscriberOptions): Promise<KvEventSubscriber> {
    const o = checkSubscriberOptions(options);
    const names = kvNames(options.namespace, options.component);
    const logger = options.logger;
    const nc =
      options.connection ??
      (await connectNats({
        ...(o.servers === undefined ? {} : { servers: o.servers }),
        ...(options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs }),
        ...(options.auth === undefined ? {} : { auth: options.auth }),
        ...(logger === undefined ? {} : { logger }),
        name: `kvindex-router-${o.consumerName}`,
      }));
    try {
      // Each step is retried through a passing outage (retryStartup); a server without
      // JetStream (no responder at all) still fails at once. The restore is safe to repeat: it
      // applies nothing until the snapshot is downloaded whole.
      const jet = await retryStartup('open JetStream', () => openJetStream(nc), logger, undefined, true);
      await retryStartup('stream', () => ensureStream(jet.jsm, names, o.streamMaxAgeS, logger), logger);
      let restored: RestoreReport;
      let sub: KvEventSubscriber;
      for (let attempt = 1; ; attempt++) {
        restored = await retryStartup('restore', () => restoreSnapshot({ ...jet, names, indexer: options.indexer, logger: logger ?? null }, o.resetStates && attempt === 1, o.onBadSnapshot), logger);
        const made = new KvEventSubscriber(o, options, names, nc, jet, restored);
        sub = made;
        await retryStartup('consumer', () => made.createConsumer(), logger);
        // From here this router's consumer holds purges at its position. Before it existed,
        // another router could snapshot and purge past the snapshot just restored: the events
        // between were then gone, and this router waited for them for good (a CI run's
        // two-router test hung). The newer snapshot covers them: restore it instead.
        const first = (await retryStartup('stream', () => jet.jsm.streams.info(names.stream), logger)).state.first_seq;
        if (restored.outcome !== 'restored' || first <= restored.resumeAfter + 1 || attempt === RESTORE_ATTEMPTS) break;
        logger?.warn({ stream: names.stream, resumeAfter: restored.resumeAfter, firstSeq: first }, 'another router purged past the snapshot while it was restored: restoring the newer one');
        made.discard();
        await forgetAll(options.indexer);
      }
      sub.watchConnection();
      sub.loopDone = sub.loop();
      sub.snapshots.start();
      sub.startIdleRemoval();
      sub.readinessTracker.update(sub.appliedSeq);
      logger?.info(
        { stream: names.stream, consumer: o.consumerName, resumeAfter: restored.resumeAfter, snapshotThreshold: o.snapshotThreshold },
        'subscribed to the KV event stream',
      );
      return sub;
    } catch (err) {
      if (options.connection === undefined) await nc.close().catch(() => undefined);
      throw err;
    }
  }

  /** Every event up to this stream sequence is applied to the indexer. */
  get lastAppliedSeq(): number {
    return this.appliedSeq;
  }

  /** The NATS connection (owned by the subscriber unless one was passed in). */
  get connection(): NatsConnection {
    return this.nc;
  }

  stats(): SubscriberStats {
    return {
      stream: this.names.stream,
      consumer: this.consumerName,
      ...this.intake.counts,
      eventsByType: { stored: this.intake.byType[0]!, removed: this.intake.byType[1]!, cleared: this.intake.byType[2]! },
      workerEventIdGaps: this.intake.workers.stats().gaps,
      workerMissingEvents: Number(this.intake.workers.stats().missingEvents),
      workersRemoved: this.workersRemoved,
      lag: this.readinessTracker.lag(this.appliedSeq),
      snapshots: this.snapshots.taken,
      snapshotsDeferred: this.snapshots.deferred,
      lastAppliedSeq: this.appliedSeq,
    };
  }

  /** Ack floor (stream sequence) of this router's durable consumer; null when the server cannot say. */
  async consumerAckFloor(): Promise<number | null> {
    try {
      return (await this.jsm.consumers.info(this.names.stream, this.consumerName)).ack_floor.stream_seq;
    } catch {
      return null;
    }
  }

  /** The last snapshot this router took (null: none since start). */
  get lastSnapshot(): SnapshotScheduler['last'] {
    return this.snapshots.last;
  }

  /**
   * True when the index is complete enough to route with: started (snapshot restored), caught up
   * to within `readyMaxLag` messages, not partial after a skipped snapshot, not stopped.
   */
  ready(): boolean {
    return this.readiness().ready;
  }

  /** `ready()` with the reason and the lag. */
  readiness(): Readiness {
    this.syncSnapshots();
    return this.readinessTracker.get(this.appliedSeq);
  }

  /** A snapshot taken since the last look ends a partial index (onBadSnapshot 'skip'). */
  private syncSnapshots(): void {
    if (this.snapshots.taken === this.snapshotsSeen) return;
    this.snapshotsSeen = this.snapshots.taken;
    this.readinessTracker.setPartial(false, this.appliedSeq);
  }

  /** Resolves when ready (at once if it is). */
  whenReady(): Promise<void> {
    return this.readinessTracker.whenReady(this.appliedSeq);
  }

  /** Per-worker last event and event-id gaps (worker-activity.ts). */
  get workers(): WorkerActivity {
    return this.intake.workers;
  }

  /** Calls `listener` each time readiness changes (the readiness event). */
  onReadinessChange(listener: (r: Readiness) => void): void {
    this.readinessTracker.onChange(listener);
  }

  /**
   * Removes a worker's blocks from the index now (an admin request, or idleness) and forgets its
   * event ids. Resolves with whether this router had seen events from it. Its later events are
   * applied again as usual.
   */
  async removeWorker(workerId: bigint, why = 'request'): Promise<boolean> {
    const known = this.intake.workers.forget(workerId);
    await this.indexer.removeWorker(workerId);
    this.workersRemoved++;
    this.logger?.info({ workerId: workerId.toString(), why, known }, 'worker removed from the index');
    return known;
  }

  private startIdleRemoval(): void {
    const idleMs = this.o.workerIdleMs;
    if (idleMs === null) return;
    // Checked a few times per threshold, at most every 5 s: removal is late by at most that much.
    const every = Math.max(10, Math.min(5_000, Math.floor(idleMs / 4)));
    this.idleTimer = setInterval(() => {
      if (this.stopping) return;
      for (const id of this.intake.workers.idle(Date.now(), idleMs)) {
        void this.removeWorker(id, `no event for ${idleMs} ms`).catch((err: unknown) => {
          this.logger?.warn({ workerId: id.toString(), ...errorFields(err) }, 'could not remove an idle worker');
        });
      }
    }, every);
    this.idleTimer.unref();
  }

  /**
   * Resolves once every event up to `seq` is applied; rejects after `timeoutMs` (default 10 s)
   * or when the subscriber closes first.
   */
  waitForSeq(seq: number, timeoutMs = 10_000): Promise<void> {
    return this.waiters.wait(seq, () => this.appliedSeq, timeoutMs);
  }

  /**
   * Takes a snapshot now, whatever the stream's size (purge, dump and upload as the periodic
   * check does). Resolves with its report, or null when no purge was possible.
   */
  snapshotNow(): Promise<SnapshotReport | null> {
    return this.snapshots.now();
  }

  /** Stops fetching after the current pull (its events applied and acked); `resume()` continues. */
  async pause(): Promise<void> {
    if (this.stopping) return;
    await this.pauseGate.pause();
  }

  resume(): void {
    this.pauseGate.resume();
  }

  /** Resolves when the subscriber stops: null after `close()`, the error if the indexer failed. */
  whenStopped(): Promise<Error | null> {
    return this.loopDone;
  }

  /**
   * Stops fetching (ends the pull in flight), applies and acks what was delivered (the final
   * ack waits for the server's confirmation), waits for a snapshot in
   * progress, deletes the durable consumer unless `keepConsumer`, and closes the connection if
   * the subscriber opened it. The indexer stays open. Safe to call twice.
   */
  async close(): Promise<void> {
    if (this.closed) {
      await this.loopDone;
      return;
    }
    this.closed = true;
    this.stopping = true;
    if (this.idleTimer !== null) clearInterval(this.idleTimer);
    this.readinessTracker.stop(this.appliedSeq);
    const snapshotsStopped = this.snapshots.stop();
    // Abandoning the pull is harmless now: deliveries that still arrive are never acked, and the
    // consumer is deleted (or, kept, is recreated from the snapshot position by the next start).
    void this.activeFetch?.close().catch(() => undefined);
    this.resume();
    const failure = await this.loopDone;
    await snapshotsStopped;
    if (!this.o.keepConsumer) {
      await this.jsm.consumers.delete(this.names.stream, this.consumerName).catch((err: unknown) => {
        this.logger?.warn({ consumer: this.consumerName, ...errorFields(err) }, 'could not delete the durable consumer');
      });
    }
    if (this.onShardMalformed !== null) this.indexer.off('malformed', this.onShardMalformed);
    (this.status as { stop?: () => void } | null)?.stop?.();
    this.waiters.rejectAll(this.appliedSeq);
    this.logger?.info({ ...this.stats(), failed: failure !== null }, 'unsubscribed from the KV event stream');
    if (this.ownsConnection) await this.nc.close().catch(() => undefined);
  }

  /** Logs disconnections and reconnections of the NATS client (it reconnects by itself). */
  private watchConnection(): void {
    const logger = this.logger;
    if (logger === null) return;
    const status = this.nc.status();
    this.status = status;
    void (async () => {
      for await (const s of status) {
        if (s.type === Events.Disconnect) logger.warn({ server: s.data }, 'NATS connection lost; reconnecting');
        else if (s.type === Events.Reconnect) logger.info({ server: s.data }, 'NATS connection re-established');
      }
    })().catch(() => undefined);
  }

  // ---- consuming ----

  private async loop(): Promise<Error | null> {
    let backoff = 100;
    while (!this.stopping) {
      if (this.pauseGate.wanted) {
        const failed = await this.settle().then(
          () => null,
          (err: unknown) => err,
        );
        if (failed !== null) return this.fail(failed);
        await this.pauseGate.paused();
        continue;
      }
      try {
        if (this.resetNeeded) {
          await this.settle();
          await this.createConsumer();
        }
        this.consumer ??= await this.js.consumers.get(this.names.stream, this.consumerName);
        await this.fetchBatch(this.consumer);
        if (this.failingSince !== 0) {
          this.logger?.info({ downMs: Date.now() - this.failingSince }, 'consuming the KV event stream again');
          this.failingSince = 0;
        }
        backoff = 100;
      } catch (err) {
        if (isFatal(err)) return this.fail(err);
        if (this.failingSince === 0) {
          this.failingSince = Date.now();
          this.logger?.warn({ ...errorFields(err) }, 'fetching KV events failed; retrying');
        } else {
          this.logger?.debug({ ...errorFields(err) }, 'fetching KV events failed; retrying');
        }
        this.consumer = null;
        if (isApiError(err, API_CONSUMER_NOT_FOUND) || /consumer (not found|deleted)/i.test(reason(err))) this.resetNeeded = true;
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 2_000);
      }
    }
    try {
      await this.settle();
    } catch (err) {
      return this.fail(err);
    }
    this.pauseGate.stopped();
    return null;
  }

  private fail(err: unknown): Error {
    this.logger?.error(errorFields(err), 'indexer failed: the subscriber stops');
    this.stopping = true;
    this.readinessTracker.stop(this.appliedSeq);
    void this.snapshots.stop();
    this.pauseGate.stopped();
    return err instanceof Error ? err : new Error(String(err));
  }

  private async fetchBatch(consumer: Consumer): Promise<void> {
    const o = this.o;
    const limit = this.avgMessageBytes > 0 ? Math.max(1, Math.min(o.batchMessages, Math.floor(o.batchBytes / this.avgMessageBytes))) : o.batchMessages;
    const msgs = await consumer.fetch({ max_messages: limit, expires: o.fetchExpiresMs });
    this.activeFetch = msgs;
    let last: JsMsg | null = null;
    let n = 0;
    let bytes = 0;
    try {
      // The pull is read to its end even when resetting: a pull abandoned early keeps receiving
      // deliveries into a dead inbox until it expires on the server (only `close()` abandons it).
      for await (const m of msgs) {
        n++;
        bytes += m.data.length;
        if (this.resetNeeded) continue;
        const ok = this.intake.accept(m);
        if (ok === true || (ok !== false && (await ok))) last = m;
        if (this.indexer.needsDrain) await this.indexer.drained();
        // Caught up (the server has nothing more, and `getPending()` counts only this message):
        // commit now rather than when the pull expires, so acks and `lastAppliedSeq` do not lag
        // by up to `fetchExpiresMs`.
        if (last !== null && m.info.pending === 0 && msgs.getPending() <= 1) {
          await this.commit(last);
          last = null;
        }
      }
    } finally {
      this.activeFetch = null;
    }
    if (n > 0) {
      const avg = bytes / n;
      this.avgMessageBytes = this.avgMessageBytes === 0 ? avg : 0.8 * this.avgMessageBytes + 0.2 * avg;
    }
    if (last !== null) await this.commit(last);
  }

  /**
   * Starts committing what was handed to the indexer so far: once `indexer.flush()` says it is
   * applied, ack through `last` and advance `lastAppliedSeq`. Resolves when the commit is
   * started, after the previous one finished: one commit stays in flight while the next pull is
   * fetched and parsed, so with shard threads the main thread does not idle while they apply
   * (and they do not idle while it fetches). `settle()` waits for the one in flight.
   */
  private async commit(last: JsMsg): Promise<void> {
    await this.settle();
    const upTo = this.intake.position.position;
    const flushed = this.indexer.flush().then(async () => {
      if (this.stopping) await last.ackAck({ timeout: 2_000 }).catch(() => false);
      else last.ack();
      this.appliedSeq = upTo;
      this.syncSnapshots();
      this.readinessTracker.update(upTo);
      this.waiters.release(upTo);
    });
    // Handled here so a failure is not reported as unhandled; settle() rethrows it.
    flushed.catch(() => undefined);
    this.inFlightCommit = flushed;
  }

  /** Waits for the commit in flight, if any; rethrows its failure (a failed indexer). */
  private async settle(): Promise<void> {
    const c = this.inFlightCommit;
    if (c === null) return;
    this.inFlightCommit = null;
    await c;
  }

  /** Undoes what the constructor hooked up, for a start that restores again (see `start`). */
  private discard(): void {
    if (this.onShardMalformed !== null) this.indexer.off('malformed', this.onShardMalformed);
  }

  /** (Re)creates the durable consumer to deliver from right after the router's position. */
  private async createConsumer(): Promise<void> {
    const { stream } = this.names;
    const name = this.consumerName;
    const info = await ensureStream(this.jsm, this.names, this.o.streamMaxAgeS, this.logger ?? undefined);
    this.readinessTracker.streamState(info.state.first_seq, info.state.last_seq);
    if (info.state.last_seq < this.intake.position.position) {
      // Sequences only go back when the stream was deleted and created again.
      this.logger?.warn(
        { stream, lastSeq: info.state.last_seq, appliedSeq: this.intake.position.position },
        'the stream is behind this router (recreated?): consuming it from its start',
      );
      this.intake.position.position = 0;
      this.appliedSeq = 0;
    }
    const from = this.intake.position.position + 1;
    const { consumer, existed } = await createDurableConsumer(this.jsm, this.js, stream, name, from, this.o.consumerInactiveThresholdS);
    this.consumer = consumer;
    if (this.resetNeeded || existed) {
      this.intake.counts.consumerResets++;
      this.logger?.info({ consumer: name, fromSeq: from }, 'durable consumer recreated');
    }
    this.resetNeeded = false;
  }
}

/** Errors that mean the indexer cannot take more events. */
function isFatal(err: unknown): boolean {
  return err instanceof KvIndexError && (err.code === ErrorCode.Closed || err.code === ErrorCode.ShardFailed);
}

/** Restores at most this many times at start when purges overtake them (see `start`). */
const RESTORE_ATTEMPTS = 3;

/** Removes every worker a restore put in the indexer (before the start's consumption begins). */
async function forgetAll(indexer: ShardedIndexer): Promise<void> {
  const workers = new Set((await indexer.dumpEvents()).map((e) => e.workerId));
  for (const w of workers) await indexer.removeWorker(w);
  await indexer.flush();
}
