/**
 * JSON codec benchmark: `parseRouterEvent` (bytes and string input) against `lossless-json`
 * (the usual lossless alternative, integers -> bigint, then mapped to `RouterEvent`) and plain
 * `JSON.parse` (lossy: rounds hashes above 2^53; a speed ceiling only, no mapping), plus
 * `formatRouterEvent` against `lossless-json`'s `stringify` of the same serde-shaped object.
 * All tasks are in one tinybench `Bench`; one iteration processes every event of the sample once.
 *
 * Input: the first N `{"op":"event","event":<RouterEvent>}` lines of a replay workload
 * (N = 20,000, or 2,000 in quick mode); the inner RouterEvent text is what is parsed.
 * Before timing, every event is parsed by both lossless parsers and compared, and every
 * formatted event is compared with its source text.
 */

import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { createGunzip } from 'node:zlib';
import { Bench } from 'tinybench';
import { isInteger, parse as losslessParse, stringify as losslessStringify } from 'lossless-json';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import { parseRouterEvent } from '../src/protocol/json-parse.js';
import type { KvCacheEventData, RouterEvent } from '../src/protocol/types.js';
import { table } from './suite.js';

const DEFAULT_WORKLOAD = '/work/shared/workloads/conversation.jsonl.gz';
const EVENT_PREFIX = '{"op":"event","event":';

export interface JsonBenchOptions {
  quick: boolean;
  workloadPath?: string;
}

export interface JsonBenchResult {
  rows: Array<Record<string, string | number>>;
  markdown: string;
}

/** Keeps results observable so the optimiser cannot drop the work. */
const sink = { value: 0 };

/** Runs the benchmark; does nothing on import. */
export async function runJsonBench(opts: JsonBenchOptions): Promise<JsonBenchResult> {
  const limit = opts.quick ? 2_000 : 20_000;
  const texts = await readEventTexts(opts.workloadPath ?? DEFAULT_WORKLOAD, limit);
  const encoder = new TextEncoder();
  const bytes = texts.map((t) => encoder.encode(t));
  const totalBytes = bytes.reduce((n, b) => n + b.length, 0);
  const events = texts.map((t) => parseRouterEvent(t));
  const serdeShaped = events.map(toSerdeShape);
  verify(texts, events);

  const bench = new Bench({
    name: 'json',
    // One iteration is a pass over every event (2,000 or 20,000 calls), so a few passes are
    // enough samples and the first warm-up pass already reaches optimised code.
    time: opts.quick ? 300 : 2_000,
    iterations: 5,
    warmupTime: opts.quick ? 100 : 500,
    warmupIterations: 3,
  });
  const n = texts.length;
  bench
    .add('parseRouterEvent(Uint8Array)', () => {
      let blocks = 0;
      for (let i = 0; i < n; i++) blocks += weight(parseRouterEvent(bytes[i]!));
      sink.value += blocks;
    })
    .add('parseRouterEvent(string)', () => {
      let blocks = 0;
      for (let i = 0; i < n; i++) blocks += weight(parseRouterEvent(texts[i]!));
      sink.value += blocks;
    })
    .add('lossless-json parse + map', () => {
      let blocks = 0;
      for (let i = 0; i < n; i++) blocks += weight(losslessToRouterEvent(texts[i]!));
      sink.value += blocks;
    })
    .add('JSON.parse (lossy, no map)', () => {
      let keys = 0;
      for (let i = 0; i < n; i++) keys += (JSON.parse(texts[i]!) as { event: object }).event === null ? 0 : 1;
      sink.value += keys;
    })
    // Both writers concatenate, which leaves a rope; reading the last char flattens it, as
    // encoding it for the wire would.
    .add('formatRouterEvent', () => {
      let last = 0;
      for (let i = 0; i < n; i++) {
        const text = formatRouterEvent(events[i]!);
        last += text.charCodeAt(text.length - 1);
      }
      sink.value += last;
    })
    .add('lossless-json stringify', () => {
      let last = 0;
      for (let i = 0; i < n; i++) {
        const text = losslessStringify(serdeShaped[i])!;
        last += text.charCodeAt(text.length - 1);
      }
      sink.value += last;
    });
  bench.runSync();

  const measured = new Map<string, { mean: number; p50: number; p99: number }>();
  for (const task of bench.tasks) {
    const r = task.result;
    if (r.state !== 'completed') throw new Error(`json bench task ${task.name}: ${r.state}`);
    measured.set(task.name, { mean: r.latency.mean, p50: r.latency.p50, p99: r.latency.p99 });
  }
  const oursParse = measured.get('parseRouterEvent(Uint8Array)')!.p50;
  const oursFormat = measured.get('formatRouterEvent')!.p50;
  const rows: Array<Record<string, string | number>> = [];
  for (const [name, m] of measured) {
    const isFormat = name.includes('format') || name.includes('stringify');
    const base = isFormat ? oursFormat : oursParse;
    rows.push({
      task: name,
      events: n,
      'median ms/pass': round(m.p50, 2),
      'p99 ms/pass': round(m.p99, 2),
      'events/s': Math.round((n * 1000) / m.p50),
      'MB/s': round(totalBytes / 1e6 / (m.p50 / 1000), 1),
      'speed vs ours': `${round(base / m.p50, 3)}x`,
    });
  }
  const markdown = toMarkdown(rows, n, totalBytes);
  return { rows, markdown };
}

