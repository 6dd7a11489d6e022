/**
 * A clean `npm ci` of the checkout warns about nothing. It printed `EBADENGINE cookie@2.0.2
 * requires node >=22` on Node 20: fastify -> light-my-request 6.8 -> cookie ^2, which package.json
 * "overrides" now hold at cookie 1.1.1 (same `stringifySetCookie({ name, value })`, the one call
 * light-my-request makes; docs/operations.md). A dry run in a copy of package.json and the lock
 * resolves and checks engines as the real install does, in about 1 s, without touching
 * node_modules. `--ignore-scripts` keeps it from running our own `prepare` (a build).
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvindex-ci-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('npm ci of the checkout', () => {
  it('prints no warning (no EBADENGINE on the Node that runs the tests)', async () => {
    for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(ROOT, f), join(dir, f));
    const { stdout, stderr } = await promisify(execFile)('npm', ['ci', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir });
    expect(stdout).toMatch(/^add fastify /m);
    // Lines, not the whole stream: an update notice ("npm notice") is not ours to silence.
    expect(stderr.split('\n').filter((l) => /\bwarn\b/i.test(l))).toEqual([]);
  });
});
