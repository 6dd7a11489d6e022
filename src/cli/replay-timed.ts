/**
 * `kvindex replay --policy P | --load X | --sweep X,Y`: the timed replay (src/trace/timed-sim.ts).
 * Reads a Mooncake trace slice, runs it through engines that take time once per policy and
 * load, and prints one row per run (or, with `--json`, one object: a run's fields at the top
 * level for a single run, `{ runs: [...] }` for several).
 */
import { readFileSync } from 'node:fs';
import { KvIndexError } from '../errors.js';
import { resolveEngineParams, type EngineParams } from '../trace/engine-params.js';
import { readTraceFile } from '../trace/mooncake.js';
import { runTimedSim } from '../trace/timed-sim.js';
import { summarizeTimed, type Percentiles, type TimedSummary } from '../trace/timed-stats.js';
import type { ReplayCliOptions, TimedCliOptions } from './replay-options.js';
import { formatInt, formatPercent } from './table.js';

function fail(message: string, code: number): number {
  process.stderr.write(`kvindex replay: ${message}\n`);
  return code;
}

/** The engine parameters: the named set, then the JSON file's fields, then `--engine-param`s. */
function engineParams(t: TimedCliOptions): EngineParams {
  let fromFile: Record<string, unknown> = {};
  if (t.engineFile !== null) {
    let text: string;
    try {
      text = readFileSync(t.engineFile, 'utf8');
    } catch (err) {
      throw new Error(`cannot read '${t.engineFile}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text); // plain numbers (ms, token counts): no u64 here
    } catch (err) {
      throw new Error(`--engine-file '${t.engineFile}': not valid JSON (${(err as Error).message})`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`--engine-file '${t.engineFile}': expected a JSON object of engine parameters`);
    fromFile = parsed as Record<string, unknown>;
  }
  return resolveEngineParams(t.engine, { ...fromFile, ...t.engineParams });
}

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

/** Runs the timed replay for parsed options whose `timed` is set; resolves to the exit code. */
export async function runTimedCli(options: ReplayCliOptions): Promise<number> {
  const t = options.timed!;
  let params: EngineParams;
  try {
    params = engineParams(t);
  } catch (err) {
    return fail((err as Error).message, 2);
  }
  const lines = options.limit === Infinity ? Infinity : t.skip + options.limit;
  const trace = await readTraceFile(options.file, lines);
  const requests = trace.requests.filter((r) => r.line > t.skip);
  if (trace.bad.length > 0) process.stderr.write(`kvindex replay: ${trace.bad.length} bad lines skipped (first: line ${trace.bad[0]!.line}: ${trace.bad[0]!.reason})\n`);
  if (requests.length === 0) return fail(`${options.file} holds no trace request${t.skip > 0 ? ` after line ${t.skip}` : ''} (the timed replay needs a Mooncake trace)`, 1);
  const sim = options.sim;
  const runs: TimedSummary[] = [];
  try {
    for (const load of t.loads) {
      for (const policy of t.policies) {
        const r = runTimedSim(requests, {
          policy,
          engine: params,
          load,
          speed: options.speed === Infinity ? 1 : options.speed,
          eventDelayMs: t.eventDelayMs,
          kvConfig: {
            ...(options.routing.temperature === undefined ? {} : { temperature: options.routing.temperature }),
            ...(options.routing.credit === undefined ? {} : { overlapScoreCredit: options.routing.credit }),
          },
          ...(sim.workers === undefined ? {} : { workers: sim.workers }),
          ...(sim.cacheBlocks === undefined ? {} : { kvBlocks: sim.cacheBlocks }),
          ...(sim.blockSize === undefined ? {} : { blockSize: sim.blockSize }),
          ...(sim.seed === undefined ? {} : { seed: sim.seed }),
          ...(sim.subBlocks === undefined ? {} : { subBlocks: sim.subBlocks }),
        });
        runs.push(summarizeTimed(r, load));
      }
    }
  } catch (err) {
    const code = err instanceof KvIndexError ? `[${err.code}] ` : '';
    return fail(`${code}${(err as Error).message}`, 1);
  }
  if (options.json) {
    const body = runs.length === 1 ? timedJson(runs[0]!) : { runs: runs.map(timedJson) };
    process.stdout.write(JSON.stringify({ file: options.file, engine: t.engine, engineParams: params, skip: t.skip, ...body }) + '\n');
  } else {
    const first = requests[0]!.line;
    const header = `timed replay of ${options.file} lines ${first}-${requests[requests.length - 1]!.line} (${formatInt(requests.length)} requests), `
      + `${sim.workers ?? 4} engines '${t.engine}' of ${formatInt(sim.cacheBlocks ?? 16_384)} blocks, KV events after ${t.eventDelayMs} ms`;
    process.stdout.write(timedTable(runs, header));
  }
  return 0;
}
