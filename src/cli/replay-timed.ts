/**
 * `kvindex replay --policy P | --load X | --sweep X,Y`: the timed replay (src/trace/timed-sim.ts).
 * Reads a Mooncake trace slice, runs it through engines that take time once per policy and
 * load, and prints one row per run (or, with `--json`, one object: a run's fields at the top
 * level for a single run, `{ runs: [...] }` for several).
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { KvIndexError } from '../errors.js';
import { resolveEngineParams, type EngineParams } from '../trace/engine-params.js';
import { readTraceFile } from '../trace/mooncake.js';
import { runTimedSim } from '../trace/timed-sim.js';
import { summarizeTimed, type TimedSummary } from '../trace/timed-stats.js';
import type { ReplayCliOptions, TimedCliOptions } from './replay-options.js';
import { renderTimedHtml } from './replay-timed-html.js';
import { timedJson, timedTable } from './replay-timed-report.js';
import { formatInt } from './table.js';

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

/** Runs the timed replay for parsed options whose `timed` is set; resolves to the exit code. */
export async function runTimedCli(options: ReplayCliOptions): Promise<number> {
  const t = options.timed!;
  let params: EngineParams;
  try {
    params = engineParams(t);
  } catch (err) {
    return fail((err as Error).message, 2);
  }
  // Opened (created) before the run, so a bad path fails fast, as in the plain replay.
  let reportFd: number | null = null;
  if (options.report !== null) {
    try {
      reportFd = openSync(options.report, 'w');
    } catch (err) {
      return fail(`cannot write '${options.report}': ${(err as Error).message}`, 2);
    }
  }
  try {
    return await timedRuns(options, t, params, reportFd);
  } finally {
    if (reportFd !== null) closeSync(reportFd);
  }
}

async function timedRuns(options: ReplayCliOptions, t: TimedCliOptions, params: EngineParams, reportFd: number | null): Promise<number> {
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
  const header = `timed replay of ${options.file} lines ${requests[0]!.line}-${requests[requests.length - 1]!.line} (${formatInt(requests.length)} requests), `
    + `${sim.workers ?? 4} engines '${t.engine}' of ${formatInt(sim.cacheBlocks ?? 16_384)} blocks, KV events after ${t.eventDelayMs} ms`;
  if (reportFd !== null) {
    try {
      writeSync(reportFd, renderTimedHtml(runs, header, new Date()));
    } catch (err) {
      return fail(`cannot write '${options.report ?? ''}': ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, 1);
    }
  }
  if (options.json) {
    const body = runs.length === 1 ? timedJson(runs[0]!) : { runs: runs.map(timedJson) };
    process.stdout.write(JSON.stringify({ file: options.file, engine: t.engine, engineParams: params, skip: t.skip, ...body }) + '\n');
  } else {
    process.stdout.write(timedTable(runs, header));
  }
  return 0;
}
