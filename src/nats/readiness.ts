/**
 * When a router's index is complete enough to route with: the snapshot is restored (or skipped
 * knowingly: then never until a new snapshot is taken) and the consumer has caught up to within
 * `maxLag` messages of the stream's end. The stream's end is estimated without polling: the
 * last sequence seen at consumer creation, raised by every delivery to its sequence plus the
 * server's count of messages still pending for the consumer.
 */

export interface Readiness {
  ready: boolean;
  /** Why not ready ('catching up', 'partial index', 'stopped'), or 'ready'. */
  reason: string;
  /** Stream messages not applied yet (estimate). */
  lag: number;
}

export class ReadinessTracker {
  private streamLast = 0;
  private floor = 0;
  private partial = false;
  private stopped = false;
  private wasReady = false;
  private waiters: Array<() => void> = [];
  private readonly listeners: Array<(r: Readiness) => void> = [];

  constructor(private readonly maxLag: number) {}

  /** The stream's state when the consumer was (re)created. */
  streamState(firstSeq: number, lastSeq: number): void {
    this.floor = Math.max(0, firstSeq - 1);
    if (lastSeq > this.streamLast) this.streamLast = lastSeq;
  }

  /** A delivery of `seq` with `pending` more messages behind it on the server. */
  delivered(seq: number, pending: number): void {
    const tail = seq + pending;
    if (tail > this.streamLast) this.streamLast = tail;
  }

  /** The index is missing the snapshot's events (true) or complete again after a new snapshot (false). */
  setPartial(partial: boolean, appliedSeq: number): void {
    this.partial = partial;
    this.update(appliedSeq);
  }

  stop(appliedSeq: number): void {
    this.stopped = true;
    this.update(appliedSeq);
  }

  lag(appliedSeq: number): number {
    return Math.max(0, this.streamLast - Math.max(appliedSeq, this.floor));
  }

  get(appliedSeq: number): Readiness {
    const lag = this.lag(appliedSeq);
    if (this.stopped) return { ready: false, reason: 'stopped', lag };
    if (this.partial) return { ready: false, reason: 'partial index (snapshot skipped): ready after the next snapshot', lag };
    if (lag > this.maxLag) return { ready: false, reason: `catching up: ${lag} messages behind (ready at ${this.maxLag})`, lag };
    return { ready: true, reason: 'ready', lag };
  }

  /** Re-evaluates after progress; calls listeners on a change, resolves waiters when ready. */
  update(appliedSeq: number): void {
    const r = this.get(appliedSeq);
    if (r.ready !== this.wasReady) {
      this.wasReady = r.ready;
      for (const l of this.listeners) l(r);
    }
    if (r.ready && this.waiters.length > 0) {
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    }
  }

  onChange(listener: (r: Readiness) => void): void {
    this.listeners.push(listener);
  }

  /** Resolves when ready (at once if it is). */
  whenReady(appliedSeq: number): Promise<void> {
    if (this.get(appliedSeq).ready) return Promise.resolve();
    return new Promise((res) => this.waiters.push(res));
  }
}
