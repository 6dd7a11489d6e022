/**
 * The intake of one stream message on a router: its place in the stream (delivery.ts: new,
 * duplicate, or after a gap that is checked against the stream), then the indexer, then the
 * per-worker bookkeeping (event-header.ts, worker-activity.ts), with the counters `stats()`
 * reports. Split from subscriber.ts, which owns the consumer, the pulls and the acks.
 */

import type { JetStreamManager, JsMsg } from 'nats';
import type { Logger } from 'pino';
import { EventParseError, type KvIndexError } from '../errors.js';
import type { ShardedIndexer } from '../indexer/sharded-indexer.js';
import { DeliveryTracker, explainGap, type GapReport } from './delivery.js';
import { API_NO_MESSAGE, errorFields, isApiError } from './errors.js';
import { EVENT_TYPES, readEventHeader, type EventHeader } from './event-header.js';
import type { ReadinessTracker } from './readiness.js';
import { WorkerActivity } from './worker-activity.js';

export interface IntakeContext {
  indexer: ShardedIndexer;
  jsm: JetStreamManager;
  stream: string;
  consumerName: string;
  parseInShards: boolean;
  readiness: ReadinessTracker;
  logger: Logger | null;
  /** Deliveries were lost in transit: the consumer must be recreated after `position.position`. */
  onLost: () => void;
}

export class MessageIntake {
  /** The stream sequence of the last message handed to the indexer. */
  readonly position: DeliveryTracker;
  /** Per-worker last event and event-id gaps. */
  readonly workers = new WorkerActivity();
  readonly counts = { received: 0, applied: 0, malformed: 0, duplicates: 0, missedSeqs: 0, lostDeliveries: 0, consumerResets: 0, pending: 0 };
  /** Applied events by type, indexed as `EVENT_TYPES`. */
  readonly byType = [0, 0, 0];
  private readonly header: EventHeader = { workerId: 0n, eventId: 0n, type: 0, dpRank: 0 };
  private readonly indexer: ShardedIndexer;
  private readonly jsm: JetStreamManager;
  private readonly stream: string;
  private readonly consumerName: string;
  private readonly parseInShards: boolean;
  private readonly readiness: ReadinessTracker;
  private readonly logger: Logger | null;
  private readonly onLost: () => void;

  constructor(ctx: IntakeContext, resumeAfter: number) {
    this.position = new DeliveryTracker(resumeAfter);
    this.indexer = ctx.indexer;
    this.jsm = ctx.jsm;
    this.stream = ctx.stream;
    this.consumerName = ctx.consumerName;
    this.parseInShards = ctx.parseInShards;
    this.readiness = ctx.readiness;
    this.logger = ctx.logger;
    this.onLost = ctx.onLost;
  }

  /**
   * Handles one delivery; true when it may be acked (everything but a message after deliveries
   * lost in transit). A promise only for a gap in stream sequences, which asks the server.
   */
  accept(m: JsMsg): boolean | Promise<boolean> {
    this.counts.received++;
    const pending = m.info.pending;
    this.counts.pending = pending;
    this.readiness.delivered(m.seq, pending);
    const d = this.position.classify(m.seq);
    if (d.kind === 'duplicate') {
      this.counts.duplicates++;
      return true;
    }
    if (d.kind === 'gap') return this.acceptAfterGap(m, d.from, d.to);
    return this.apply(m);
  }

  /** Explains the gap `from..to` before `m` (gone from the stream, or lost in transit) and acts on it. */
  private async acceptAfterGap(m: JsMsg, from: number, to: number): Promise<boolean> {
    const stream = this.stream;
    let report: GapReport;
    try {
      const info = await this.jsm.streams.info(stream);
      report = await explainGap(from, to, info.state.first_seq, (seq) =>
        this.jsm.streams.getMessage(stream, { seq }).then(
          () => true,
          (err: unknown) => {
            if (isApiError(err, API_NO_MESSAGE)) return false;
            throw err;
          },
        ),
      );
    } catch (err) {
      this.logger?.warn({ from, to, ...errorFields(err) }, 'cannot tell where skipped stream sequences went: recreating the consumer after the last applied sequence');
      this.onLost();
      return false;
    }
    if (report.inTransit.length > 0) {
      this.counts.lostDeliveries += report.inTransit.length;
      this.logger?.warn(
        { consumer: this.consumerName, lostSeqs: report.inTransit, from, to, resumeAfter: this.position.position },
        'deliveries were lost in transit: recreating the consumer after the last applied sequence',
      );
      this.onLost();
      return false;
    }
    this.counts.missedSeqs += to - from + 1;
    if (report.purged > 0) {
      this.logger?.warn({ from, to: from + report.purged - 1 }, 'stream sequences purged or expired before this router read them');
    }
    if (report.deleted > 0) {
      this.logger?.warn(
        { from: from + report.purged, to, count: report.deleted },
        'stream sequences missing from the stream (deleted, or dropped by the server): their events are not in the index',
      );
    }
    this.position.skipGap(m.seq);
    return this.apply(m);
  }

  /** Hands a new message's event to the indexer; a malformed one is counted and logged. */
  private apply(m: JsMsg): boolean {
    const seq = m.seq;
    const h = readEventHeader(m.data, this.header) ? this.header : null;
    try {
      if (this.parseInShards) this.indexer.applyEventJson(m.data, seq);
      else this.indexer.applyEventJsonOnCaller(m.data);
    } catch (err) {
      if (!(err instanceof EventParseError)) throw err;
      this.counts.malformed++;
      this.logger?.warn(
        { streamSeq: seq, subject: m.subject, bytes: m.data.length, code: err.code, err: err.message },
        'malformed KV event skipped',
      );
      return true;
    }
    this.counts.applied++;
    if (h !== null) this.track(h, seq);
    return true;
  }

  /** Per-worker bookkeeping of an applied event; an event-id jump is counted and logged. */
  private track(h: EventHeader, seq: number): void {
    this.byType[h.type]!++;
    const expected = this.workers.expectedNext(h.workerId, h.dpRank);
    if (this.workers.observe(h.workerId, h.dpRank, h.eventId, Date.now()) === 'gap') {
      this.logger?.warn(
        { workerId: h.workerId.toString(), dpRank: h.dpRank, expectedEventId: expected?.toString(), eventId: h.eventId.toString(), streamSeq: seq, type: EVENT_TYPES[h.type] },
        "event ids of a worker jumped: the router missed some of its events, so this worker's cache may be misreported until it clears or is removed",
      );
    }
  }

  /** A shard could not parse a message handed over with `parseInShards`: it changed nothing. */
  shardRejected(err: KvIndexError, streamSeq?: number): void {
    this.counts.applied--;
    this.counts.malformed++;
    this.logger?.warn({ streamSeq, code: err.code, err: err.message }, 'malformed KV event skipped (parsed in a shard thread)');
  }
}
