/**
 * `kvindex replay --report`: the HTML report of the shipped trace slice, checked as a file
 * (self-contained: no script, no external reference) and rendered in a real headless Chromium
 * (Debian's `chromium`; .ci/run installs it): the page loads with no console error and makes
 * no request but its own, every chart drew its data, and the numbers of its summary equal the
 * same run's `--json`. The screenshot is kept in test-artifacts/ (not committed).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReplayTimeline } from '../src/cli/replay-timeline.js';
import { renderChart } from '../src/report/svg-chart.js';
import { findChromium, visitPage } from './support/headless-browser.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const SLICE = join(ROOT, 'data/conversation_trace_head.jsonl');
const RECORDED = join(ROOT, 'test/fixtures/recorded-small.jsonl');
const ARTIFACTS = join(ROOT, 'test-artifacts');

function kvindex(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd: ROOT, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

let dir = '';
let report = '';
let html = '';
let json: Record<string, unknown> = {};
beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: npm test builds it first`);
  dir = mkdtempSync(join(tmpdir(), 'kvindex-report-'));
  report = join(dir, 'report.html');
  // One run prints --json and writes the report, so their numbers come from the same replay.
  const r = await kvindex(['replay', SLICE, '--report', report, '--json']);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  json = JSON.parse(r.stdout) as Record<string, unknown>; // u64 values are strings in --json
  html = readFileSync(report, 'utf8');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the report file', () => {
  it('is self-contained: no script, no stylesheet or image link, no URL but the SVG namespace', () => {
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|url\(/i);
    expect(html).not.toMatch(/\s(src|href)=/i);
    const urls = html.match(/https?:\/\/[^\s"'<>)]+/g) ?? [];
    expect(new Set(urls)).toEqual(new Set(['http://www.w3.org/2000/svg']));
    // The page forbids every fetch in case a browser would try one anyway.
    expect(html).toContain(`content="default-src 'none'`);
  });

  it('holds the four charts, each with drawn data, and the CLI summary', () => {
    const charts = html.match(/<svg [^>]*class="chart"[^>]*>/g) ?? [];
    expect(charts).toHaveLength(4);
    for (const c of charts) expect(Number(/data-points="(\d+)"/.exec(c)![1])).toBeGreaterThan(0);
    for (const label of ['requests', 'hit rate', 'lookup p50/p99/max', 'snapshot', 'memory']) expect(html).toContain(label);
    expect(html).toContain('Block-weighted hit rate, per minute'); // the slice spans ~11 minutes
  });

  it('fails with exit code 2, before replaying, when the report cannot be written', async () => {
    const r = await kvindex(['replay', SLICE, '--report', join(dir, 'missing-dir', 'r.html')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/cannot write/);
    expect(r.stdout).toBe('');
  });

  it('with shard threads, says what the numbers include: the reads, the indexer time, the stale lookups', async () => {
    const out = join(dir, 'sharded.html');
    const r = await kvindex(['replay', join(ROOT, 'test/fixtures/trace-small.jsonl'), '--workers', '2', '--cache-blocks', '256', '--sub-blocks', '1', '--shards', '2', '--report', out, '--json']);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout) as Record<string, unknown>;
    const page = readFileSync(out, 'utf8');
    expect(page).toContain('lookups read the latest applied state (readYourWrites: false), as a router under load does;');
    expect(page).toContain('the longer of the calling thread inside indexer calls');
    for (const key of ['readYourWrites', 'lookupsEarly', 'staleLookups', 'callerMs', 'shardApplyMs']) {
      expect(j, key).toHaveProperty(key);
      expect(page).toContain(`<tr data-key="${key}"><th>${key}</th><td data-value="${String(j[key])}">`);
    }
  });

  it('renders an input without lookups or timestamps, saying what is missing', async () => {
    const out = join(dir, 'events.html');
    const r = await kvindex(['replay', RECORDED, '--report', out, '--json']);
    expect(r.code).toBe(0);
    const page = readFileSync(out, 'utf8');
    expect(page).toContain('No lookups in this input.');
    expect(page).toContain('No requests in this input.');
    expect((page.match(/<svg [^>]*class="chart"/g) ?? []).length).toBe(2); // events and occupancy
  });
});

describe('the timeline', () => {
  it('buckets hits per minute and events per second of input time, block-weighted', () => {
    const t = new ReplayTimeline();
    // Minute 0: 10 blocks, 5 hit, 8 oracle; minute 1: 30 blocks, 30 hit, 30 oracle. Span 10 min.
    t.request({ timestamp: 0, blocks: 10, hit: 5, oracle: 8, lookupUs: 3 });
    t.request({ timestamp: 61_000, blocks: 10, hit: 10, oracle: 10, lookupUs: 1 });
    t.request({ timestamp: 62_000, blocks: 20, hit: 20, oracle: 20, lookupUs: 2 });
    const stored = (w: bigint, n: number) => ({
      workerId: w, event: { eventId: 0n, data: { type: 'stored' as const, parentHash: null, blocks: Array.from({ length: n }, (_, i) => ({ blockHash: BigInt(i + 1), tokensHash: BigInt(i + 1) })) } },
    });
    t.event(0, stored(1n, 4));
    t.event(500, stored(2n, 2));
    t.event(1500, { workerId: 1n, event: { eventId: 1n, data: { type: 'removed', blockHashes: [1n] } } });
    t.event(600_000, { workerId: 2n, event: { eventId: 2n, data: { type: 'cleared' } } });
    const b = t.buckets();
    expect(b.timed).toBe(true);
    expect(b.hitBucket).toBe(60_000);
    expect(b.hits).toEqual([
      { x: 0, chosen: 0.5, oracle: 0.8, requests: 1 },
      { x: 1, chosen: 1, oracle: 1, requests: 2 },
    ]);
    expect(b.eventBucket).toBe(1000);
    expect(b.events.slice(0, 2)).toEqual([{ x: 0, events: 2, blockOps: 6 }, { x: 1, events: 1, blockOps: 1 }]);
    // Occupancy: worker 1 holds 4 then 3; worker 2 holds 2 until cleared.
    const byWorker = new Map(b.occupancy.map((o) => [o.worker, o.points]));
    expect(byWorker.get('1')).toEqual([[0, 4], [1, 3], [600, 3]]);
    expect(byWorker.get('2')).toEqual([[0, 2], [1, 2], [600, 0]]);
    expect(Array.from(b.latencies)).toEqual([1, 2, 3]);
  });

  it('draws nothing but a frame and legend for a series without points', () => {
    const svg = renderChart({ title: 't', xLabel: 'x', yLabel: 'y', series: [{ name: 'empty', points: [] }] });
    expect(svg).toContain('data-points="0"');
    expect(svg).not.toContain('<polyline');
  });
});

const chromium = findChromium();
if (chromium === null) {
  process.stderr.write('replay-report.test.ts: no chromium on PATH (apt-get install chromium; .ci/run does): browser checks skipped\n');
}

describe.skipIf(chromium === null)('the report in headless Chromium', () => {
  it('loads with no console error and no request but its own; every chart drew; the summary equals --json', async () => {
    const url = pathToFileURL(report).href;
    const visit = await visitPage(chromium!, url, `(() => {
      const charts = [...document.querySelectorAll('svg.chart')].map((svg) => {
        const box = svg.getBoundingClientRect();
        const series = [...svg.querySelectorAll('g.series')].map((g) => ({
          name: g.getAttribute('data-name'),
          points: Number(g.getAttribute('data-points')),
          shapes: g.querySelectorAll('polyline, rect, circle').length,
        }));
        return { width: box.width, height: box.height, series };
      });
      const summary = Object.fromEntries([...document.querySelectorAll('table.summary tr[data-key]')].map((tr) =>
        [tr.getAttribute('data-key'), tr.querySelector('td').getAttribute('data-value')]));
      return { charts, summary, title: document.title };
    })()`);
    mkdirSync(ARTIFACTS, { recursive: true });
    writeFileSync(join(ARTIFACTS, 'replay-report.png'), visit.png);

    expect(visit.errors).toEqual([]);
    expect(visit.requests).toEqual([url]);
    const page = visit.value as {
      charts: Array<{ width: number; height: number; series: Array<{ name: string; points: number; shapes: number }> }>;
      summary: Record<string, string>;
      title: string;
    };
    expect(page.title).toContain('kvindex replay report');
    expect(page.charts).toHaveLength(4);
    for (const c of page.charts) {
      expect(c.width).toBeGreaterThan(100);
      expect(c.height).toBeGreaterThan(100);
      for (const s of c.series) {
        expect(s.points, s.name).toBeGreaterThan(0);
        expect(s.shapes, s.name).toBeGreaterThan(0);
      }
    }
    expect(Object.keys(page.summary).sort()).toEqual(Object.keys(json).sort());
    for (const [k, v] of Object.entries(json)) expect(JSON.parse(page.summary[k]!), k).toEqual(v);
    // The screenshot is a real PNG of the page.
    expect(visit.png.subarray(1, 4).toString()).toBe('PNG');
    expect(visit.png.length).toBeGreaterThan(20_000);
  });
});
