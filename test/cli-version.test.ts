/** `kvindex --version` of the built CLI (`npm test` builds first) prints package.json's version. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

describe('kvindex --version', () => {
  it.each(['--version', '-V'])('%s prints the version of package.json', (flag) => {
    // Run from another directory: the version must come from the package, not the cwd.
    const out = execFileSync(process.execPath, [CLI, flag], { cwd: join(ROOT, 'test'), encoding: 'utf8' });
    expect(out).toBe(`${VERSION}\n`);
  });
});
