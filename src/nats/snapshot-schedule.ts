/**
 * When a router snapshots: every `intervalMs` ±10 % (Dynamo: 1 s ± 100 ms, so routers that
 * started together drift apart), it reads the stream's message count and, above the threshold,
 * runs `takeSnapshot`. Checks and on-demand snapshots run one at a time.
 */

import type { Logger } from 'pino';
import type { SnapshotEncoding } from '../protocol/types.js';
import { wrap } from './connect.js';
import { errorFields } from './errors.js';
import { takeSnapshot, type SnapshotContext, type SnapshotReport } from './snapshot.js';

export class SnapshotScheduler {
  /** Snapshots taken (uploaded). */
  taken = 0;
  /** Snapshots skipped because another router held the lease. */
  deferred = 0;
  private readonly ctx: SnapshotContext;
  /** The consumer last reported as holding back purges (null: none). */
  private heldBy: string | null = null;
  /** The last snapshot taken, for metrics. */
  last: (SnapshotReport & { atMs: number }) | null = null;
  private readonly threshold: number | null;
  private readonly intervalMs: number;
  private readonly encoding: SnapshotEncoding;
  private readonly coveredSeq: () => number;
  private readonly logger: Logger | null;
  private chain: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private failing = false;

  /** `coveredSeq` as for `takeSnapshot`: the stream sequence of the last event handed to the indexer. */
  constructor(ctx: SnapshotContext, threshold: number | null, intervalMs: number, encoding: SnapshotEncoding, coveredSeq: () => number) {
    this.ctx = ctx;
    this.threshold = threshold;
    this.intervalMs = intervalMs;
    this.encoding = encoding;
    this.coveredSeq = coveredSeq;
    this.logger = ctx.logger;
    this.ctx = {
      ...ctx,
      onDeferred: () => {
        this.deferred++;
      },
      // Once per holder, not per 1 s check: the same consumer holding the floor is one fact.
      onHeldBack: (h) => {
        if (h.consumer === this.heldBy) return;
        this.heldBy = h.consumer;
        this.logger?.info(
          { stream: ctx.names.stream, holder: h.consumer, holderAckFloor: h.floor, behind: h.behind, messages: h.messages },
          'snapshot and purge held back: another consumer has acknowledged less than this router applied (a crashed router\'s consumer stays until its inactivity threshold)',
        );
      },
    };
  }

  /** Starts the periodic checks (none without a threshold). */
  start(): void {
    if (this.threshold === null || this.stopped) return;
    const delay = this.intervalMs * (0.9 + 0.2 * Math.random());
    this.timer = setTimeout(() => {
      this.timer = null;
      // Failures are logged by serial(); the next check runs as usual.
      void this.serial(() => this.check())
        .catch(() => null)
        .finally(() => this.start());
    }, delay);
  }

  /** Snapshots now whatever the stream holds; null when nothing could be purged. */
  now(): Promise<SnapshotReport | null> {
    return this.serial(async () => this.run(await this.messages()));
  }

  /** Stops the checks and waits for the one running. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.chain.catch(() => undefined);
  }

  private async check(): Promise<SnapshotReport | null> {
    if (this.stopped || this.threshold === null) return null;
    const messages = await this.messages();
    if (messages <= this.threshold) return null;
    this.logger?.debug({ messages, threshold: this.threshold }, 'stream over the snapshot threshold');
    return this.run(messages);
  }

  private async messages(): Promise<number> {
    const stream = this.ctx.names.stream;
    try {
      return (await this.ctx.jsm.streams.info(stream)).state.messages;
    } catch (err) {
      throw wrap(`stream info ${stream}`, err);
    }
  }

  private async run(messages: number): Promise<SnapshotReport | null> {
    const report = await takeSnapshot(this.ctx, this.encoding, this.coveredSeq, messages);
    if (report !== null) {
      this.taken++;
      this.heldBy = null;
      this.last = { ...report, atMs: Date.now() };
    }
    return report;
  }

  /**
   * Runs `work` after the previous one. Failures are logged at warn once, then at debug until
   * a run succeeds again (a NATS outage would otherwise log every second), and rethrown.
   */
  private serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.chain.then(work);
    this.chain = run.then(
      () => {
        this.failing = false;
      },
      (err: unknown) => {
        if (this.failing) this.logger?.debug({ ...errorFields(err) }, 'snapshot failed');
        else this.logger?.warn({ ...errorFields(err) }, 'snapshot failed');
        this.failing = true;
      },
    );
    return run;
  }
}
