/**
 * The engine of `kvindex replay`: reads a trace, a recorded event stream or a replay workload,
 * drives a `ShardedIndexer` with it and measures what the indexer did. Input kinds are told
 * from the first valid line (see `src/trace/input-kind.ts`):
 * - trace: every request is expanded by the cluster simulation and routed by a `KvRouter` over
 *   the indexer (replay-routing.ts: the product's decision, with in-flight loads), and the
 *   chosen worker's events are applied; every worker's score is also checked against the
 *   simulation's cache model (`mismatches`);
 * - recorder / events: every event is applied;
 * - workload: `match` lines are looked up and compared with `expect` (`mismatches`), `event`
 *   lines applied.
 *
 * With shard threads, lookups read the latest applied state without waiting for the events in
 * flight (`readYourWrites: false`), as a router under load does: engines publish their events
 * after the fact, and a router does not hold a request back for them. The score check then
 * tells stale answers from wrong ones (replay-stale.ts). `readYourWrites: true` (the CLI's
 * `--read-your-writes`) makes every lookup wait, and the results equal the in-thread run's.
 *
 * `indexerMs` is the indexer's time. In-thread, the time inside indexer calls (applyEvent,
 * lookups, backpressure waits, the final flush), as `IndexerClock` measures it, so the
 * simulation's own work (token generation, hashing, the cache model) does not count against
 * the indexer. With shard threads and lookups that do not wait, the calling thread's time
 * inside indexer calls (posting the batches included) and the busiest shard's time applying
 * (`ShardStats.applyMs`) run in parallel: `indexerMs` is the longer of the two, and the shards'
 * backlog at the end is in the final flush. With threads and no lookups (event streams) or
 * waiting lookups, wall time from a call until the shards are known to have caught up (a
 * lookup's reply, the final `flush()`), as `IndexerClock` measures it: there the shards'
 * applying is what is timed, and the calls alone only enqueue. Block-ops/s is (blocks stored +
 * blocks removed + blocks matched by lookups) over `indexerMs`.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode, KvIndexError } from '../errors.js';
import { MAX_TIMER_MS } from '../protocol/time-limits.js';
import { parseJsonLossless, type JsonValue } from '../protocol/json-value.js';
import type { RouterEvent } from '../protocol/types.js';
import { ShardedIndexer } from '../indexer/sharded-indexer.js';
import { BadLines } from '../trace/bad-lines.js';
import { ClusterSim, type ClusterSimOptions, type PreparedRequest } from '../trace/cluster-sim.js';
import { detectInputKind, InputKind, parseRecordedLine } from '../trace/input-kind.js';
import { openLineSource, overlongReason, type LineSource } from '../trace/line-source.js';
import { traceRequestFrom } from '../trace/mooncake.js';
import { parseWorkloadLine } from '../trace/workload.js';
import { IndexerClock } from './indexer-clock.js';
import { ReplayRouting, type ReplayRoutingOptions } from './replay-routing.js';
import { StaleReads } from './replay-stale.js';
import { LatencyLog, type ReplaySummary, type ReplayProgress } from './replay-summary.js';
import type { RequestSample } from './replay-timeline.js';

export interface ReplayRunOptions {
  file: string;
  /** Shard threads of the indexer (0: in-thread). */
  shards: number;
  /**
   * With shard threads: lookups wait until the shards applied the events sent before them
   * (default false: they read the latest applied state, as a router under load does).
   */
  readYourWrites?: boolean;
  /** Timestamp compression factor; Infinity (default) replays as fast as possible. */
  speed: number;
  /** Stop at the first bad line (EventParseError) instead of counting it. */
  strict: boolean;
  /** Read at most this many lines. */
  limit: number;
  /** Cluster simulation of a trace (ignored for other inputs). */
  sim: ClusterSimOptions;
  /** How the trace's requests are routed (KvRouter settings; traces only). */
  routing?: ReplayRoutingOptions;
  /** Called about every 100 ms of replay with the counters so far. */
  onProgress?: (p: ReplayProgress) => void;
  /**
   * Receives every event applied, with its input timestamp in ms (the request's for a trace,
   * the recorder's, 0 when the input has none), e.g. to write a recorder file.
   */
  onEvent?: (timestamp: number, event: RouterEvent) => void;
  /** Receives every request once its hit is known (the HTML report's timeline). */
  onRequest?: (sample: RequestSample) => void;
}

