/**
 * The timed replay: a fleet of engines that take time (engine-model.ts) serving a trace's
 * requests at their arrival times, routed by a policy (policies/) that sees what a router sees.
 *
 * One event loop in simulated ms over three kinds of events, ordered by time and then by
 * creation (so equal times run first come, first served):
 * - an arrival: the request's blocks are hashed as the instant replay hashes them
 *   (`ClusterSim.prepare`), the policy picks an engine, the engine queues it and starts a step
 *   if it was idle;
 * - a step's end: the engine applies it; requests whose prefill completed stored their blocks
 *   (a Stored event) and sent their first token, finished ones ended; the policy hears both at
 *   once (the router is on the response path); the engine starts its next step;
 * - a KV event delivery: the events an engine published (Stored after a prefill, Removed at an
 *   eviction) reach the router's index `eventDelayMs` later, in order.
 *
 * Arrival times: the trace's timestamps divided by `speed`, or, with `load`, rescaled so the
 * offered work is that fraction of the fleet's capacity (see `fleetCapacity`).
 * Deterministic: the same requests and options give the same numbers.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import type { RouterEvent, StoredBlock } from '../protocol/types.js';
import { RadixTree } from '../tree/radix-tree.js';
import { ClusterSim } from './cluster-sim.js';
import { EngineModel, type EngineRequest } from './engine-model.js';
import { engineProfile, prefillMs, resolveEngineParams, type EngineParams } from './engine-params.js';
import type { TraceRequest } from './mooncake.js';
import { createPolicy } from './policies/create-policy.js';
import type { KvPolicyConfig } from './policies/kv-router.js';
import type { PolicyName, ScrapedMetrics } from './policies/policy.js';
import { EventQueue } from './event-queue.js';
import { ttftLowerBounds } from './timed-bound.js';

/** Options of a timed run. */
export interface TimedSimOptions {
  policy: PolicyName;
  /** Engines (default 4). */
  workers?: number;
  /** KV pool per engine, blocks (default 16,384). */
  kvBlocks?: number;
  /** Tokens per block (default 64). */
  blockSize?: number;
  /** Blocks per 512-token trace block (default and maximum: 512 / blockSize). */
  subBlocks?: number;
  /** u64 seed of the tokens, worker ids and random draws (default 0). */
  seed?: bigint;
  /** Engine parameters (default: the `dynamo-mocker` set). */
  engine?: EngineParams;
  /** Offered work as a fraction of the fleet's capacity; null keeps the trace's times / speed. */
  load?: number | null;
  /** Timestamp compression when `load` is null (default 1). */
  speed?: number;
  /** Delay from an engine's KV event to the router's index, ms (default 20). */
  eventDelayMs?: number;
  /** Engine metrics scrape period, ms (default 50). */
  scrapeMs?: number;
  /** Merged over the `kv` / `dynamo` KvRouter configuration. */
  kvConfig?: KvPolicyConfig;
  /** Time buckets of the per-engine load series (default 24). */
  buckets?: number;
  /**
   * Order in which requests that arrive at the same instant reach the policy and the engines:
   * `arrival` (default: the trace's order) or `longest-first` (longest prompt first, then the
   * trace's order). Not a cost: a router that collects simultaneous requests before routing
   * them (the trace's bursts share one timestamp); an experiment of issue 39
   * (docs/replay-timed.md).
   */
  burstOrder?: 'arrival' | 'longest-first';
  /**
   * A router-side queue with late binding (default null: every request is routed on arrival).
   * The router holds arriving requests in one FIFO and dispatches its head only while some
   * engine's queued prefill, as the policy's router counts it (`RoutingPolicy.queuedPrefill`:
   * `kv`'s virtual queue), is under `thresholdTokens`; the engine is chosen at dispatch time,
   * among all engines (`restrict` false, Dynamo's `--router-queue-threshold`: hold while every
   * worker is over it) or among those under the threshold only (`restrict` true). Held
   * requests are retried when a first token reaches the router and every `tickMs` (default
   * 5). TTFT still counts from the arrival at the router. Only for policies with a
   * `queuedPrefill` view (`kv`, `dynamo`, `kv-time`); an experiment of issue 39
   * (docs/replay-timed.md).
   */
  routerQueue?: RouterQueueOptions | null;
}

/** `TimedSimOptions.routerQueue`. */
export interface RouterQueueOptions {
  /** Dispatch while some engine's queued prefill is under this many tokens. */
  thresholdTokens: number;
  /** Choose only among the engines under the threshold (default false: among all). */
  restrict?: boolean;
  /** Retry period while requests are held, ms of simulated time (default 5). */
  tickMs?: number;
}

