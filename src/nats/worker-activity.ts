/**
 * Per-worker bookkeeping on the NATS path: the last event id and time of each (worker, DP rank),
 * event-id gaps (Dynamo numbers events per worker and rank, +1 each: a jump means events the
 * router never saw, so that worker's cache is misreported until it clears or is removed), and
 * workers idle for longer than a threshold (candidates for removal: Dynamo removes a worker's
 * blocks when discovery loses it; kvindex has no discovery, so silence is the signal).
 *
 * Ids are kept as bigint (u64 worker and event ids go past 2^53).
 */

interface Cursor {
  lastEventId: bigint;
  lastSeenMs: number;
}

export type Observation = 'first' | 'next' | 'gap' | 'stale';

export interface WorkerActivityStats {
  workers: number;
  /** Event-id jumps seen, and the events they skipped. */
  gaps: number;
  missingEvents: bigint;
  /** Events whose id was not above the last one (a restarted worker or a replay). */
  stale: number;
}

export class WorkerActivity {
  private readonly workers = new Map<bigint, Map<number, Cursor>>();
  private readonly counts: WorkerActivityStats = { workers: 0, gaps: 0, missingEvents: 0n, stale: 0 };

  /** Records one event; says how its id follows the worker's (and rank's) previous one. */
  observe(workerId: bigint, dpRank: number, eventId: bigint, nowMs: number): Observation {
    let ranks = this.workers.get(workerId);
    if (ranks === undefined) {
      ranks = new Map();
      this.workers.set(workerId, ranks);
    }
    const c = ranks.get(dpRank);
    if (c === undefined) {
      ranks.set(dpRank, { lastEventId: eventId, lastSeenMs: nowMs });
      return 'first';
    }
    c.lastSeenMs = nowMs;
    const expected = c.lastEventId + 1n;
    let kind: Observation = 'next';
    if (eventId > expected) {
      this.counts.gaps++;
      this.counts.missingEvents += eventId - expected;
      kind = 'gap';
    } else if (eventId < expected) {
      this.counts.stale++;
      kind = 'stale';
    }
    c.lastEventId = eventId;
    return kind;
  }

  /** The id the worker's rank was expected to send next (for logs), or null. */
  expectedNext(workerId: bigint, dpRank: number): bigint | null {
    const c = this.workers.get(workerId)?.get(dpRank);
    return c === undefined ? null : c.lastEventId + 1n;
  }

  /** Forgets a worker (after its removal from the index). True when it was known. */
  forget(workerId: bigint): boolean {
    return this.workers.delete(workerId);
  }

  /** Workers whose every rank has been silent for at least `idleMs`. */
  idle(nowMs: number, idleMs: number): bigint[] {
    const out: bigint[] = [];
    for (const [id, ranks] of this.workers) {
      let last = 0;
      for (const c of ranks.values()) if (c.lastSeenMs > last) last = c.lastSeenMs;
      if (nowMs - last >= idleMs) out.push(id);
    }
    return out;
  }

  /**
   * Up to `max` workers, most recently active first: id, and the last event id and time of the
   * worker's most recently active rank. Bounded so a metrics scrape stays small.
   */
  recent(max: number): Array<{ workerId: bigint; lastEventId: bigint; lastSeenMs: number }> {
    const all: Array<{ workerId: bigint; lastEventId: bigint; lastSeenMs: number }> = [];
    for (const [id, ranks] of this.workers) {
      let best: Cursor | null = null;
      for (const c of ranks.values()) if (best === null || c.lastSeenMs > best.lastSeenMs) best = c;
      if (best !== null) all.push({ workerId: id, lastEventId: best.lastEventId, lastSeenMs: best.lastSeenMs });
    }
    all.sort((a, b) => b.lastSeenMs - a.lastSeenMs);
    return all.slice(0, max);
  }

  stats(): WorkerActivityStats {
    return { ...this.counts, workers: this.workers.size };
  }
}
