/**
 * What a replay did over its input's time, for the HTML report (`kvindex replay --report`):
 * every request (its blocks, the blocks the chosen worker held, the best any worker held, the
 * lookup latency) and every applied event (its block operations, its worker's block count
 * after it). Raw samples go into growable typed arrays (about 20 bytes per event and 24 per
 * request) and are bucketed once at the end, when the span of the input is known.
 *
 * Occupancy is counted from the events themselves (stored adds, removed subtracts, cleared
 * resets, never below 0): exact for a simulated trace, whose engines only remove blocks they
 * hold; for a recorded stream it is what the stream claims.
 */
import type { RouterEvent } from '../protocol/types.js';

/** One request as the replay saw it. */
export interface RequestSample {
  /** Input time, ms (0 when the input has no timestamps). */
  timestamp: number;
  blocks: number;
  /** Blocks the chosen worker already held. */
  hit: number;
  /** Blocks the best worker held (the oracle's hit). */
  oracle: number;
  /** Lookup latency, us. */
  lookupUs: number;
}

class Column<T extends Float64Array | Int32Array> {
  n = 0;
  constructor(public data: T, private readonly make: (n: number) => T) {}
  push(v: number): void {
    if (this.n === this.data.length) {
      const next = this.make(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.n++] = v;
  }
  view(): T {
    return this.data.subarray(0, this.n) as T;
  }
}

const f64 = (): Column<Float64Array> => new Column(new Float64Array(1024), (n) => new Float64Array(n));
const i32 = (): Column<Int32Array> => new Column(new Int32Array(1024), (n) => new Int32Array(n));

export interface TimelineBuckets {
  /** True when the input carried timestamps; otherwise x is the request or event ordinal. */
  timed: boolean;
  /** Width of a hit-rate bucket (ms when timed, requests otherwise). */
  hitBucket: number;
  /** Per bucket: start (minutes of input time, or ordinal), chosen and oracle hit rates. */
  hits: Array<{ x: number; chosen: number; oracle: number; requests: number }>;
  /** Width of an event bucket (ms when timed, events otherwise). */
  eventBucket: number;
  /** Per bucket: start (s of input time, or ordinal), events/s and block-ops/s (per bucket when untimed). */
  events: Array<{ x: number; events: number; blockOps: number }>;
  /** Per worker (up to `maxWorkers`, the largest at the end): blocks held at each bucket end. */
  occupancy: Array<{ worker: string; points: Array<[number, number]> }>;
  /** Workers not drawn (beyond `maxWorkers`). */
  hiddenWorkers: number;
  /** Every lookup latency, us, sorted. */
  latencies: Float64Array;
}

export class ReplayTimeline {
  private readonly reqTs = f64();
  private readonly reqBlocks = i32();
  private readonly reqHit = i32();
  private readonly reqOracle = i32();
  private readonly reqUs = f64();
  private readonly evTs = f64();
  private readonly evOps = i32();
  private readonly evWorker = i32();
  private readonly evAfter = i32();
  private readonly workers = new Map<bigint, number>();
  private readonly workerIds: bigint[] = [];
  private readonly held: number[] = [];

  request(s: RequestSample): void {
    this.reqTs.push(s.timestamp);
    this.reqBlocks.push(s.blocks);
    this.reqHit.push(s.hit);
    this.reqOracle.push(s.oracle);
    this.reqUs.push(s.lookupUs);
  }

  event(timestamp: number, e: RouterEvent): void {
    let w = this.workers.get(e.workerId);
    if (w === undefined) {
      w = this.workerIds.length;
      this.workers.set(e.workerId, w);
      this.workerIds.push(e.workerId);
      this.held.push(0);
    }
    const d = e.event.data;
    let ops = 0;
    let after = this.held[w]!;
    if (d.type === 'stored') {
      ops = d.blocks.length;
      after += ops;
    } else if (d.type === 'removed') {
      ops = d.blockHashes.length;
      after = Math.max(0, after - ops);
    } else {
      after = 0;
    }
    this.held[w] = after;
    this.evTs.push(timestamp);
    this.evOps.push(ops);
    this.evWorker.push(w);
    this.evAfter.push(after);
  }