/** Keeps `ts` (ms of input time) from running ahead of `speed` x wall time. */
class Pacer {
  private origin = NaN;
  private start = 0;
  constructor(private readonly speed: number) {}

  /** Waits until `ts` is due; `settle` runs first when there is time to wait. */
  async wait(ts: number, settle: () => Promise<void>): Promise<void> {
    if (this.speed === Infinity) return;
    if (Number.isNaN(this.origin)) {
      this.origin = ts;
      this.start = performance.now();
      return;
    }
    const due = this.start + (ts - this.origin) / this.speed;
    if (due - performance.now() <= 1) return;
    await settle();
    // In steps of at most MAX_TIMER_MS: a longer timer fires at once, and a 3e9 ms gap between
    // timestamps (or --speed 1e-9) was not honoured at all (found by fuzzing).
    for (let ahead = due - performance.now(); ahead > 1; ahead = due - performance.now()) {
      await sleep(Math.min(ahead, MAX_TIMER_MS));
    }
  }
}

/** Replays one file; rejects on I/O errors, a strict bad line, or an indexer failure. */
export async function runReplay(options: ReplayRunOptions): Promise<ReplaySummary> {
  const source = await openLineSource(options.file);
  const blockSize = options.sim.blockSize ?? 64;
  const readYourWrites = options.shards > 0 && options.readYourWrites === true;
  const indexer = await ShardedIndexer.create({ shards: options.shards, blockSize, readYourWrites });
  try {
    return await new ReplayRun(options, source, indexer).run();
  } finally {
    await indexer.close();
  }
}

class ReplayRun {
  private readonly bad: BadLines;
  private readonly latency = new LatencyLog();
  private readonly pacer: Pacer;
  private sim: ClusterSim | null = null;
  private routing: ReplayRouting | null = null;
  private kind: InputKind | null = null;
  private lines = 0;
  private requests = 0;
  private events = 0;
  private stored = 0;
  private removed = 0;
  private cleared = 0;
  private matched = 0;
  /** Chosen with the input's kind (`first`): how indexer time is counted (see the file comment). */
  private clock = new IndexerClock(false);
  /** Lookups that read without waiting check their answers through this (null otherwise). */
  private readonly staleReads: StaleReads | null;
  /** Shard threads. */
  private readonly threaded: boolean;
  /** Indexer calls post their batches before they count as done (set with the kind: `first`). */
  private postInCall = false;
  private mismatches = 0;
  private requestBlocks = 0;
  private hitBlocks = 0;
  private oracleBlocks = 0;
  private lastTimestamp = 0;
  /** Workload: the last match, until the events that follow tell which worker served it. */
  private pending: { scores: Map<bigint, number>; best: number; blocks: number; us: number } | null = null;
  /** Latency of the last lookup, us. */
  private lastLookupUs = 0;
  private lastProgress = 0;

  constructor(
    private readonly options: ReplayRunOptions,
    private readonly source: LineSource,
    private readonly indexer: ShardedIndexer,
  ) {
    this.bad = new BadLines(options.file, options.strict);
    this.pacer = new Pacer(options.speed);
    this.threaded = options.shards > 0;
    this.staleReads = this.threaded && options.readYourWrites !== true ? new StaleReads(indexer) : null;
  }

  /** Lookups that do not wait: the input has lookups and the shards are not waited for. */
  private get readsLatest(): boolean {
    return this.staleReads !== null && (this.kind === InputKind.Trace || this.kind === InputKind.Workload);
  }

