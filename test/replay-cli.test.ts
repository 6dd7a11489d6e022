/**
 * `kvindex replay` end to end: the built CLI (`dist/src/cli/main.js`, `npm test` builds first)
 * run as a child process on the small fixtures (test/fixtures/README.md says how they were made).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const FIXTURES = join(ROOT, 'test/fixtures');
const TRACE = join(FIXTURES, 'trace-small.jsonl');
// The options the recorded fixtures were made with (test/fixtures/README.md).
const SIM = ['--workers', '2', '--cache-blocks', '256', '--sub-blocks', '1'];

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function kvindex(args: string[], cwd = ROOT): Promise<Result> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs with --json and parses the single object stdout must hold. */
async function replayJson(args: string[], cwd = ROOT): Promise<Record<string, unknown>> {
  const r = await kvindex(['replay', ...args, '--json'], cwd);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect(r.stdout.trim().split('\n')).toHaveLength(1);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

const REQUIRED = [
  'requests', 'events', 'blocksStored', 'blocksRemoved', 'blockOpsPerSec', 'lookupP50Us', 'lookupP99Us',
  'hitRate', 'oracleHitRate', 'dumpMs', 'dumpEvents', 'bytesPerPair', 'badLines',
];

let dir = '';
let traceRun: Record<string, unknown> = {};
beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run 'npx tsc -p tsconfig.build.json' (npm test does)`);
  dir = mkdtempSync(join(tmpdir(), 'kvindex-replay-'));
  traceRun = await replayJson([TRACE, ...SIM]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('kvindex replay on a trace', () => {
  it('prints one JSON object with the summary fields', () => {
    for (const key of REQUIRED) expect(traceRun, key).toHaveProperty(key);
    expect(traceRun).toMatchObject({ kind: 'trace', requests: 50, events: 62, blocksStored: 808, blocksRemoved: 296, badLines: 0, mismatches: 0 });
    expect(traceRun['hitRate'] as number).toBeLessThanOrEqual(traceRun['oracleHitRate'] as number);
    expect(traceRun['blockOpsPerSec'] as number).toBeGreaterThan(0);
    expect(traceRun['pairs']).toBe(512);
  });

  it('prints the summary table without --json', async () => {
    const r = await kvindex(['replay', TRACE, ...SIM]);
    expect(r.code).toBe(0);
    for (const label of ['requests', 'events', 'blocks stored', 'blocks removed', 'block-ops/s', 'lookup p50/p99/max', 'hit rate', 'snapshot', 'memory', 'bad lines']) {
      expect(r.stdout).toMatch(new RegExp(`^${label.replace(/[/.]/g, '\\$&')}\\s{2,}\\S`, 'm'));
    }
    expect(r.stdout).toMatch(/^requests\s+50$/m);
    expect(r.stdout).toMatch(/oracle/);
  });

  it('gives the same results through 2 shard threads whose lookups wait (--read-your-writes)', async () => {
    const sharded = await replayJson([TRACE, ...SIM, '--shards', '2', '--read-your-writes']);
    for (const key of ['requests', 'events', 'blocksStored', 'blocksRemoved', 'blocksMatched', 'hitRate', 'oracleHitRate', 'mismatches', 'pairs', 'dumpEvents', 'dumpBytes']) {
      expect(sharded[key], key).toEqual(traceRun[key]);
    }
    expect(sharded['readYourWrites']).toBe(true);
    expect(sharded).not.toHaveProperty('lookupsEarly');
  });

  it('reads the latest applied state through shard threads by default, and says so', async () => {
    const r = await kvindex(['replay', TRACE, ...SIM, '--shards', '2']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^reads\s+lookups read the latest applied state \(readYourWrites: false\), as a router under load does; [\d,]+ lookups answered before their shard applied the previous events$/m);
    expect(r.stdout).toMatch(/^indexer time\s+the longer of the calling thread inside indexer calls \(.+\) and the busiest shard applying events \(.+\): they run in parallel$/m);
    expect(r.stdout).toMatch(/^mismatches\s+0 lookups differ from the simulated caches; \d+ more answered stale, right once their shard caught up$/m);

    const j = await replayJson([TRACE, ...SIM, '--shards', '2']);
    expect(j).toMatchObject({ requests: traceRun['requests'], lookups: traceRun['lookups'], mismatches: 0, readYourWrites: false });
    const early = j['lookupsEarly'] as number;
    expect(Number.isInteger(early) && early >= 0 && early <= (j['lookups'] as number)).toBe(true);
    expect(j['staleLookups'] as number).toBeLessThanOrEqual(early);
    const caller = j['callerMs'] as number;
    const shard = j['shardApplyMs'] as number;
    expect(caller).toBeGreaterThan(0);
    expect(shard).toBeGreaterThan(0);
    expect(j['indexerMs'] as number).toBeCloseTo(Math.max(caller, shard), 1);
  });

  it('keeps the in-thread summary free of the shard-thread fields', async () => {
    for (const key of ['readYourWrites', 'lookupsEarly', 'staleLookups', 'callerMs', 'shardApplyMs']) expect(traceRun, key).not.toHaveProperty(key);
    const r = await kvindex(['replay', TRACE, ...SIM]);
    expect(r.stdout).not.toMatch(/^(reads|indexer time) /m);
    expect(r.stdout).toMatch(/^mismatches\s+0 lookups differ from the simulated caches$/m);
  });

  it('refuses --read-your-writes without shard threads', async () => {
    const r = await kvindex(['replay', TRACE, '--read-your-writes']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--read-your-writes: only with --shards N/);
  });

  it('honours timestamps with --speed', async () => {
    // The fixture spans 6,105 ms of trace time: about 61 ms at 100x.
    const paced = await replayJson([TRACE, ...SIM, '--speed', '100']);
    expect(paced['wallMs'] as number).toBeGreaterThanOrEqual(55);
    expect(paced['speed']).toBe(100);
    expect(paced['events']).toBe(traceRun['events']);
  });

  it('replays the shipped trace slice by default, from any working directory', async () => {
    const r = await replayJson([], tmpdir());
    expect(r['file']).toMatch(/data[/\\]conversation_trace_head\.jsonl$/);
    expect(r).toMatchObject({ kind: 'trace', requests: 2000, badLines: 0, mismatches: 0 });
  });
});

describe('kvindex replay on recorded events', () => {
  it('replays a Dynamo recorder stream into the same tree as the trace it was recorded from', async () => {
    const r = await replayJson([join(FIXTURES, 'recorded-small.jsonl')]);
    expect(r).toMatchObject({ kind: 'recorder', requests: 0, events: 62, blocksStored: 808, blocksRemoved: 296, badLines: 0, lookupP50Us: null, hitRate: null });
    expect(r['pairs']).toBe(traceRun['pairs']);
    expect(r['dumpBytes']).toBe(traceRun['dumpBytes']);
  });

  it('replays gzip RouterEvent lines', async () => {
    const r = await replayJson([join(FIXTURES, 'router-events-small.jsonl.gz')]);
    expect(r).toMatchObject({ kind: 'events', gzip: true, events: 62, blocksStored: 808, blocksRemoved: 296 });
    expect(r['dumpBytes']).toBe(traceRun['dumpBytes']);
  });

  it('writes what it applied with --record, as a replayable recorder file', async () => {
    const out = join(dir, 'recorded.jsonl');
    await replayJson([TRACE, ...SIM, '--record', out]);
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(join(FIXTURES, 'recorded-small.jsonl'), 'utf8'));
  });
});

describe('kvindex replay on bad input', () => {
  const withBadLines = (): string => {
    const lines = readFileSync(TRACE, 'utf8').trimEnd().split('\n');
    lines.splice(2, 0, '{"timestamp": 1, "hash_ids": [1, 2');            // line 3: not JSON
    lines.splice(9, 0, '{"timestamp": 1, "hash_ids": [1, -2, 3]}');      // line 10: negative id
    lines.splice(19, 0, '{"timestamp": 1, "hash_ids": "0,1"}');          // line 20: not a list
    const file = join(dir, 'bad.jsonl');
    writeFileSync(file, lines.join('\n') + '\n');
    return file;
  };

  it('counts bad lines with their 1-based numbers and replays the rest', async () => {
    const r = await replayJson([withBadLines(), ...SIM]);
    expect(r).toMatchObject({ requests: 50, badLines: 3, badLineNumbers: [3, 10, 20], events: traceRun['events'] });
    const table = await kvindex(['replay', withBadLines(), ...SIM]);
    expect(table.stdout).toMatch(/^bad lines\s+3 \(lines 3, 10, 20;/m);
  });

  it('a line longer than the 64 MiB cap is one bad line, not a crash; a UTF-8 byte order mark is not a bad line', async () => {
    const lines = readFileSync(TRACE, 'utf8').trimEnd().split('\n');
    // 70 MiB without a break (gzip keeps the fixture small): readline once threw past ~512 MiB
    // where nothing could catch it; the cap makes any overlong line a counted bad line.
    lines.splice(2, 0, '['.repeat(70 << 20));
    const file = join(dir, 'overlong.jsonl.gz');
    writeFileSync(file, gzipSync(lines.join('\n') + '\n'));
    const r = await replayJson([file, ...SIM]);
    expect(r).toMatchObject({ requests: 50, badLines: 1, badLineNumbers: [3], events: traceRun['events'] });
    const bom = join(dir, 'bom.jsonl');
    writeFileSync(bom, '\uFEFF' + readFileSync(TRACE, 'utf8'));
    expect(await replayJson([bom, ...SIM])).toMatchObject({ requests: 50, badLines: 0, events: traceRun['events'] });
  });

  it('stops at the first bad line with exit code 1 under --strict', async () => {
    const r = await kvindex(['replay', withBadLines(), ...SIM, '--strict', '--json']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/bad\.jsonl:3: bad line: not valid JSON/);
  });
});

describe('kvindex replay on corrupt gzip', () => {
  const GZ = join(FIXTURES, 'router-events-small.jsonl.gz');
  const variant = (name: string, make: (gz: Buffer) => Buffer): string => {
    const file = join(dir, name);
    writeFileSync(file, make(readFileSync(GZ)));
    return file;
  };
  const cases: [string, (gz: Buffer) => Buffer, RegExp][] = [
    ['truncated.gz', (gz) => gz.subarray(0, Math.floor(gz.length * 0.6)), /gzip data ends early \(truncated file\) after line \d+ \(zlib Z_BUF_ERROR/],
    ['trailing.gz', (gz) => Buffer.concat([gz, Buffer.from('not gzip\n')]), /bytes that are not gzip data .* after line \d+ \(zlib Z_DATA_ERROR/],
    ['flipped.gz', (gz) => {
      const b = Buffer.from(gz);
      b[Math.floor(b.length / 2)]! ^= 0xff;
      return b;
    }, /gzip data .*after line \d+ \(zlib Z_/],
  ];

  it('replays what was read, summarises it with the typed reason, and exits 1', async () => {
    for (const [name, make, reason] of cases) {
      const file = variant(name, make);
      const r = await kvindex(['replay', file, '--json']);
      expect(r.code, name).toBe(1);
      // One summary object on stdout, one typed line naming the file on stderr, no stack trace.
      const summary = JSON.parse(r.stdout) as Record<string, unknown>;
      expect(summary['inputError'], name).toMatchObject({ code: 'KVX_CORRUPT_INPUT' });
      expect((summary['inputError'] as { message: string }).message, name).toMatch(reason);
      expect(summary['events'] as number, name).toBeLessThanOrEqual(62);
      expect(r.stderr.trimEnd().split('\n'), name).toHaveLength(1);
      expect(r.stderr, name).toMatch(new RegExp(`^kvindex replay: \\[KVX_CORRUPT_INPUT\\] .*${name}: `));
      const table = await kvindex(['replay', file]);
      expect(table.code, name).toBe(1);
      expect(table.stdout, name).toMatch(/^input cut short\s+\[KVX_CORRUPT_INPUT\] /m);
    }
  });

  it('under --strict stops with the typed error and no summary', async () => {
    const r = await kvindex(['replay', variant('strict.gz', cases[0]![1]), '--strict', '--json']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^kvindex replay: \[KVX_CORRUPT_INPUT\] .*strict\.gz: gzip data ends early/);
  });

  it('two gzip members in a row (concatenated files) are one valid input, and trailing zero padding is ignored', async () => {
    const gz = readFileSync(GZ);
    const twice = await replayJson([variant('twice.gz', () => Buffer.concat([gz, gz, Buffer.alloc(512)]))]);
    expect(twice).toMatchObject({ kind: 'events', events: 124 });
    expect(twice).not.toHaveProperty('inputError');
  });
});

describe('kvindex replay routing (KvRouter)', () => {
  it('reports the router settings; on the shipped slice --credit 0 (no overlap credit) hits less than the default', async () => {
    expect(traceRun['routing']).toEqual({ temperature: 0, credit: 1 });
    const [full, blind] = await Promise.all([replayJson([]), replayJson(['--credit', '0'])]);
    expect(blind['routing']).toEqual({ temperature: 0, credit: 0 });
    expect(blind['mismatches']).toBe(0);
    // Measured: 13.4 % vs 8.1 % (the 50-request fixture is too small to tell: 18.5 % vs 20.3 %).
    expect(blind['hitRate'] as number).toBeLessThan(full['hitRate'] as number);
  });

  it('--temperature samples reproducibly: the same run twice gives the same events, unlike temperature 0', async () => {
    const a = await replayJson([TRACE, ...SIM, '--temperature', '1']);
    const b = await replayJson([TRACE, ...SIM, '--temperature', '1']);
    expect(a['routing']).toEqual({ temperature: 1, credit: 1 });
    for (const key of ['events', 'blocksStored', 'blocksRemoved', 'hitRate', 'dumpBytes']) expect(b[key], key).toEqual(a[key]);
    expect([a['blocksStored'], a['hitRate']]).not.toEqual([traceRun['blocksStored'], traceRun['hitRate']]);
  });

  it('exits 2 on a bad --temperature or --credit', async () => {
    for (const [flag, value] of [['--temperature', '-1'], ['--credit', '1.5'], ['--credit', 'x']] as const) {
      const r = await kvindex(['replay', TRACE, `${flag}=${value}`]);
      expect(r.code, `${flag} ${value}`).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`${flag}: expected a number`));
    }
  });
});

describe('kvindex replay pacing', () => {
  it("a gap longer than Node's longest timer is waited, not skipped", async () => {
    // Two requests 3e9 ms apart at --speed 1: the replay must still be waiting after a second.
    // A single sleep of 3e9 ms fired at once (with TimeoutOverflowWarnings) and the run ended.
    const lines = readFileSync(TRACE, 'utf8').trimEnd().split('\n').slice(0, 2);
    const second = JSON.parse(lines[1]!) as { timestamp: number };
    second.timestamp = (JSON.parse(lines[0]!) as { timestamp: number }).timestamp + 3e9;
    const file = join(dir, 'gap.jsonl');
    writeFileSync(file, `${lines[0]!}\n${JSON.stringify(second)}\n`);
    const child = execFile(process.execPath, [CLI, 'replay', file, '--speed', '1', ...SIM]);
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
    const early = await Promise.race([exited.then(() => 'exited'), new Promise((res) => setTimeout(() => res('waiting'), 1500))]);
    child.kill('SIGKILL');
    await exited;
    expect(early).toBe('waiting');
    expect(stderr).not.toContain('TimeoutOverflowWarning');
  });
});

describe('kvindex replay usage', () => {
  it('exits 2 on an unknown option', async () => {
    const r = await kvindex(['replay', TRACE, '--frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown option '--frobnicate'/);
  });

  it('exits 2 on a missing file', async () => {
    const r = await kvindex(['replay', join(dir, 'nope.jsonl')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/cannot read .*nope\.jsonl.*no such file/);
  });

  it('refuses an output that is the input file, leaving the input untouched', async () => {
    const input = join(dir, 'self.jsonl');
    const text = readFileSync(TRACE, 'utf8');
    writeFileSync(input, text);
    for (const flag of ['--record', '--report']) {
      const r = await kvindex(['replay', input, flag, join(dir, '.', 'self.jsonl')]);
      expect(r.code, flag).toBe(2);
      expect(r.stderr, flag).toMatch(new RegExp(`${flag} '.*self\\.jsonl' is the input file`));
      expect(readFileSync(input, 'utf8'), flag).toBe(text);
    }
    const both = await kvindex(['replay', input, '--record', join(dir, 'out.x'), '--report', join(dir, 'out.x')]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--record and --report name the same file/);
  });

  it.skipIf(!existsSync('/dev/full'))('a --record that cannot be written fails with exit 1 after the summary', async () => {
    const r = await kvindex(['replay', TRACE, ...SIM, '--record', '/dev/full', '--json']);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ kind: 'trace', requests: 50 });
    expect(r.stderr).toBe("kvindex replay: cannot write '/dev/full': ENOSPC (the record is incomplete)\n");
    const h = await kvindex(['replay', TRACE, ...SIM, '--report', '/dev/full', '--json']);
    expect(h.code).toBe(1);
    expect(h.stderr).toBe("kvindex replay: cannot write '/dev/full': ENOSPC\n");
  });

  it('exits 2 on a bad option value', async () => {
    const r = await kvindex(['replay', TRACE, '--workers', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--workers: expected an integer/);
  });

  it('prints its help with exit code 0', async () => {
    const r = await kvindex(['replay', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: kvindex replay/);
    expect(r.stdout).toMatch(/--shards N/);
  });
});