  get requests(): number {
    return this.reqTs.n;
  }

  /** Buckets the samples: ~`targetBuckets` hit-rate buckets (1 minute when the input spans 10 or more). */
  buckets(maxWorkers = 12, targetBuckets = 60): TimelineBuckets {
    const reqTs = this.reqTs.view();
    const evTs = this.evTs.view();
    const timed = reqTs.some((t) => t > 0) || evTs.some((t) => t > 0);
    const t0 = timed ? Math.min(first(reqTs), first(evTs)) : 0;
    const span = timed ? Math.max(last(reqTs), last(evTs)) - t0 : 0;

    // Hit rate: per minute when the input spans at least 10 minutes, else finer.
    const nReq = reqTs.length;
    const hitBucket = timed ? (span >= 600_000 ? 60_000 : Math.max(1000, Math.ceil(span / 10 / 1000) * 1000)) : Math.max(1, Math.ceil(nReq / targetBuckets));
    const hits: TimelineBuckets['hits'] = [];
    const blocks = this.reqBlocks.view();
    const hit = this.reqHit.view();
    const oracle = this.reqOracle.view();
    for (let i = 0; i < nReq; ) {
      const b = Math.floor((timed ? reqTs[i]! - t0 : i) / hitBucket);
      let n = 0;
      let hb = 0;
      let ob = 0;
      let req = 0;
      while (i < nReq && Math.floor((timed ? reqTs[i]! - t0 : i) / hitBucket) === b) {
        n += blocks[i]!;
        hb += hit[i]!;
        ob += oracle[i]!;
        req++;
        i++;
      }
      hits.push({ x: timed ? (b * hitBucket) / 60_000 : b * hitBucket, chosen: n > 0 ? hb / n : 0, oracle: n > 0 ? ob / n : 0, requests: req });
    }

    // Events and block operations: per second (coarser beyond 600 buckets).
    const nEv = evTs.length;
    const eventBucket = timed ? Math.max(1000, Math.ceil(span / 600 / 1000) * 1000) : Math.max(1, Math.ceil(nEv / 600));
    const events: TimelineBuckets['events'] = [];
    const ops = this.evOps.view();
    const worker = this.evWorker.view();
    const after = this.evAfter.view();
    const latest = new Int32Array(this.workerIds.length);
    const occ = this.workerIds.map(() => [] as Array<[number, number]>);
    const scale = timed ? 1000 / eventBucket : 1;
    for (let i = 0; i < nEv; ) {
      const b = Math.floor((timed ? evTs[i]! - t0 : i) / eventBucket);
      let n = 0;
      let o = 0;
      while (i < nEv && Math.floor((timed ? evTs[i]! - t0 : i) / eventBucket) === b) {
        n++;
        o += ops[i]!;
        latest[worker[i]!] = after[i]!;
        i++;
      }
      const x = timed ? (b * eventBucket) / 1000 : b * eventBucket;
      events.push({ x, events: n * scale, blockOps: o * scale });
      for (let w = 0; w < occ.length; w++) occ[w]!.push([x, latest[w]!]);
    }
    const order = this.workerIds.map((_, w) => w).sort((a, b) => this.held[b]! - this.held[a]! || a - b);
    const shown = order.slice(0, maxWorkers);
    const latencies = Float64Array.from(this.reqUs.view()).sort();
    return {
      timed,
      hitBucket,
      hits,
      eventBucket,
      events,
      occupancy: shown.map((w) => ({ worker: this.workerIds[w]!.toString(), points: occ[w]! })),
      hiddenWorkers: order.length - shown.length,
      latencies,
    };
  }
}

const first = (a: Float64Array): number => (a.length > 0 ? a[0]! : Infinity);
const last = (a: Float64Array): number => (a.length > 0 ? a[a.length - 1]! : -Infinity);
