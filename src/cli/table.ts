/** Plain-text layout helpers for CLI summaries: aligned label/value rows and number formats. */

/** Rows of `label  value`, labels padded to the widest one. */
export function formatRows(rows: ReadonlyArray<readonly [string, string]>): string {
  const width = rows.reduce((w, [label]) => Math.max(w, label.length), 0);
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`.trimEnd()).join('\n') + '\n';
}

/** An integer with thousands separators: 1,234,567. */
export function formatInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** A rate or count with a k/M/G suffix and 3 significant digits: 12.3 M. */
export function formatSi(n: number): string {
  const abs = Math.abs(n);
  if (abs >= 1e9) return `${(n / 1e9).toPrecision(3)} G`;
  if (abs >= 1e6) return `${(n / 1e6).toPrecision(3)} M`;
  if (abs >= 1e3) return `${(n / 1e3).toPrecision(3)} k`;
  return n.toPrecision(3);
}

/** Bytes as B, KiB or MiB with one decimal. */
export function formatBytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}

/** A duration given in ms: "850 us", "12.3 ms", "4.56 s". */
export function formatMs(ms: number): string {
  if (ms < 1) return `${(ms * 1000).toFixed(0)} us`;
  if (ms < 1000) return `${ms.toPrecision(3)} ms`;
  return `${(ms / 1000).toPrecision(3)} s`;
}

/** A fraction as a percentage with one decimal: "16.4 %". */
export function formatPercent(f: number): string {
  return `${(f * 100).toFixed(1)} %`;
}
