/**
 * The numbers of a timed replay run (timed-sim.ts): latency percentiles, throughput, cache use
 * and each engine's load over time. Times are ms of simulated time; percentiles are nearest-rank
 * (the smallest value with at least q of the samples at or below it).
 */
import type { TimedResult } from './timed-sim.js';
import type { PolicyName } from './policies/policy.js';

/** p50 / p90 / p99 of a latency, ms. */
export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
}

/** One engine's share of a run. */
export interface EngineLoad {
  /** Requests routed to it. */
  requests: number;
  /** Share of the run it spent in steps, 0..1. */
  busyShare: number;
  /** Mean requests in it (waiting + running) per time bucket of `bucketMs`. */
  loadSeries: number[];
}

/** Summary of a timed run. */
export interface TimedSummary {
  policy: PolicyName;
  /** Offered load (fraction of capacity), or null when the trace's times were kept. */
  load: number | null;
  requests: number;
  completed: number;
  rejected: number;
  /** Time to first token. */
  ttftMs: Percentiles;
  /**
   * Percentiles of the per-request TTFT lower bounds (timed-bound.ts: best possible cache, idle
   * engine), over the same requests as `ttftMs`: no policy's percentile can be below them.
   */
  ttftBoundMs: Percentiles;
  /** Time per output token after the first, over requests with at least 2. */
  tpotMs: Percentiles;
  /** Arrival to last token. */
  e2eMs: Percentiles;
  /** Arrival to admission by the engine. */
  queueMs: Percentiles;
  /** Completed requests per second of the run (first arrival to last token). */
  throughputRps: number;
  /** Prompt plus output tokens of completed requests per second. */
  throughputTokS: number;
  /** Output tokens per second. */
  outputTokS: number;
  /** Prompt tokens served from engine caches over all prompt tokens of admitted requests. */
  cachedTokenFraction: number;
  /** One engine's capacity on the slice with caching off, requests/s (with `load`). */
  engineCapacityRps: number | null;
  /** Arrival-time scale applied to the trace. */
  timeScale: number;
  /** Simulated length of the run, ms. */
  simulatedMs: number;
  bucketMs: number;
  engines: EngineLoad[];
}

/** Nearest-rank percentiles of `values` (NaNs skipped); zeros when there are none. */
export function percentiles(values: ArrayLike<number>): Percentiles {
  const v: number[] = [];
  for (let i = 0; i < values.length; i++) if (!Number.isNaN(values[i]!)) v.push(values[i]!);
  if (v.length === 0) return { p50: 0, p90: 0, p99: 0 };
  v.sort((a, b) => a - b);
  const at = (q: number): number => v[Math.max(0, Math.ceil(q * v.length) - 1)]!;
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99) };
}

/** Summarises a run; `load` is the load it was offered (null: trace times). */
export function summarizeTimed(r: TimedResult, load: number | null): TimedSummary {
  const q = r.requests;
  const n = q.arrivalMs.length;
  const ttft = new Float64Array(n).fill(NaN);
  const tpot = new Float64Array(n).fill(NaN);
  const e2e = new Float64Array(n).fill(NaN);
  const queue = new Float64Array(n).fill(NaN);
  const bound = new Float64Array(n).fill(NaN);
  let completed = 0;
  let tokens = 0;
  let output = 0;
  let cached = 0;
  let prompt = 0;
  let first = Infinity;
  let last = 0;
  const routed = new Array<number>(r.loadSeries.length).fill(0);
  for (let i = 0; i < n; i++) {
    const a = q.arrivalMs[i]!;
    if (a < first) first = a;
    if (q.worker[i]! >= 0) routed[q.worker[i]!]!++;
    if (!Number.isNaN(q.admittedMs[i]!)) {
      queue[i] = q.admittedMs[i]! - a;
      cached += q.cachedTokens[i]!;
      prompt += r.inputTokens[i]!;
    }
    if (!Number.isNaN(q.firstTokenMs[i]!)) {
      ttft[i] = q.firstTokenMs[i]! - a;
      bound[i] = q.ttftBoundMs[i]!;
    }
    const f = q.finishMs[i]!;
    if (Number.isNaN(f)) continue;
    completed++;
    e2e[i] = f - a;
    const out = r.outputTokens[i]!;
    if (out >= 2) tpot[i] = (f - q.firstTokenMs[i]!) / (out - 1);
    tokens += r.inputTokens[i]! + out;
    output += out;
    if (f > last) last = f;
  }
  const span = completed > 0 ? last - first : 0;
  const perSec = (x: number): number => (span > 0 ? (x / span) * 1000 : 0);
  return {
    policy: r.policy,
    load,
    requests: n,
    completed,
    rejected: r.rejected,
    ttftMs: percentiles(ttft),
    ttftBoundMs: percentiles(bound),
    tpotMs: percentiles(tpot),
    e2eMs: percentiles(e2e),
    queueMs: percentiles(queue),
    throughputRps: perSec(completed),
    throughputTokS: perSec(tokens),
    outputTokS: perSec(output),
    cachedTokenFraction: prompt > 0 ? cached / prompt : 0,
    engineCapacityRps: r.engineCapacityRps,
    timeScale: r.timeScale,
    simulatedMs: r.endMs,
    bucketMs: r.bucketMs,
    engines: r.loadSeries.map((series, w) => ({ requests: routed[w]!, busyShare: r.busyShare[w]!, loadSeries: series })),
  };
}