  async run(): Promise<ReplaySummary> {
    const started = performance.now();
    let inputError: string | null = null;
    try {
      for await (const { text, line, overlong } of this.source.lines(this.options.limit)) {
        this.lines = line;
        if (overlong !== undefined) {
          this.bad.add(line, overlongReason(overlong));
          continue;
        }
        if (text.length === 0 || text.trim().length === 0) continue;
        if (this.kind === null) await this.first(text, line);
        else await this.handle(this.kind, text, line, null);
        const now = performance.now();
        if (this.options.onProgress !== undefined && now - this.lastProgress >= 100) {
          this.lastProgress = now;
          this.options.onProgress(this.progress());
        }
      }
    } catch (err) {
      // A corrupt gzip stream ends the input, not the run: what was read is replayed and
      // summarised, and the summary says where the input broke (the command then exits 1).
      // With --strict it stops the run, as a bad line does.
      if (this.options.strict || !(err instanceof KvIndexError && err.code === ErrorCode.CorruptInput)) throw err;
      inputError = err.message;
    }
    this.settlePending();
    await this.flush();
    const wallMs = performance.now() - started;

    const stats = await this.indexer.stats();
    const callerMs = this.clock.ms;
    let shardApplyMs = 0;
    for (const s of stats) shardApplyMs = Math.max(shardApplyMs, s.applyMs ?? 0);
    const readsLatest = this.readsLatest;
    const indexerMs = readsLatest ? Math.max(callerMs, shardApplyMs) : callerMs;
    const t = performance.now();
    const snapshot = await this.indexer.dumpSnapshot('bincode');
    const dumpMs = performance.now() - t;
    const pairs = stats.reduce((n, s) => n + s.pairs, 0);
    const bytes = stats.reduce((n, s) => n + s.bytes, 0);
    const status = { ok: 0, parent_block_not_found: 0, block_not_found: 0, invalid_block_sequence: 0 };
    for (const s of stats) for (const k of Object.keys(status) as (keyof typeof status)[]) status[k] += s.events[k];
    const blockOps = this.stored + this.removed + this.matched;
    const lookups = this.latency.count;
    const hasRequests = this.kind === InputKind.Trace || this.kind === InputKind.Workload;
    return {
      file: this.options.file,
      kind: this.kind,
      gzip: this.source.gzip,
      lines: this.lines,
      shards: this.options.shards,
      speed: this.options.speed === Infinity ? null : this.options.speed,
      sim: this.sim === null ? null : this.sim.config,
      routing: this.routing === null ? null : {
        temperature: this.options.routing?.temperature ?? 0,
        credit: this.options.routing?.credit ?? 1,
      },
      requests: this.requests,
      events: this.events,
      cleared: this.cleared,
      blocksStored: this.stored,
      blocksRemoved: this.removed,
      blocksMatched: this.matched,
      blockOps,
      indexerMs,
      wallMs,
      blockOpsPerSec: indexerMs > 0 ? (blockOps / indexerMs) * 1000 : 0,
      lookups,
      lookupP50Us: lookups > 0 ? this.latency.percentile(50) : null,
      lookupP99Us: lookups > 0 ? this.latency.percentile(99) : null,
      lookupMaxUs: lookups > 0 ? this.latency.percentile(100) : null,
      hitRate: hasRequests && this.requestBlocks > 0 ? this.hitBlocks / this.requestBlocks : null,
      oracleHitRate: hasRequests && this.requestBlocks > 0 ? this.oracleBlocks / this.requestBlocks : null,
      mismatches: hasRequests ? this.mismatches : null,
      readYourWrites: this.options.shards === 0 ? null : this.staleReads === null,
      lookupsEarly: readsLatest ? this.staleReads!.early : null,
      staleLookups: readsLatest ? this.staleReads!.stale : null,
      callerMs: readsLatest ? callerMs : null,
      shardApplyMs: readsLatest ? shardApplyMs : null,
      applyStatus: status,
      dumpMs,
      dumpBytes: snapshot.length,
      // The bincode snapshot opens with its event count as a little-endian u64.
      dumpEvents: snapshot.length >= 8 ? Number(new DataView(snapshot.buffer, snapshot.byteOffset, 8).getBigUint64(0, true)) : 0,
      pairs,
      treeBytes: bytes,
      bytesPerPair: pairs > 0 ? bytes / pairs : null,
      badLines: this.bad.count,
      badLineNumbers: [...this.bad.lines],
      badLineReasons: [...this.bad.reasons],
      inputError,
    };
  }

  progress(): ReplayProgress {
    return {
      fraction: this.source.fraction,
      lines: this.lines,
      requests: this.requests,
      events: this.events,
    };
  }

  /** Detects the kind from the first line that parses, counting the ones before as bad. */
  private async first(text: string, line: number): Promise<void> {
    let value: JsonValue;
    try {
      value = parseJsonLossless(text);
    } catch (err) {
      this.bad.add(line, `not valid JSON (${(err as Error).message})`);
      return;
    }
    const kind = detectInputKind(value);
    if (kind === null) {
      this.bad.add(line, 'not a trace request, KV event, recorder line or workload op');
      return;
    }
    this.kind = kind;
    // With threads the calls alone only enqueue, unless lookups do not wait: then the shards'
    // time comes from their own clocks (`run`), and the clock times the calling thread only.
    if (this.threaded && !this.readsLatest) this.clock = new IndexerClock(true);
    this.postInCall = this.readsLatest;
    if (kind === InputKind.Trace) {
      this.sim = new ClusterSim(this.options.sim);
      this.routing = new ReplayRouting(this.indexer, this.sim.config, this.options.routing ?? {});
    }
    await this.handle(kind, text, line, value);
  }