/** First `limit` RouterEvent texts of a workload (inner `event` of `op: event` lines). */
async function readEventTexts(path: string, limit: number): Promise<string[]> {
  const texts: string[] = [];
  const input = createReadStream(path);
  const lines = createInterface({ input: path.endsWith('.gz') ? input.pipe(createGunzip()) : input, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.startsWith(EVENT_PREFIX) || !line.endsWith('}')) continue;
    texts.push(line.slice(EVENT_PREFIX.length, -1));
    if (texts.length === limit) break;
  }
  lines.close();
  input.destroy();
  if (texts.length === 0) throw new Error(`no event lines in ${path}`);
  return texts;
}

function weight(event: RouterEvent): number {
  const data = event.event.data;
  return data.type === 'stored' ? data.blocks.length : data.type === 'removed' ? data.blockHashes.length : 1;
}

function losslessNumber(text: string): number | bigint {
  return isInteger(text) ? BigInt(text) : Number(text);
}

type Loose = Record<string, unknown>;

/** lossless-json's generic tree mapped to a RouterEvent (shape trusted: this is the baseline). */
function losslessToRouterEvent(text: string): RouterEvent {
  const root = losslessParse(text, null, losslessNumber) as Loose;
  const inner = root['event'] as Loose;
  const raw = inner['data'];
  let data: KvCacheEventData;
  if (raw === 'cleared') {
    data = { type: 'cleared' };
  } else if ((raw as Loose)['stored'] !== undefined) {
    const stored = (raw as Loose)['stored'] as Loose;
    const blocks = (stored['blocks'] as Loose[]).map((b) => ({
      blockHash: b['block_hash'] as bigint,
      tokensHash: b['tokens_hash'] as bigint,
    }));
    data = { type: 'stored', parentHash: (stored['parent_hash'] ?? null) as bigint | null, blocks };
  } else {
    const removed = (raw as Loose)['removed'] as Loose;
    data = { type: 'removed', blockHashes: removed['block_hashes'] as bigint[] };
  }
  const dpRank = inner['dp_rank'];
  const event = { eventId: inner['event_id'] as bigint, data };
  return {
    workerId: root['worker_id'] as bigint,
    event: dpRank === undefined ? event : { ...event, dpRank: Number(dpRank) },
  };
}

/** The serde field layout with bigint values, for lossless-json's stringify. */
function toSerdeShape(e: RouterEvent): unknown {
  const d = e.event.data;
  const data =
    d.type === 'cleared'
      ? 'cleared'
      : d.type === 'removed'
        ? { removed: { block_hashes: d.blockHashes } }
        : {
            stored: {
              parent_hash: d.parentHash,
              blocks: d.blocks.map((b) => ({ block_hash: b.blockHash, tokens_hash: b.tokensHash })),
            },
          };
  const event: Loose = { event_id: e.event.eventId, data };
  if (e.event.dpRank !== undefined) event['dp_rank'] = e.event.dpRank;
  return { worker_id: e.workerId, event };
}

function verify(texts: string[], events: RouterEvent[]): void {
  for (let i = 0; i < texts.length; i++) {
    const text = texts[i]!;
    if (formatRouterEvent(events[i]!) !== text) throw new Error(`json bench: event ${i} does not round-trip`);
    const other = losslessToRouterEvent(text);
    if (losslessStringify(toSerdeShape(other)) !== text) throw new Error(`json bench: lossless-json disagrees on event ${i}`);
  }
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

function toMarkdown(rows: Array<Record<string, string | number>>, n: number, totalBytes: number): string {
  return (
    `${n} RouterEvents from the workload (${round(totalBytes / 1e6, 1)} MB, ${round(totalBytes / n / 1000, 2)} kB/event); ` +
    'one pass parses or writes every event once. "speed vs ours" is relative to `parseRouterEvent(Uint8Array)` for the ' +
    'parsers and to `formatRouterEvent` for the writers. `JSON.parse` rounds every hash above 2^53: a speed ceiling only.\n\n' +
    `${table(rows)}\n`
  );
}
