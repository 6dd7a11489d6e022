/** A parser of the Prometheus text exposition format (samples only), for asserting on /metrics. */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses every sample line; throws on a line that is neither a comment nor a valid sample. */
export function parsePrometheusText(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    if (m === null) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[2] ?? '';
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/gy;
    let lm: RegExpExecArray | null;
    let consumed = 0;
    while ((lm = re.exec(body)) !== null) {
      labels[lm[1]!] = lm[2]!.replace(/\\(.)/g, (_x, c: string) => (c === 'n' ? '\n' : c));
      consumed = re.lastIndex;
    }
    if (consumed !== body.length) throw new Error(`bad labels in: ${line}`);
    const v = m[3]!;
    out.push({ name: m[1]!, labels, value: v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v) });
  }
  return out;
}

/** The samples named `name` whose labels include `labels`. */
export function samples(all: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return all.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The single sample's value; throws when there is not exactly one. */
export function value(all: Sample[], name: string, labels: Record<string, string> = {}): number {
  const hit = samples(all, name, labels);
  if (hit.length !== 1) throw new Error(`expected one ${name} ${JSON.stringify(labels)}, found ${hit.length}`);
  return hit[0]!.value;
}

/**
 * The `le` labels of the lookup histograms (Dynamo's 0.01 ms x 3^k, 17 buckets), written out
 * as the decimals a dashboard or an alert names.
 */
export const LOOKUP_LE = [
  '0.01', '0.03', '0.09', '0.27', '0.81', '2.43', '7.29', '21.87', '65.61', '196.83', '590.49',
  '1771.47', '5314.41', '15943.23', '47829.69', '143489.07', '430467.21', '+Inf',
];
