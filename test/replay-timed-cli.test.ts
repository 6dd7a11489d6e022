/**
 * `kvindex replay --policy/--load/--sweep`: the timed replay through the built CLI
 * (`dist/src/cli/main.js`; `npm test` builds first) on the shipped conversation slice.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const TRACE = join(ROOT, 'data/conversation_trace_head.jsonl');

function kvindex(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'replay', ...args], { cwd: ROOT, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

type Run = Record<string, unknown> & { ttftMs: { p50: number; p90: number; p99: number } };

describe('kvindex replay, timed', () => {
  it('--policy all --json: one run per policy with the fixed fields', async () => {
    const r = await kvindex([TRACE, '--policy', 'all', '--load', '0.8', '--limit', '120', '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { runs: Run[]; engine: string };
    expect(out.engine).toBe('dynamo-mocker');
    expect(out.runs.map((x) => x.policy)).toEqual(['kv', 'dynamo', 'kv-time', 'round-robin', 'random', 'least-loaded', 'sglang', 'llm-d']);
    for (const run of out.runs) {
      expect(run.load).toBe(0.8);
      expect(run.completed).toBe(120);
      expect(run.ttftMs.p50).toBeGreaterThan(0);
      expect(run.ttftMs.p50).toBeLessThanOrEqual(run.ttftMs.p90);
      expect(run.ttftMs.p90).toBeLessThanOrEqual(run.ttftMs.p99);
      const e2e = run.e2eMs as Run['ttftMs'];
      expect(e2e.p99).toBeGreaterThanOrEqual(run.ttftMs.p99);
      expect(run.throughputRps).toBeGreaterThan(0);
      expect(run.cachedTokenFraction).toBeGreaterThanOrEqual(0);
      expect(run.cachedTokenFraction).toBeLessThan(1);
      expect((run.engines as unknown[]).length).toBe(4);
    }
  });

  it('a single run prints the table with each engine', async () => {
    const r = await kvindex([TRACE, '--policy', 'kv', '--load', '0.5', '--limit', '60']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('TTFT p50 / p90 / p99');
    expect(r.stdout).toMatch(/^kv\s+0\.5\s+\d+ ms/m);
    expect(r.stdout.match(/^ {2}\d: /gm)).toHaveLength(4);
    expect(r.stdout).toMatch(/^TTFT lower bound, any policy \(best cache, idle engine\) at load 0\.5: \d+ ms \/ \d+ ms \/ \d+ ms$/m);
  });

  it('--sweep runs each load; --skip takes a later slice', async () => {
    const r = await kvindex([TRACE, '--policy', 'round-robin', '--sweep', '0.4,0.8', '--skip', '1950', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { runs: Run[]; skip: number };
    expect(out.skip).toBe(1950);
    expect(out.runs.map((x) => x.load)).toEqual([0.4, 0.8]);
    expect(out.runs.map((x) => x.requests)).toEqual([50, 50]);
  });

  it('engine parameters: a slower prefill changes the times; bad options are usage errors', async () => {
    const base = JSON.parse((await kvindex([TRACE, '--policy', 'round-robin', '--limit', '40', '--json'])).stdout) as Run;
    const slow = JSON.parse((await kvindex([TRACE, '--policy', 'round-robin', '--limit', '40', '--engine-param', 'prefillB=0.1', '--json'])).stdout) as Run;
    expect(slow.ttftMs.p50).toBeGreaterThan(base.ttftMs.p50);
    expect(base.load).toBeNull();
    for (const args of [['--policy', 'nope'], ['--policy', 'kv', '--engine-param', 'bogus=1'], ['--policy', 'kv', '--engine', 'h100'],
      ['--policy', 'kv', '--record', '/tmp/x.jsonl'], ['--policy', 'kv', '--shards', '2'], ['--skip', '5'], ['--load', '0'], ['--load', '0.5', '--sweep', '0.5']]) {
      const r = await kvindex([TRACE, ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
    }
  });
});

describe('kvindex replay, timed, --engine-file', () => {
  it('applies a JSON object of overrides; anything else is a usage error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvindex-timed-'));
    try {
      const good = join(dir, 'good.json');
      writeFileSync(good, JSON.stringify({ tokenBudget: 4096, maxRunning: 64 }));
      const r = await kvindex([TRACE, '--policy', 'round-robin', '--limit', '20', '--engine-file', good, '--engine-param', 'maxRunning=32', '--json']);
      expect(r.code).toBe(0);
      const out = JSON.parse(r.stdout) as { engineParams: { tokenBudget: number; maxRunning: number } };
      expect(out.engineParams.tokenBudget).toBe(4096);
      expect(out.engineParams.maxRunning).toBe(32); // --engine-param wins over the file
      for (const [name, text] of [['list.json', '[1]'], ['bad.json', '{"tokenBudget": '], ['field.json', '{"speed": 2}'], ['nan.json', '{"prefillB": "fast"}']]) {
        writeFileSync(join(dir, name!), text!);
        const bad = await kvindex([TRACE, '--policy', 'kv', '--limit', '5', '--engine-file', join(dir, name!)]);
        expect(bad.code, name).toBe(2);
        expect(bad.stderr).toMatch(/engine/);
      }
      expect((await kvindex([TRACE, '--policy', 'kv', '--engine-file', join(dir, 'missing.json')])).code).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a file with no trace request fails with exit 1 and says why', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvindex-timed-'));
    try {
      const events = join(dir, 'events.jsonl');
      writeFileSync(events, '{"timestamp": 1, "event": {"event_id": 1}}\nnot json\n');
      const r = await kvindex([events, '--policy', 'kv']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/no trace request/);
      expect(r.stderr).toMatch(/2 bad lines/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('kvindex replay, timed, --report', () => {
  it('writes one self-contained page with the sweep chart and every run\'s numbers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvindex-timed-'));
    try {
      const out = join(dir, 'r.html');
      const r = await kvindex([TRACE, '--policy', 'all', '--sweep', '0.5,0.9', '--limit', '80', '--report', out]);
      expect(r.code).toBe(0);
      const html = readFileSync(out, 'utf8');
      expect(html).toContain('TTFT p99 against achieved throughput');
      expect(html.match(/<svg/g)!.length).toBe(2 + 8); // percentiles, sweep, one load chart per policy
      expect(html).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org)/);
      const json = JSON.parse(html.slice(html.indexOf('<pre class="json">') + 18, html.indexOf('</pre>', html.indexOf('<pre class="json">'))).replace(/&quot;/g, '"')) as Array<{ policy: string }>;
      expect(json).toHaveLength(16);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
