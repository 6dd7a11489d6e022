/**
 * The SVG plots beside BENCHMARKS.md (bench/plots/*.svg), drawn from a run's rows with the
 * product's own chart renderer (src/report/svg-chart.ts): snapshot time against pairs with a
 * constant-per-pair line, the offered-load sweep (achieved and lookup p99 against offered, per
 * shard count), lookup latency percentiles per channel, and the timed replay's TTFT p99 against
 * throughput per routing policy. `bench/run.ts` writes them on a full
 * run and puts each image at the top of its section; `node dist/bench/plots.js` redraws them from
 * bench/results.json.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderChart, type Point } from '../src/report/svg-chart.js';

type Row = Record<string, string | number | boolean>;

export interface Plot {
  /** Suite whose section embeds it. */
  suite: string;
  file: string;
  alt: string;
  svg: string;
}

const num = (r: Row, k: string): number => (typeof r[k] === 'number' ? (r[k] as number) : NaN);

/** Percentile levels placed at -log10(1 - q): p50, p99, p99.9 evenly apart, max after them. */
const LEVELS: Array<[string, number, string]> = [['p50 us', 0.3, 'p50'], ['p99 us', 2, 'p99'], ['p99.9 us', 3, 'p99.9'], ['max us', 4, 'max']];

/** The plots a run's suites allow (a suite that did not run, or skipped, gives none). */
export function plotsOf(suites: ReadonlyArray<{ name: string; rows: Row[] }>): Plot[] {
  const plots: Plot[] = [];
  const rows = (name: string): Row[] => suites.find((s) => s.name === name)?.rows ?? [];

  const snap = rows('snapshot-scaling').filter((r) => Number.isFinite(num(r, 'pairs')) && Number.isFinite(num(r, 'dump ms (median)')));
  if (snap.length > 0) {
    const first = snap[0]!;
    const perPair = num(first, 'dump ms (median)') / num(first, 'pairs');
    plots.push({
      suite: 'snapshot-scaling',
      file: 'snapshot-scaling.svg',
      alt: 'Snapshot dump time against pairs, log-log, with a constant-per-pair line',
      svg: renderChart({
        title: 'Snapshot dump time vs pairs',
        xLabel: 'pairs (log scale)',
        yLabel: 'ms (log scale)',
        xLog: true,
        yLog: true,
        series: [
          { name: 'dump into a kept writer', points: snap.map((r): Point => [num(r, 'pairs'), num(r, 'dump ms (median)')]) },
          { name: 'dump into fresh memory', points: snap.map((r): Point => [num(r, 'pairs'), num(r, 'fresh buffer: ms (median)')]) },
          { name: `linear: ${(perPair * 1e6).toFixed(1)} ns per pair`, points: snap.map((r): Point => [num(r, 'pairs'), perPair * num(r, 'pairs')]), dashed: true, dots: false },
        ],
      }),
    });
  }

  const sweep = rows('replay').filter((r) => r['factor'] !== 'unpaced' && Number.isFinite(num(r, 'offered req/s')));
  const channels = [...new Set(sweep.map((r) => String(r['shards'])))];
  if (sweep.length > 0) {
    const name = (c: string): string => (c === '0' ? 'shards 0' : `shards ${c}`);
    const offered = sweep.map((r) => num(r, 'offered req/s'));
    plots.push({
      suite: 'replay',
      file: 'sweep-throughput.svg',
      alt: 'Offered against achieved requests per second, per shard count',
      svg: renderChart({
        title: 'Offered load vs achieved (conversation trace)',
        xLabel: 'offered requests/s (log scale)',
        yLabel: 'achieved requests/s (log scale)',
        xLog: true,
        yLog: true,
        series: [
          ...channels.map((c) => ({ name: name(c), points: sweep.filter((r) => String(r['shards']) === c).map((r): Point => [num(r, 'offered req/s'), num(r, 'achieved req/s')]) })),
          { name: 'achieved = offered', points: [[Math.min(...offered), Math.min(...offered)], [Math.max(...offered), Math.max(...offered)]] as Point[], dashed: true, dots: false },
        ],
      }),
    });
    plots.push({
      suite: 'replay',
      file: 'sweep-lookup-p99.svg',
      alt: 'Lookup p99 against offered requests per second, per shard count',
      svg: renderChart({
        title: 'Lookup p99 vs offered load',
        xLabel: 'offered requests/s (log scale)',
        yLabel: 'lookup p99, us (log scale)',
        xLog: true,
        yLog: true,
        series: channels.map((c) => ({ name: name(c), points: sweep.filter((r) => String(r['shards']) === c).map((r): Point => [num(r, 'offered req/s'), num(r, 'lookup p99 us')]) })),
      }),
    });
  }

  const quiet = rows('lookup').filter((r) => r['suite'] === 'lookup-quiescent');
  if (quiet.length > 0) {
    plots.push({
      suite: 'lookup',
      file: 'lookup-channels.svg',
      alt: 'Quiescent lookup latency percentiles per channel',
      svg: renderChart({
        title: 'Quiescent lookup latency per channel (conversation tree)',
        xLabel: 'percentile',
        yLabel: 'us (log scale)',
        yLog: true,
        height: 380,
        xTicks: LEVELS.map(([, x, label]) => ({ x, label })),
        series: quiet.map((r) => ({
          name: `shards ${String(r['shards'])}: ${String(r['lookup']).replace(/ \(.*\)$/, '')}`,
          points: LEVELS.map(([k, x]): Point => [x, num(r, k)]),
        })),
      }),
    });
  }
  // The timed replay's load sweep (bench/ttft.bench.ts): TTFT p99 against achieved throughput.
  const ttft = rows('ttft').filter((r) => r['sweep'] === true && Number.isFinite(num(r, 'ttftP99')));
  if (ttft.length > 0) {
    const policies = [...new Set(ttft.map((r) => String(r['policy'])))];
    plots.push({
      suite: 'ttft',
      file: 'ttft-sweep.svg',
      alt: 'TTFT p99 against achieved requests per second over the load sweep, per routing policy',
      svg: renderChart({
        title: 'TTFT p99 vs throughput, load 0.3-1.0 (synthetic 1-2000, dynamo-mocker engines)',
        xLabel: 'completed requests/s',
        yLabel: 'TTFT p99 (ms of simulated time, log scale)',
        yLog: true,
        series: policies.map((p) => ({
          name: p,
          points: ttft.filter((r) => r['policy'] === p).map((r): Point => [num(r, 'throughputRps'), num(r, 'ttftP99')]),
        })),
      }),
    });
  }
  return plots;
}

/** Writes the plots into `dir`; returns, per suite, the Markdown lines that embed them. */
export function writePlots(plots: readonly Plot[], dir: string, relative: string): Map<string, string[]> {
  mkdirSync(dir, { recursive: true });
  const embeds = new Map<string, string[]>();
  for (const p of plots) {
    writeFileSync(resolve(dir, p.file), p.svg + '\n');
    const lines = embeds.get(p.suite) ?? [];
    lines.push(`![${p.alt}](${relative}/${p.file})`);
    embeds.set(p.suite, lines);
  }
  return embeds;
}

// Standalone: redraw from bench/results.json.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(fileURLToPath(import.meta.url), '../../..');
  const results = JSON.parse(readFileSync(resolve(root, 'bench/results.json'), 'utf8')) as { suites: Array<{ name: string; rows: Row[] }> };
  const plots = plotsOf(results.suites);
  writePlots(plots, resolve(root, 'bench/plots'), 'bench/plots');
  process.stdout.write(`${plots.length} plots written to bench/plots\n`);
}