  private async handle(kind: InputKind, text: string, line: number, parsed: JsonValue | null): Promise<void> {
    switch (kind) {
      case InputKind.Trace:
        return this.traceLine(text, line, parsed);
      case InputKind.Recorder:
      case InputKind.Events: {
        let rec;
        try {
          rec = parseRecordedLine(kind, text);
        } catch (err) {
          this.bad.add(line, (err as Error).message);
          return;
        }
        if (rec.timestamp !== null) await this.pacer.wait(rec.timestamp, this.settleBeforeSleep);
        await this.apply([rec.event], rec.timestamp ?? 0);
        return;
      }
      case InputKind.Workload:
        return this.workloadLine(text, line);
    }
  }

  private async traceLine(text: string, line: number, parsed: JsonValue | null): Promise<void> {
    let value = parsed;
    if (value === null) {
      try {
        value = parseJsonLossless(text);
      } catch (err) {
        this.bad.add(line, `not valid JSON (${(err as Error).message})`);
        return;
      }
    }
    const r = traceRequestFrom(value, line, this.lastTimestamp);
    if (!r.ok) {
      this.bad.add(line, r.reason);
      return;
    }
    const sim = this.sim!;
    const req = r.request;
    this.lastTimestamp = req.timestamp;
    // A router serves each request in an event-loop turn of its own, and between them the shards'
    // acks come in, handing batch buffers back for reuse. Lines read from one file chunk run in
    // a single turn: without this, no ack was delivered and each batch took a fresh buffer
    // (a 64 KiB Uint32Array measured ~200 us to allocate under load, against ~6 us reused).
    if (this.threaded) await new Promise<void>((res) => setImmediate(res));
    await this.pacer.wait(req.timestamp, this.settleBeforeSleep);
    const prepared = sim.prepare(req);
    const routing = this.routing!;
    routing.advance(req.timestamp);
    const fresh = this.staleReads?.fresh() ?? true;
    const { decision, worker } = this.route(routing, prepared.local, prepared.tokens.length);
    const scores = new Map<bigint, number>();
    decision.candidates.forEach((c, i) => {
      if (decision.overlaps[i]! > 0) scores.set(c.workerId, decision.overlaps[i]!);
    });
    // A check that looks again (stale reads) must ask before `serve` changes the chosen cache.
    const wrong = this.staleReads === null ? null : await this.traceWrong(fresh, prepared, scores);
    const served = sim.serve(prepared, scores, worker);
    routing.started(req.timestamp, served.blocks, served.hit, req.outputLength);
    this.requests++;
    this.mismatches += (wrong ?? served.mismatches > 0) ? 1 : 0;
    this.requestBlocks += served.blocks;
    this.hitBlocks += served.hit;
    this.oracleBlocks += served.oracle;
    this.options.onRequest?.({ timestamp: req.timestamp, blocks: served.blocks, hit: served.hit, oracle: served.oracle, lookupUs: this.lastLookupUs });
    await this.apply(served.events, req.timestamp);
  }

  /** Whether a trace lookup read without waiting is a mismatch (replay-stale.ts). */
  private async traceWrong(fresh: boolean, prepared: PreparedRequest, scores: ReadonlyMap<bigint, number>): Promise<boolean> {
    const sim = this.sim!;
    const differing = sim.differing(prepared, scores);
    if (differing.length === 0) return false;
    const ids = sim.config.workerIds;
    return this.staleReads!.wrong(fresh, differing.map((w) => ids[w]!), () => sim.differing(prepared, this.indexer.findMatchesSync(prepared.local).scores).length);
  }

