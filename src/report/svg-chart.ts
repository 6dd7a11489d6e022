/**
 * Charts as static SVG text: line series, bar series and marker lines on linear or log10
 * axes. Used by the replay report (report/replay-html.ts) and by `npm run bench` for the plots
 * beside BENCHMARKS.md.
 *
 * Why static SVG rather than a charting library inlined into the page: the charts are drawn
 * once from numbers known when the file is written, so the output needs no script at all
 * (it opens offline in any browser, in a Markdown viewer and in a CI artifact), and the
 * package gains no runtime dependency. An interactive library (uPlot is ~50 KB) would add
 * zoom and tooltips; the report shows the underlying numbers in its tables instead.
 *
 * Every drawn series is a `<g class="series" data-name=".." data-points="n">`, so a test
 * (or a reader) can tell a chart that drew its data from an empty frame.
 */

export type Point = readonly [number, number];

export interface LineSeries {
  kind?: 'line';
  name: string;
  points: readonly Point[];
  /** Draw a dot at each point (default: when there are at most 40). */
  dots?: boolean;
  dashed?: boolean;
}

export interface BarSeries {
  kind: 'bars';
  name: string;
  /** [x from, x to, height] per bar. */
  bars: ReadonlyArray<readonly [number, number, number]>;
}

export type Series = LineSeries | BarSeries;

export interface ChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly Series[];
  xLog?: boolean;
  yLog?: boolean;
  /** Vertical lines at x, labelled (e.g. percentiles). */
  markers?: ReadonlyArray<{ x: number; label: string }>;
  /** Ticks of the x axis at these values with these labels, instead of computed ones. */
  xTicks?: ReadonlyArray<{ x: number; label: string }>;
  /** Lower bound of the y axis when linear (default 0). */
  yMin?: number;
  width?: number;
  height?: number;
}

/** Colours distinguishable in colour-blind palettes (Okabe-Ito). */
const COLORS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000', '#F0E442'];

const M = { left: 64, right: 16, bottom: 48 };

/** Legend items laid out in rows above the plot (so they never cover data). */
function legendLayout(names: readonly string[], width: number): { at: Array<[number, number]>; rows: number } {
  const at: Array<[number, number]> = [];
  let x = M.left;
  let row = 0;
  for (const name of names) {
    const w = 18 + 6.2 * name.length + 14;
    if (x + w > width - M.right && x > M.left) {
      row++;
      x = M.left;
    }
    at.push([x, row]);
    x += w;
  }
  return { at, rows: names.length > 0 ? row + 1 : 0 };
}

/** Escapes text for SVG/HTML content and attribute values. */
export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** A short tick label: 0.25, 12, 3.4k, 1.2M. */
export function tickLabel(v: number): string {
  const a = Math.abs(v);
  const trim = (x: number): string => String(Number(x.toPrecision(3)));
  if (a >= 1e9) return `${trim(v / 1e9)}G`;
  if (a >= 1e6) return `${trim(v / 1e6)}M`;
  if (a >= 1e4) return `${trim(v / 1e3)}k`;
  return trim(v);
}

interface Axis {
  map: (v: number) => number;
  ticks: number[];
}

/** Linear ticks at 1, 2 or 5 x 10^k steps, about `count` of them, covering [lo, hi]. */
function linearTicks(lo: number, hi: number, count = 5): { lo: number; hi: number; ticks: number[] } {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const a = Math.floor(lo / step) * step;
  const b = Math.ceil(hi / step) * step;
  const ticks: number[] = [];
  for (let v = a; v <= b + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return { lo: a, hi: b, ticks };
}

/** Min and max without spreading (series may hold more points than call arguments allow). */
function extent(values: readonly number[]): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return [lo, hi];
}

function axis(values: number[], log: boolean, from: number, to: number, floor: number | undefined): Axis {
  if (log) {
    const [pLo, pHi] = extent(values.filter((v) => v > 0));
    const lo = Number.isFinite(pLo) ? Math.floor(Math.log10(pLo)) : 0;
    let hi = Number.isFinite(pHi) ? Math.ceil(Math.log10(pHi)) : 1;
    if (hi === lo) hi = lo + 1;
    const ticks: number[] = [];
    for (let e = lo; e <= hi; e++) ticks.push(10 ** e);
    const span = hi - lo;
    return { map: (v) => from + ((Math.log10(Math.max(v, 10 ** lo)) - lo) / span) * (to - from), ticks };
  }
  const [vLo, vHi] = extent(values);
  const lo0 = floor ?? Math.min(0, vLo);
  const t = linearTicks(lo0, Number.isFinite(vHi) ? vHi : 1);
  return { map: (v) => from + ((v - t.lo) / (t.hi - t.lo)) * (to - from), ticks: t.ticks };
}

const f1 = (v: number): string => (Number.isFinite(v) ? v.toFixed(1) : '0');