/** Per-request results, indexed like the input (NaN where it never happened). */
export interface TimedRequests {
  arrivalMs: Float64Array;
  admittedMs: Float64Array;
  firstTokenMs: Float64Array;
  finishMs: Float64Array;
  cachedTokens: Float64Array;
  worker: Int32Array;
  /** A lower bound of the TTFT under any policy (timed-bound.ts), ms. */
  ttftBoundMs: Float64Array;
}

/** What a timed run measured. */
export interface TimedResult {
  policy: PolicyName;
  requests: TimedRequests;
  inputTokens: Float64Array;
  outputTokens: Float64Array;
  /** Requests no engine could hold (longer than a whole KV pool). */
  rejected: number;
  /** Arrival-time scale applied to the trace's timestamps. */
  timeScale: number;
  /** One engine's capacity on these requests, requests/s (only computed with `load`). */
  engineCapacityRps: number | null;
  /** Per engine, per time bucket: mean requests in the engine (waiting + running). */
  loadSeries: number[][];
  /** Width of a load bucket, ms. */
  bucketMs: number;
  /** Per engine: share of the run it spent in steps. */
  busyShare: number[];
  /** KV events applied to the router's index. */
  events: number;
  /** Simulated time of the last event, ms. */
  endMs: number;
}

const ARRIVAL = 0;
const STEP_END = 1;
const DELIVERY = 2;
const TICK = 3;

const invalid = (message: string): never => {
  throw new KvIndexError(ErrorCode.InvalidOption, message);
};

/** Requests expanded into the engines' blocks, once per run. */
interface Prepared {
  engine: EngineRequest[];
  local: BigUint64Array[];
  seq: BigUint64Array[];
}

function prepareAll(sim: ClusterSim, requests: readonly TraceRequest[]): Prepared {
  const out: Prepared = { engine: [], local: [], seq: [] };
  requests.forEach((r, i) => {
    const p = sim.prepare(r);
    out.local.push(p.local);
    out.seq.push(p.seq);
    out.engine.push({
      id: i,
      seq: new Uint32Array(p.seq.buffer, p.seq.byteOffset, p.seq.length * 2),
      blocks: p.seq.length,
      inputTokens: Math.max(1, r.inputLength),
      outputTokens: r.outputLength,
    });
  });
  return out;
}

/**
 * One engine's capacity on `requests`, requests per second: every request waiting at time 0 on
 * one engine with prefix caching off (the work costed as if nothing were cached, batching
 * included), divided by the time it takes to finish them all.
 */
export function engineCapacity(requests: readonly EngineRequest[], params: EngineParams, kvBlocks: number, blockSize: number): { rps: number; makespanMs: number } {
  const e = new EngineModel(params, { kvBlocks, blockSize, prefixCaching: false });
  for (const r of requests) e.enqueue(r);
  let t = 0;
  let done = 0;
  for (let end = e.begin(0); end >= 0; end = e.begin(t)) {
    t = end;
    done += e.end().finished.length;
  }
  return { rps: t > 0 ? (done / t) * 1000 : Infinity, makespanMs: t };
}

