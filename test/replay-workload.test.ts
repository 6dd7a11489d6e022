/**
 * `runReplay` on the replay workload format: every lookup must equal the workload's oracle
 * (`mismatches: 0`). Uses ../shared/workloads; skipped with a message when that folder is absent.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runReplay, type ReplayRunOptions } from '../src/cli/replay-run.js';
import { openLineSource } from '../src/trace/line-source.js';

const WORKLOAD = fileURLToPath(new URL('../../shared/workloads/synthetic.jsonl.gz', import.meta.url));
const present = existsSync(WORKLOAD);
if (!present) console.warn(`skipping replay-workload: ${WORKLOAD} is missing (the shared workloads are not checked out)`);

const base = (file: string, limit: number): ReplayRunOptions => ({ file, shards: 0, speed: Infinity, strict: false, limit, sim: {} });

describe.skipIf(!present)('replay of a shared workload', () => {
  it('agrees with every expected score on the first 20,000 lines of synthetic.jsonl.gz', async () => {
    const s = await runReplay(base(WORKLOAD, 20_000));
    expect(s.kind).toBe('workload');
    expect(s.badLines).toBe(0);
    expect(s.requests).toBeGreaterThan(3000);
    expect(s.mismatches).toBe(0);
    expect(s.applyStatus).toEqual({ ok: s.events, parent_block_not_found: 0, block_not_found: 0, invalid_block_sequence: 0 });
    // synthetic.stats.json: block-weighted hit rates of the chosen and the best worker.
    expect(s.hitRate!).toBeCloseTo(0.3701, 3);
    expect(s.oracleHitRate!).toBeCloseTo(0.4385, 3);
  });

  it('reports mismatches in the --json object of the CLI', () => {
    const cli = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
    const out = execFileSync(process.execPath, [cli, 'replay', WORKLOAD, '--limit', '3000', '--json'], { encoding: 'utf8' });
    const summary = JSON.parse(out) as Record<string, unknown>;
    expect(summary).toMatchObject({ kind: 'workload', gzip: true, mismatches: 0, badLines: 0 });
    expect(summary['requests'] as number).toBeGreaterThan(900);
  });

  it('counts a corrupt workload line and goes on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvindex-wl-'));
    try {
      const lines: string[] = [];
      for await (const { text } of (await openLineSource(WORKLOAD)).lines(40)) lines.push(text);
      const at = lines.findIndex((l, i) => i > 5 && l.startsWith('{"op":"match"'));
      lines[at] = lines[at]!.slice(0, 100);
      const file = join(dir, 'cut.jsonl');
      writeFileSync(file, lines.join('\n') + '\n');
      const s = await runReplay(base(file, Infinity));
      expect(s.badLines).toBe(1);
      expect(s.badLineNumbers).toEqual([at + 1]);
      expect(s.mismatches).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
