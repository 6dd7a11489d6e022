/**
 * docs/library.md's example, run as a user runs it: `node` on the snippet in a project that
 * imports `kvindex` by name (the build, `npm run build`), with its shown output; and again
 * without its `close()`, which must still end by itself with the same output.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const doc = readFileSync(join(ROOT, 'docs/library.md'), 'utf8');
const KILL_MS = 20_000;

function block(name: string, lang: string): string {
  const m = new RegExp(`<!-- ${name} -->\\n\`\`\`${lang}\\n([\\s\\S]*?)\`\`\`\\n<!-- /${name} -->`).exec(doc);
  if (m === null) throw new Error(`docs/library.md: no ${name} block`);
  return m[1]!;
}

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvindex-library-doc-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'kvindex'), 'dir');
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(file: string, source: string): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  writeFileSync(join(dir, file), source);
  return new Promise((resolve) => {
    execFile(process.execPath, [file], { cwd: dir, timeout: KILL_MS, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      const e = err as (Error & { code?: number | string; signal?: string }) | null;
      resolve({ code: e === null ? 0 : typeof e.code === 'number' ? e.code : null, signal: e?.signal ?? null, stdout, stderr });
    });
  });
}

describe('docs/library.md', () => {
  const example = block('library-example', 'js');
  const output = block('library-output', '');

  it('shows the real output of its example', async () => {
    expect(await run('example.mjs', example)).toEqual({ code: 0, signal: null, stdout: output, stderr: '' });
  }, KILL_MS + 5_000);

  it('ends by itself, with the same output, when the example forgets close()', async () => {
    expect(example).toContain('await indexer.close();\n');
    const forgetful = example.replace('await indexer.close();\n', '');
    expect(await run('forgetful.mjs', forgetful)).toEqual({ code: 0, signal: null, stdout: output, stderr: '' });
  }, KILL_MS + 5_000);
});
