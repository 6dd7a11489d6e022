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
