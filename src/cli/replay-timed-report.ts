/** The timed replay's two outputs: the summary table and the `--json` fields of a run. */
import type { Percentiles, TimedSummary } from '../trace/timed-stats.js';
import { formatInt, formatPercent } from './table.js';

const ms = (x: number): string => (x >= 10_000 ? `${(x / 1000).toFixed(1)} s` : `${Math.round(x)} ms`);
const trio = (p: Percentiles): string => `${ms(p.p50)} / ${ms(p.p90)} / ${ms(p.p99)}`;
const round = (x: number, digits: number): number => Number(x.toFixed(digits));
const roundP = (p: Percentiles): Percentiles => ({ p50: round(p.p50, 1), p90: round(p.p90, 1), p99: round(p.p99, 1) });

/** A run's `--json` fields (stable names; times in ms of simulated time). */
export function timedJson(s: TimedSummary): Record<string, unknown> {
  return {
    policy: s.policy,
    load: s.load,
    requests: s.requests,
    completed: s.completed,
    rejected: s.rejected,
    ttftMs: roundP(s.ttftMs),
    ttftBoundMs: roundP(s.ttftBoundMs),
    tpotMs: roundP(s.tpotMs),
    e2eMs: roundP(s.e2eMs),
    queueMs: roundP(s.queueMs),
    throughputRps: round(s.throughputRps, 4),
    throughputTokS: Math.round(s.throughputTokS),
    outputTokS: Math.round(s.outputTokS),
    cachedTokenFraction: round(s.cachedTokenFraction, 5),
    engineCapacityRps: s.engineCapacityRps === null ? null : round(s.engineCapacityRps, 4),
    timeScale: round(s.timeScale, 6),
    simulatedMs: Math.round(s.simulatedMs),
    bucketMs: round(s.bucketMs, 1),
    engines: s.engines.map((e) => ({ requests: e.requests, busyShare: round(e.busyShare, 4), loadSeries: e.loadSeries.map((x) => round(x, 2)) })),
  };
}

/** The summary table: one row per run, then each engine's share for a single run. */
export function timedTable(runs: readonly TimedSummary[], header: string): string {
  const rows = [['policy', 'load', 'TTFT p50 / p90 / p99', 'TPOT p50', 'e2e p50 / p99', 'queue p99', 'req/s', 'tok/s', 'cached']];
  for (const s of runs) {
    rows.push([
      s.policy,
      s.load === null ? 'trace' : String(s.load),
      trio(s.ttftMs),
      `${s.tpotMs.p50.toFixed(1)} ms`,
      `${ms(s.e2eMs.p50)} / ${ms(s.e2eMs.p99)}`,
      ms(s.queueMs.p99),
      s.throughputRps.toFixed(3),
      formatInt(Math.round(s.throughputTokS)),
      formatPercent(s.cachedTokenFraction),
    ]);
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  let out = `${header}\n`;
  for (const r of rows) out += r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ') + '\n';
  // The bound depends on the requests and their arrival times only: one line per load.
  const seen = new Set<number | null>();
  for (const s of runs) {
    if (seen.has(s.load)) continue;
    seen.add(s.load);
    out += `TTFT lower bound, any policy (best cache, idle engine)${s.load === null ? '' : ` at load ${s.load}`}: ${trio(s.ttftBoundMs)}\n`;
  }
  if (runs.length === 1) {
    const s = runs[0]!;
    out += `engines (requests, busy, mean requests in the engine per ${ms(s.bucketMs)} of simulated time):\n`;
    s.engines.forEach((e, w) => {
      out += `  ${w}: ${formatInt(e.requests).padStart(6)} req  ${formatPercent(e.busyShare).padStart(6)} busy  ${e.loadSeries.map((x) => x.toFixed(0)).join(' ')}\n`;
    });
    if (s.rejected > 0) out += `${s.rejected} requests rejected (larger than an engine's KV pool)\n`;
  }
  return out;
}

