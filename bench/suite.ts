import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The shape every benchmark suite returns to `bench/run.ts`. */
export interface SuiteResult {
  /** Section title in BENCHMARKS.md. */
  title: string;
  /** Markdown body of the section (tables, targets and their verdicts). */
  markdown: string;
  /** Machine-readable figures for bench/results.json. */
  rows: Array<Record<string, string | number | boolean>>;
}

export interface SuiteOptions {
  quick: boolean;
  /** Folder of the shared workloads and traces (`../shared` by default). */
  shared: string;
}

/** A percentile of sorted numbers (nearest rank). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/** Several runs' latencies in one array, in run order. */
/** A latency row: count, p50 / p99 / p99.9 / max of `lat` in microseconds (sorted in place). */
export function latencyStats(lat: Float64Array): Record<string, number> {
  lat.sort();
  const r2 = (x: number): number => Math.round(x * 100) / 100;
  return {
    lookups: lat.length,
    'p50 us': r2(percentile(lat, 50)), 'p99 us': r2(percentile(lat, 99)),
    'p99.9 us': r2(percentile(lat, 99.9)), 'max us': r2(lat[lat.length - 1]!),
  };
}

export function concatLatencies(parts: readonly Float64Array[]): Float64Array {
  const all = new Float64Array(parts.reduce((k, p) => k + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
}

/** Markdown table from rows (column order of the first row). */
export function table(rows: Array<Record<string, string | number | boolean>>): string {
  if (rows.length === 0) return '';
  const cols = Object.keys(rows[0]!);
  const fmt = (v: unknown): string =>
    typeof v === 'number' ? (Number.isInteger(v) ? v.toLocaleString('en-US') : v.toPrecision(4)) : String(v);
  return [
    `| ${cols.join(' | ')} |`,
    `| ${cols.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${cols.map((c) => fmt(r[c])).join(' | ')} |`),
  ].join('\n');
}

/** A full GC when node runs with --expose-gc (the bench script does); a no-op otherwise. */
export const gc = (): void => (globalThis as { gc?: () => void }).gc?.();

/**
 * Bytes of JS heap and ArrayBuffer memory a call leaves for the collector: the median of 30
 * runs of 20 calls (`call(i)`, i counting on), each run after a GC. 20 calls of the benchmarks'
 * inputs stay far below the young generation's first size, so no collection runs inside a run
 * and hides what was left.
 */
export function bytesLeftPerCall(call: (i: number) => void): number {
  const runs: number[] = [];
  for (let r = 0; r < 30; r++) {
    gc();
    const m0 = process.memoryUsage();
    for (let i = 0; i < 20; i++) call(r * 20 + i);
    const m1 = process.memoryUsage();
    runs.push((m1.heapUsed - m0.heapUsed + m1.arrayBuffers - m0.arrayBuffers) / 20);
  }
  runs.sort((a, b) => a - b);
  return Math.round(runs[15]!);
}

/**
 * A full GC, then a pause of `pauseMs`: a timed run starts from the same heap state, and the
 * collector's background work ends before the clock starts instead of taking CPU from the
 * code measured (2-shard ingest of synthetic measured 178-241 ms right after `gc()` against
 * 119-198 ms after a 300 ms pause, with ~270 MB of loaded events in the heap).
 */
export async function quiesce(pauseMs: number): Promise<void> {
  gc();
  await new Promise((r) => setTimeout(r, pauseMs));
}

/**
 * Runs `run` and prints its markdown when the module at `moduleUrl` is the script node was
 * started with (`node dist/bench/<suite>.bench.js [--quick]`).
 */
export function runIfMain(moduleUrl: string, run: (opts: SuiteOptions) => Promise<SuiteResult>): void {
  if (process.argv[1] === undefined || fileURLToPath(moduleUrl) !== resolve(process.argv[1])) return;
  const root = resolve(fileURLToPath(moduleUrl), '../../..');
  run({ quick: process.argv.includes('--quick'), shared: resolve(root, '../shared') }).then(
    (r) => process.stdout.write(`## ${r.title}\n\n${r.markdown}\n`),
    (err: unknown) => {
      process.stderr.write(`${String((err as Error).stack ?? err)}\n`);
      process.exitCode = 1;
    },
  );
}
