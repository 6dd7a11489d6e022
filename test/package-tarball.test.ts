/**
 * The package as a user gets it: the repository is copied without dist/ (as a fresh clone is),
 * `npm pack` builds and packs it there, and the tarball is installed into an empty project with
 * `npm install <tarball>`. Every entry of package.json "exports" is imported by package name,
 * a shard thread is started (dist/workers ships), and the installed `kvindex` bin answers
 * `--version` and `--help`. The pack runs in a copy because `prepare` empties dist/, which the
 * other test files are reading meanwhile. The install takes the registry's packages from npm's
 * cache when `npm ci` filled it (`--prefer-offline`). Measured on 2 busy cores (load 8.6): pack
 * 13 s (the build is most of it) + install 11 s.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string; exports: Record<string, unknown> };
/** Not in a fresh clone (.gitignore), or not the package's business. */
const NOT_CLONED = new Set(['node_modules', 'dist', '.git', 'test-artifacts']);

let work = '';
let packed: string[] = [];
let app = '';
let installed = '';

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'kvindex-tarball-'));
  const clone = join(work, 'clone');
  cpSync(ROOT, clone, { recursive: true, filter: (src) => !NOT_CLONED.has(relative(ROOT, src)) && !src.endsWith('.tgz') });
  // The build tools (tsc) of the checkout; a fresh clone would `npm ci` them.
  symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'), 'dir');
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], { cwd: clone, maxBuffer: 16 << 20 });
  const report = JSON.parse(stdout.slice(stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
  packed = report[0]!.files.map((f) => f.path);
  app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), '{"name":"app","private":true,"type":"module"}\n');
  await run('npm', ['install', join(work, report[0]!.filename), '--no-audit', '--no-fund', '--prefer-offline'], { cwd: app, maxBuffer: 16 << 20 });
  installed = join(app, 'node_modules', PKG.name);
}, 180_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the packed tarball, installed into an empty project', () => {
  it('ships the built CLI, library, shard worker and hash wasm', () => {
    for (const f of ['dist/src/cli/main.js', 'dist/src/index.js', 'dist/src/index.d.ts', 'dist/workers/shard.js', 'dist/src/hash/wasm/xxh3.wasm', 'LICENSE']) {
      expect(packed, f).toContain(f);
    }
  });

  it('ships no benchmarks, no tests and no source maps, and no file names a map', () => {
    expect(packed.filter((f) => /^dist\/(bench|test)\//.test(f) || f.endsWith('.map'))).toEqual([]);
    const js = readdirSync(join(installed, 'dist'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js'));
    expect(js.length).toBeGreaterThan(50);
    expect(js.filter((f) => readFileSync(join(installed, 'dist', f), 'utf8').includes('sourceMappingURL'))).toEqual([]);
  });

  it('every entry of "exports" imports by package name, and a shard thread starts', async () => {
    const entries = Object.keys(PKG.exports).map((k) => (k === '.' ? PKG.name : `${PKG.name}/${k.slice(2)}`));
    const script = `
      const loaded = [];
      for (const e of ${JSON.stringify(entries)}) loaded.push(e + ':' + Object.keys(await import(e)).length);
      const { ShardedIndexer, computeBlockHashes, computeSequenceHashes } = await import('kvindex');
      const indexer = await ShardedIndexer.create({ shards: 1, blockSize: 4 });
      const local = computeBlockHashes([1, 2, 3, 4], 4);
      const blocks = [{ blockHash: computeSequenceHashes(local)[0], tokensHash: local[0] }];
      indexer.applyEvent({ workerId: 7n, event: { eventId: 1n, data: { type: 'stored', parentHash: null, blocks } } });
      const scores = Object.fromEntries([...(await indexer.findMatchesForTokens([1, 2, 3, 4])).scores].map(([w, n]) => [String(w), n]));
      await indexer.close();
      console.log(JSON.stringify({ loaded, scores }));
    `;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app });
    const out = JSON.parse(stdout) as { loaded: string[]; scores: Record<string, number> };
    expect(out.loaded.map((l) => l.split(':')[0])).toEqual(entries);
    expect(out.loaded.every((l) => Number(l.split(':')[1]) > 0)).toBe(true);
    expect(out.scores).toEqual({ '7': 1 });
  });

  it('the installed bin prints the version and the usage, exit 0', async () => {
    const bin = join(app, 'node_modules/.bin/kvindex');
    expect((await run(bin, ['--version'], { cwd: app })).stdout).toBe(`${PKG.version}\n`);
    const help = await run(bin, ['--help'], { cwd: app });
    expect(help.stdout).toMatch(/^usage: kvindex <command>/);
    expect(help.stderr).toBe('');
  });
});
