/**
 * `kvindex replay --report <out.html>`: one self-contained HTML file (inline CSS and SVG, no
 * script, no external resource, so it opens offline and nothing in it can fetch) with:
 * - hit rate over input time: the chosen workers' block-weighted hits vs the oracle's;
 * - lookup latency: a log-binned histogram with p50, p99 and p99.9 marked;
 * - events and block operations per second over input time;
 * - per-worker cache occupancy over time;
 * - the summary the CLI prints, the `--json` fields (each row carries its JSON value in
 *   `data-value`, so the page can be checked against `--json`), and the run's parameters.
 */
import { escapeXml, renderChart, type Point } from '../report/svg-chart.js';
import { replayJson, replayTable } from './replay-report.js';
import type { ReplaySummary } from './replay-summary.js';
import type { TimelineBuckets } from './replay-timeline.js';

/** Nearest-rank percentile of sorted values, as the CLI's LatencyLog computes it. */
function percentile(sorted: Float64Array, p: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/** Log-spaced bins over [min, max] (latencies span decades); counts per bin. */
function logHistogram(sorted: Float64Array, bins = 48): Array<[number, number, number]> {
  const lo = Math.max(0.01, sorted[0]!);
  const hi = Math.max(lo * 1.01, sorted[sorted.length - 1]!);
  const step = Math.log(hi / lo) / bins;
  const counts = new Array<number>(bins).fill(0);
  for (const v of sorted) counts[Math.min(bins - 1, Math.max(0, Math.floor(Math.log(Math.max(v, lo) / lo) / step)))]!++;
  return counts.map((c, i) => [lo * Math.exp(i * step), lo * Math.exp((i + 1) * step), c]);
}

const none = (what: string): string => `<p class="empty">${escapeXml(what)}</p>`;

function jsonText(v: unknown): string {
  return JSON.stringify(v) ?? 'null';
}

/** The report page as one HTML string. */
export function renderReplayHtml(s: ReplaySummary, t: TimelineBuckets, generatedAt: Date): string {
  const json = replayJson(s);
  const charts: string[] = [];
  const unit = t.timed ? 'minutes of input time' : 'requests (input has no timestamps)';

  charts.push('<h2>Hit rate over time</h2>');
  if (t.hits.length > 0) {
    const per = t.timed ? (t.hitBucket >= 60_000 ? 'per minute' : `per ${t.hitBucket / 1000} s`) : `per ${t.hitBucket} requests`;
    charts.push(renderChart({
      title: `Block-weighted hit rate, ${per}`,
      xLabel: unit,
      yLabel: 'hit rate (%)',
      series: [
        { name: 'chosen workers', points: t.hits.map((h): Point => [h.x, 100 * h.chosen]) },
        { name: 'oracle (best available)', points: t.hits.map((h): Point => [h.x, 100 * h.oracle]), dashed: true },
      ],
    }));
  } else {
    charts.push(none('No requests in this input.'));
  }

  charts.push('<h2>Lookup latency</h2>');
  if (t.latencies.length > 0) {
    const p50 = percentile(t.latencies, 50);
    const p99 = percentile(t.latencies, 99);
    const p999 = percentile(t.latencies, 99.9);
    const max = t.latencies[t.latencies.length - 1]!;
    charts.push(renderChart({
      title: `Lookup latency, ${t.latencies.length.toLocaleString('en-US')} lookups`,
      xLabel: 'latency (us, log scale)',
      yLabel: 'lookups',
      xLog: true,
      series: [{ kind: 'bars', name: 'lookups per bin', bars: logHistogram(t.latencies) }],
      markers: [
        { x: p50, label: 'p50' },
        { x: p99, label: 'p99' },
        { x: p999, label: 'p99.9' },
      ],
    }));
    charts.push(
      '<table class="percentiles"><tr><th>p50 us</th><th>p99 us</th><th>p99.9 us</th><th>max us</th></tr>' +
        `<tr><td>${p50.toFixed(1)}</td><td>${p99.toFixed(1)}</td><td>${p999.toFixed(1)}</td><td>${max.toFixed(1)}</td></tr></table>`,
    );
  } else {
    charts.push(none('No lookups in this input.'));
  }

  charts.push('<h2>Events and block operations</h2>');
  if (t.events.length > 0) {
    const per = t.timed ? 'per second' : `per ${t.eventBucket} events`;
    charts.push(renderChart({
      title: `Events and blocks stored + removed, ${per}`,
      xLabel: t.timed ? 'seconds of input time' : 'events (input has no timestamps)',
      yLabel: t.timed ? 'per second (log scale)' : 'per bucket (log scale)',
      yLog: true,
      series: [
        { name: 'events', points: t.events.map((e): Point => [e.x, e.events]) },
        { name: 'block operations', points: t.events.map((e): Point => [e.x, e.blockOps]) },
      ],
    }));
  } else {
    charts.push(none('No events in this input.'));
  }

  charts.push('<h2>Cache occupancy per worker</h2>');
  if (t.occupancy.length > 0) {
    charts.push(renderChart({
      title: 'Blocks held per worker',
      xLabel: t.timed ? 'seconds of input time' : 'events (input has no timestamps)',
      yLabel: 'blocks',
      series: t.occupancy.map((o) => ({ name: `worker ${o.worker}`, points: o.points, dots: false })),
    }));
    if (t.hiddenWorkers > 0) charts.push(`<p>${t.hiddenWorkers} more workers not drawn (the ${t.occupancy.length} holding the most blocks at the end are).</p>`);
  } else {
    charts.push(none('No events in this input.'));
  }

  const rows = Object.entries(json)
    .map(([k, v]) => `<tr data-key="${escapeXml(k)}"><th>${escapeXml(k)}</th><td data-value="${escapeXml(jsonText(v))}">${escapeXml(typeof v === 'number' ? v.toLocaleString('en-US') : jsonText(v))}</td></tr>`)
    .join('\n');
  const params: Array<[string, string]> = [
    ['file', s.file],
    ['shards', String(s.shards)],
    ['speed', s.speed === null ? 'as fast as possible' : `timestamps / ${s.speed}`],
    ...(s.sim === null ? [] : [
      ['workers', String(s.sim.workers)],
      ['cache blocks per worker', String(s.sim.cacheBlocks)],
      ['block size (tokens)', String(s.sim.blockSize)],
      ['blocks per trace block', String(s.sim.subBlocks)],
      ['seed', s.sim.seed.toString()],
    ] as Array<[string, string]>),
    ['generated', generatedAt.toISOString()],
    ['node', process.version],
  ];
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>kvindex replay report: ${escapeXml(s.file)}</title>
<style>
body { font: 14px/1.45 sans-serif; margin: 24px auto; max-width: 780px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; } th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
td { font-variant-numeric: tabular-nums; overflow-wrap: anywhere; } pre { background: #f6f6f6; padding: 10px; overflow-x: auto; font-size: 12px; }
svg.chart { display: block; max-width: 100%; height: auto; margin: 8px 0; } .empty { color: #777; }
</style>
</head>
<body>
<h1>kvindex replay report</h1>
<h2>Summary</h2>
<pre class="cli-summary">${escapeXml(replayTable(s))}</pre>
${charts.join('\n')}
<h2>Parameters</h2>
<table class="params">${params.map(([k, v]) => `<tr><th>${escapeXml(k)}</th><td>${escapeXml(v)}</td></tr>`).join('')}</table>
<h2>All numbers (as <code>--json</code>)</h2>
<table class="summary">
${rows}
</table>
</body>
</html>
`;
}
