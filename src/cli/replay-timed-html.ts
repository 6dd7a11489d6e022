/**
 * `kvindex replay --policy/--load/--sweep --report <out.html>`: the timed replay's report, one
 * self-contained HTML file (inline SVG, no script, nothing fetched) with:
 * - TTFT p50 / p90 / p99 per run (policy and load);
 * - with several loads, TTFT p99 against achieved throughput, one line per policy (the sweep);
 * - each engine's load over time (mean requests in it) for the first run of each policy;
 * - the summary table the CLI prints and every run's `--json` fields.
 */
import { escapeXml, renderChart, type Point } from '../report/svg-chart.js';
import type { TimedSummary } from '../trace/timed-stats.js';
import { timedJson, timedTable } from './replay-timed-report.js';

const label = (s: TimedSummary): string => `${s.policy}${s.load === null ? '' : ` @ ${s.load}`}`;

/** The report page as one HTML string. */
export function renderTimedHtml(runs: readonly TimedSummary[], header: string, generatedAt: Date): string {
  const parts: string[] = [];
  parts.push('<h2>Time to first token</h2>');
  parts.push(renderChart({
    title: 'TTFT percentiles per run',
    xLabel: 'percentile',
    yLabel: 'TTFT (ms of simulated time)',
    xTicks: [{ x: 50, label: 'p50' }, { x: 90, label: 'p90' }, { x: 99, label: 'p99' }],
    series: runs.map((s) => ({ name: label(s), points: [[50, s.ttftMs.p50], [90, s.ttftMs.p90], [99, s.ttftMs.p99]] as Point[] })),
  }));
  const loads = new Set(runs.map((s) => s.load));
  if (loads.size > 1) {
    parts.push('<h2>Load sweep</h2>');
    const policies = [...new Set(runs.map((s) => s.policy))];
    parts.push(renderChart({
      title: 'TTFT p99 against achieved throughput',
      xLabel: 'completed requests / s',
      yLabel: 'TTFT p99 (ms)',
      series: policies.map((p) => ({
        name: p,
        points: runs.filter((s) => s.policy === p).map((s): Point => [s.throughputRps, s.ttftMs.p99]).sort((a, b) => a[0] - b[0]),
      })),
    }));
  }
  parts.push('<h2>Engine load over time</h2>');
  const seen = new Set<string>();
  for (const s of runs) {
    if (seen.has(s.policy)) continue;
    seen.add(s.policy);
    parts.push(renderChart({
      title: `${label(s)}: mean requests in each engine`,
      xLabel: 'seconds of simulated time',
      yLabel: 'requests (waiting + running)',
      series: s.engines.map((e, w) => ({ name: `engine ${w}`, points: e.loadSeries.map((y, i): Point => [((i + 0.5) * s.bucketMs) / 1000, y]), dots: false })),
    }));
  }
  const json = escapeXml(JSON.stringify(runs.map(timedJson), null, 1));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>kvindex timed replay report</title>
<style>
body { font: 14px/1.45 sans-serif; margin: 24px auto; max-width: 800px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
pre { background: #f6f6f6; padding: 10px; overflow-x: auto; font-size: 12px; }
svg.chart { display: block; max-width: 100%; height: auto; margin: 8px 0; }
</style>
</head>
<body>
<h1>kvindex timed replay report</h1>
<pre class="cli-summary">${escapeXml(timedTable(runs, header))}</pre>
${parts.join('\n')}
<h2>All numbers (as <code>--json</code>), generated ${escapeXml(generatedAt.toISOString())}</h2>
<pre class="json">${json}</pre>
</body>
</html>
`;
}