/** Runs the timed replay of `requests` (in arrival order). */
export function runTimedSim(requests: readonly TraceRequest[], options: TimedSimOptions): TimedResult {
  const workers = options.workers ?? 4;
  const kvBlocks = options.kvBlocks ?? 16_384;
  const blockSize = options.blockSize ?? 64;
  const seed = options.seed ?? 0n;
  const params = options.engine ?? resolveEngineParams();
  const eventDelay = options.eventDelayMs ?? 20;
  const scrapeMs = options.scrapeMs ?? 50;
  const load = options.load ?? null;
  const speed = options.speed ?? 1;
  if (load !== null && !(load > 0 && Number.isFinite(load))) invalid(`load: expected a positive number, got ${String(load)}`);
  if (!(speed > 0 && Number.isFinite(speed))) invalid(`speed: expected a positive number, got ${String(speed)}`);
  if (!(eventDelay >= 0 && Number.isFinite(eventDelay))) invalid(`eventDelayMs: expected a number >= 0, got ${String(eventDelay)}`);
  if (!(scrapeMs > 0 && Number.isFinite(scrapeMs))) invalid(`scrapeMs: expected a positive number, got ${String(scrapeMs)}`);
  const burstOrder = options.burstOrder ?? 'arrival';
  if (burstOrder !== 'arrival' && burstOrder !== 'longest-first') invalid(`burstOrder: expected 'arrival' or 'longest-first', got ${String(burstOrder)}`);
  const rq = options.routerQueue ?? null;
  const rqTick = rq?.tickMs ?? 5;
  if (rq !== null) {
    if (!(rq.thresholdTokens >= 0 && Number.isFinite(rq.thresholdTokens))) invalid(`routerQueue.thresholdTokens: expected a number >= 0, got ${String(rq.thresholdTokens)}`);
    if (!(rqTick > 0 && Number.isFinite(rqTick))) invalid(`routerQueue.tickMs: expected a positive number, got ${String(rqTick)}`);
  }

  const sim = new ClusterSim({ workers, cacheBlocks: kvBlocks, blockSize, seed, ...(options.subBlocks === undefined ? {} : { subBlocks: options.subBlocks }) });
  const workerIds = sim.config.workerIds;
  const prepared = prepareAll(sim, requests);
  const n = requests.length;

  // Arrival times.
  const t0 = n > 0 ? requests[0]!.timestamp : 0;
  const span = n > 0 ? requests[n - 1]!.timestamp - t0 : 0;
  let timeScale = 1 / speed;
  let engineCapacityRps: number | null = null;
  const arrival = new Float64Array(n);
  if (load !== null && n > 0) {
    engineCapacityRps = engineCapacity(prepared.engine, params, kvBlocks, blockSize).rps;
    const targetSpan = (n / (load * engineCapacityRps * workers)) * 1000;
    if (span > 0) timeScale = targetSpan / span;
    for (let i = 0; i < n; i++) arrival[i] = span > 0 ? (requests[i]!.timestamp - t0) * timeScale : (i * targetSpan) / n;
  } else {
    for (let i = 0; i < n; i++) arrival[i] = (requests[i]!.timestamp - t0) * timeScale;
  }

  const index = new RadixTree();
  const engines = Array.from({ length: workers }, () => new EngineModel(params, { kvBlocks, blockSize }));
  const queue = new EventQueue();
  let now = 0;
  const scraped: ScrapedMetrics[] = engines.map(() => ({ waiting: 0, running: 0, kvUsage: 0 }));
  let nextScrape = 0;
  const policy = createPolicy(options.policy, {
    index,
    workerIds,
    blockSize,
    seed: Number(seed & 0x7fff_ffffn),
    now: () => now,
    prefillTokensPerMs: params.tokenBudget / prefillMs(params, params.tokenBudget),
    profile: engineProfile(params, kvBlocks),
    metrics: (w) => scraped[w]!,
    oracle: {
      params,
      kvBlocks,
      backlog: (w) => engines[w]!.backlog(),
      cachedBlocks: (w, s, b) => engines[w]!.kv.match(s, b),
    },
  }, options.kvConfig ?? {});

  const queuedPrefill = policy.queuedPrefill;
  if (rq !== null && queuedPrefill === null) invalid(`routerQueue: policy '${options.policy}' has no queued-prefill view (use kv, dynamo or kv-time)`);

  const res: TimedRequests = {
    arrivalMs: arrival,
    admittedMs: new Float64Array(n).fill(NaN),
    firstTokenMs: new Float64Array(n).fill(NaN),
    finishMs: new Float64Array(n).fill(NaN),
    cachedTokens: new Float64Array(n).fill(NaN),
    worker: new Int32Array(n).fill(-1),
    ttftBoundMs: ttftLowerBounds(prepared.seq, prepared.engine.map((r) => r.inputTokens), arrival, params, blockSize),
  };
  const eventIds = workerIds.map(() => 0n);
  const deliveries: RouterEvent[][] = [];
  let freeDelivery: number[] = [];
  let applied = 0;
  let rejected = 0;
  // Load series: per engine, steps as (start, duration, requests in the engine).
  const steps: number[][] = engines.map(() => []);
  const busy = new Float64Array(workers);

  const publish = (events: RouterEvent[]): void => {
    if (events.length === 0) return;
    const slot = freeDelivery.length > 0 ? freeDelivery.pop()! : deliveries.length;
    deliveries[slot] = events;
    queue.push(now + eventDelay, DELIVERY, slot);
  };
  const nextEventId = (w: number): bigint => {
    const id = eventIds[w]!;
    eventIds[w] = id + 1n;
    return id;
  };
  const startStep = (w: number): void => {
    const e = engines[w]!;
    const inEngine = e.waiting + e.running;
    const end = e.begin(now);
    for (const id of e.rejected) {
      rejected++;
      policy.finished(`r${id}`);
    }
    const ev = e.evicted;
    if (ev.length > 0) {
      const blockHashes: bigint[] = [];
      for (let i = 0; i < ev.length; i += 2) blockHashes.push((BigInt(ev[i + 1]!) << 32n) | BigInt(ev[i]!));
      publish([{ workerId: workerIds[w]!, event: { eventId: nextEventId(w), data: { type: 'removed', blockHashes } } }]);
    }
    if (end < 0) return;
    steps[w]!.push(now, end - now, inEngine);
    busy[w]! += end - now;
    queue.push(end, STEP_END, w);
  };

  const route = (arg: number, allowed?: readonly number[]): void => {
    const r = prepared.engine[arg]!;
    const w = policy.choose({ id: `r${arg}`, local: prepared.local[arg]!, tokens: r.inputTokens, outputTokens: r.outputTokens }, allowed);
    if (!(Number.isInteger(w) && w >= 0 && w < workers)) throw new Error(`internal: policy ${options.policy} chose engine ${String(w)}`);
    if (allowed !== undefined && !allowed.includes(w)) throw new Error(`internal: policy ${options.policy} chose engine ${w} outside ${allowed.join(',')}`);
    res.worker[arg] = w;
    engines[w]!.enqueue(r);
    if (!engines[w]!.busy) startStep(w);
  };
  // The router-side queue (`routerQueue`): held request indexes, FIFO, and whether a retry tick is queued.
  const held: number[] = [];
  let heldHead = 0;
  let tickQueued = false;
  const under: number[] = [];
  const dispatchHeld = (): void => {
    while (heldHead < held.length) {
      under.length = 0;
      for (let w = 0; w < workers; w++) if (queuedPrefill!(w) < rq!.thresholdTokens) under.push(w);
      if (under.length === 0) {
        if (!tickQueued) {
          queue.push(now + rqTick, TICK, 0);
          tickQueued = true;
        }
        return;
      }
      route(held[heldHead++]!, rq!.restrict === true ? under : undefined);
    }
    held.length = 0;
    heldHead = 0;
  };

  // Equal times pop in push order (event-queue.ts), so the push order is the burst order.
  const order = Array.from({ length: n }, (_, i) => i);
  if (burstOrder === 'longest-first') {
    order.sort((a, b) => arrival[a]! - arrival[b]! || prepared.engine[b]!.inputTokens - prepared.engine[a]!.inputTokens || a - b);
  }
  for (const i of order) queue.push(arrival[i]!, ARRIVAL, i);
  while (queue.size > 0) {
    now = queue.topTime();
    const kind = queue.topKind();
    const arg = queue.topArg();
    queue.pop();
    if (kind === ARRIVAL) {
      if (now >= nextScrape) {
        engines.forEach((e, w) => {
          const m = scraped[w]!;
          m.waiting = e.waiting;
          m.running = e.running;
          m.kvUsage = e.kvUsage;
        });
        nextScrape = now - (now % scrapeMs) + scrapeMs;
      }
      if (rq === null) route(arg);
      else {
        held.push(arg);
        dispatchHeld();
      }
    } else if (kind === STEP_END) {
      const e = engines[arg]!;
      const out = e.end();
      const events: RouterEvent[] = [];
      for (const { request, from } of out.stored) {
        const seq = prepared.seq[request.id]!;
        const local = prepared.local[request.id]!;
        const blocks: StoredBlock[] = [];
        for (let i = from; i < request.blocks; i++) blocks.push({ blockHash: seq[i]!, tokensHash: local[i]! });
        events.push({ workerId: workerIds[arg]!, event: { eventId: nextEventId(arg), data: { type: 'stored', parentHash: from > 0 ? seq[from - 1]! : null, blocks } } });
      }
      publish(events);
      for (const id of out.firstTokens) {
        res.firstTokenMs[id] = now;
        const t = e.timing.get(id)!;
        res.admittedMs[id] = t.admittedMs;
        res.cachedTokens[id] = t.cachedTokens;
        e.timing.delete(id);
        policy.firstToken(`r${id}`);
      }
      for (const id of out.finished) {
        res.finishMs[id] = now;
        policy.finished(`r${id}`);
      }
      startStep(arg);
      if (rq !== null && out.firstTokens.length > 0) dispatchHeld();
    } else if (kind === TICK) {
      tickQueued = false;
      dispatchHeld();
    } else {
      for (const event of deliveries[arg]!) {
        index.applyEvent(event);
        applied++;
      }
      deliveries[arg] = [];
      freeDelivery.push(arg);
    }
  }
  freeDelivery = [];

  const endMs = now;
  const buckets = options.buckets ?? 24;
  const bucketMs = endMs > 0 ? endMs / buckets : 1;
  const loadSeries = steps.map((s) => {
    const sum = new Array<number>(buckets).fill(0);
    for (let i = 0; i < s.length; i += 3) {
      const b = Math.min(buckets - 1, Math.floor(s[i]! / bucketMs));
      sum[b]! += s[i + 1]! * s[i + 2]!;
    }
    return sum.map((v) => v / bucketMs);
  });
  const inputTokens = new Float64Array(n);
  const outputTokens = new Float64Array(n);
  prepared.engine.forEach((r, i) => {
    inputTokens[i] = r.inputTokens;
    outputTokens[i] = Math.max(1, r.outputTokens);
  });
  return {
    policy: options.policy,
    requests: res,
    inputTokens,
    outputTokens,
    rejected,
    timeScale,
    engineCapacityRps,
    loadSeries,
    bucketMs,
    busyShare: Array.from(busy, (b) => (endMs > 0 ? b / endMs : 0)),
    events: applied,
    endMs,
  };
}