  private async workloadLine(text: string, line: number): Promise<void> {
    let op;
    try {
      op = parseWorkloadLine(text, line);
    } catch (err) {
      this.bad.add(line, (err as Error).message);
      return;
    }
    if (op.op === 'event') {
      if (this.pending !== null) this.settle(this.pending.scores.get(op.event.workerId) ?? 0);
      await this.apply([op.event], 0);
    } else if (op.op === 'match') {
      this.settlePending();
      const fresh = this.staleReads?.fresh() ?? true;
      const scores = await this.lookup(op.seq);
      this.requests++;
      const differing = differingWorkers(scores, op.expect);
      if (differing.length > 0) {
        const recheck = (): number => differingWorkers(this.indexer.findMatchesSync(op.seq).scores, op.expect).length;
        if (this.staleReads === null || (await this.staleReads.wrong(fresh, differing, recheck))) this.mismatches++;
      }
      let best = 0;
      for (const s of scores.values()) if (s > best) best = s;
      this.requestBlocks += op.seq.length;
      this.oracleBlocks += best;
      this.pending = { scores, best, blocks: op.seq.length, us: this.lastLookupUs };
    }
  }

  /**
   * A match followed by no event was served by a worker that needed to store nothing, i.e. one
   * holding the whole request: count the best score as its hit.
   */
  private settlePending(): void {
    if (this.pending !== null) this.settle(this.pending.best);
  }

  /** Counts the pending match's hit, now known. */
  private settle(hit: number): void {
    const p = this.pending!;
    this.hitBlocks += hit;
    this.options.onRequest?.({ timestamp: 0, blocks: p.blocks, hit, oracle: p.best, lookupUs: p.us });
    this.pending = null;
  }

  /** Waits until the indexer has applied everything, counting the wait as indexer time. */
  private async flush(): Promise<void> {
    this.clock.begin();
    await this.indexer.flush();
    this.clock.idle();
  }

  /**
   * Before a paced replay sleeps: lets the shards catch up and closes the busy span, so the
   * sleep is not counted as indexer time.
   */
  private readonly settleBeforeSleep = async (): Promise<void> => {
    if (this.clock.busy) await this.flush();
  };

  /**
   * The routing decision, on the calling thread. The lookup inside it waits until the shards
   * applied every event sent before it with read-your-writes (the indexer is then idle after
   * it), and reads the latest applied state without. The lookup's own time is the latency
   * logged; the indexer time also holds the selection (a few microseconds per request, see
   * bench/route.bench.ts).
   */
  private route(routing: ReplayRouting, local: BigUint64Array, tokens: number): ReturnType<ReplayRouting['route']> {
    this.clock.begin();
    const r = routing.route(local, tokens);
    this.clock.idle();
    this.latency.push(r.decision.lookupUs);
    this.lastLookupUs = r.decision.lookupUs;
    let best = 0;
    for (const s of r.decision.overlaps) if (s > best) best = s;
    this.matched += best;
    return r;
  }

  private async lookup(seq: BigUint64Array): Promise<Map<bigint, number>> {
    this.clock.begin();
    const t = performance.now();
    const { scores } = await this.indexer.findMatches(seq);
    const dt = performance.now() - t;
    // With read-your-writes the reply comes after every shard applied the events queued before
    // the lookup (the busy span closes); without, it is the call's own time.
    this.clock.idle();
    this.latency.push(dt * 1000);
    this.lastLookupUs = dt * 1000;
    let best = 0;
    for (const s of scores.values()) if (s > best) best = s;
    this.matched += best;
    return scores;
  }

  private async apply(events: readonly RouterEvent[], timestamp: number): Promise<void> {
    const record = this.options.onEvent;
    if (record !== undefined) for (const e of events) record(timestamp, e);
    this.clock.begin();
    const stale = this.staleReads;
    for (const e of events) {
      this.indexer.applyEvent(e);
      stale?.sent(e.workerId);
      this.events++;
      const d = e.event.data;
      if (d.type === 'stored') this.stored += d.blocks.length;
      else if (d.type === 'removed') this.removed += d.blockHashes.length;
      else this.cleared++;
    }
    // The batch is posted in a microtask queued by the first `applyEvent`: waiting one turn here
    // lets it run first, so the posting counts as the call's (postMessage measured 0.3-0.9 ms
    // per request on the shipped slice, 2 shards, loaded 2-core VM). In a busy span it counts
    // anyway.
    if (this.postInCall) await undefined;
    if (this.indexer.needsDrain) await this.indexer.drained();
    this.clock.enqueued();
  }
}

/** The workers whose score in `got` differs from `want` (present in one only, or another score). */
function differingWorkers(got: ReadonlyMap<bigint, number>, want: ReadonlyMap<bigint, number>): bigint[] {
  const out: bigint[] = [];
  for (const [w, s] of want) if (got.get(w) !== s) out.push(w);
  for (const w of got.keys()) if (!want.has(w)) out.push(w);
  return out;
}