/** The chart as one `<svg>` element. Series with no finite point draw nothing but their legend. */
export function renderChart(spec: ChartSpec): string {
  const W = spec.width ?? 720;
  const H = spec.height ?? 320;
  const xs: number[] = [];
  const ys: number[] = [];
  for (const s of spec.series) {
    if (s.kind === 'bars') {
      for (const [a, b, h] of s.bars) xs.push(a, b), ys.push(h);
    } else {
      for (const [x, y] of s.points) if (Number.isFinite(x) && Number.isFinite(y)) xs.push(x), ys.push(y);
    }
  }
  for (const m of spec.markers ?? []) xs.push(m.x);
  for (const t of spec.xTicks ?? []) xs.push(t.x);
  const legend = legendLayout(spec.series.map((s) => s.name), W);
  const top = 30 + 14 * legend.rows + ((spec.markers?.length ?? 0) > 0 ? 12 : 4);
  const xLo = extent(xs)[0];
  const X = axis(xs, spec.xLog === true, M.left, W - M.right, Number.isFinite(xLo) ? xLo : 0);
  const Y = axis(ys, spec.yLog === true, H - M.bottom, top, spec.yMin ?? 0);
  const out: string[] = [];
  const total = spec.series.reduce((n, s) => n + (s.kind === 'bars' ? s.bars.length : s.points.length), 0);
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" ` +
      `role="img" aria-label="${escapeXml(spec.title)}" data-points="${total}" font-family="sans-serif" font-size="11">`,
  );
  out.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="#fff"/>`);
  out.push(`<text x="${W / 2}" y="18" text-anchor="middle" font-size="13" font-weight="bold">${escapeXml(spec.title)}</text>`);
  // Grid and tick labels.
  for (const t of Y.ticks) {
    const y = f1(Y.map(t));
    out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${y}" y2="${y}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${M.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${tickLabel(t)}</text>`);
  }
  for (const t of spec.xTicks ?? X.ticks.map((x) => ({ x, label: tickLabel(x) }))) {
    const x = f1(X.map(t.x));
    out.push(`<line x1="${x}" x2="${x}" y1="${top}" y2="${H - M.bottom}" stroke="#f0f0f0"/>`);
    out.push(`<text x="${x}" y="${H - M.bottom + 14}" text-anchor="middle">${escapeXml(t.label)}</text>`);
  }
  out.push(`<rect x="${M.left}" y="${top}" width="${W - M.left - M.right}" height="${H - top - M.bottom}" fill="none" stroke="#888"/>`);
  out.push(`<text x="${(M.left + W - M.right) / 2}" y="${H - 12}" text-anchor="middle">${escapeXml(spec.xLabel)}</text>`);
  out.push(`<text transform="translate(14 ${(top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">${escapeXml(spec.yLabel)}</text>`);
  // Series.
  spec.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    if (s.kind === 'bars') {
      out.push(`<g class="series" data-name="${escapeXml(s.name)}" data-points="${s.bars.length}" fill="${color}" fill-opacity="0.75">`);
      const y0 = Y.map(spec.yLog === true ? Y.ticks[0]! : 0);
      for (const [a, b, h] of s.bars) {
        const x = X.map(a);
        const y = Y.map(h);
        out.push(`<rect x="${f1(x)}" y="${f1(Math.min(y, y0))}" width="${f1(Math.max(0.5, X.map(b) - x - 0.5))}" height="${f1(Math.abs(y0 - y))}"/>`);
      }
      out.push('</g>');
      return;
    }
    const pts = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (spec.xLog !== true || x > 0) && (spec.yLog !== true || y > 0));
    out.push(`<g class="series" data-name="${escapeXml(s.name)}" data-points="${pts.length}" stroke="${color}" fill="${color}">`);
    if (pts.length > 1) {
      const d = pts.map(([x, y]) => `${f1(X.map(x))},${f1(Y.map(y))}`).join(' ');
      out.push(`<polyline points="${d}" fill="none" stroke-width="1.6"${s.dashed === true ? ' stroke-dasharray="5 3"' : ''}/>`);
    }
    if (s.dots ?? pts.length <= 40) for (const [x, y] of pts) out.push(`<circle cx="${f1(X.map(x))}" cy="${f1(Y.map(y))}" r="2.6"/>`);
    out.push('</g>');
  });
  for (const m of spec.markers ?? []) {
    const x = f1(X.map(m.x));
    out.push(`<g class="marker"><line x1="${x}" x2="${x}" y1="${top}" y2="${H - M.bottom}" stroke="#444" stroke-dasharray="3 3"/>`);
    out.push(`<text x="${x}" y="${top - 3}" text-anchor="middle" font-size="10">${escapeXml(m.label)}</text></g>`);
  }
  spec.series.forEach((s, i) => {
    const [x, row] = legend.at[i]!;
    const y = 34 + 14 * row;
    out.push(`<rect x="${x}" y="${y - 8}" width="10" height="10" fill="${COLORS[i % COLORS.length]!}"/>`);
    out.push(`<text x="${x + 14}" y="${y + 1}">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}
