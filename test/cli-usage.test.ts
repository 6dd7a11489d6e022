/**
 * The built CLI's top level (`npm test` builds first): no command is a usage error (exit 2, the
 * usage on stderr, nothing on stdout), as an unknown command is; `--help` prints the usage on
 * stdout and exits 0.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
const cli = (args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });

describe('kvindex without a command', () => {
  it('exits 2 with the usage on stderr and nothing on stdout', () => {
    const r = cli([]);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^kvindex: no command given\nusage: kvindex <command>/);
  });

  it('exits 2 for an unknown command too', () => {
    const r = cli(['serv']);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^kvindex: unknown command 'serv'\nusage: kvindex <command>/);
  });

  it.each(['--help', '-h', 'help'])('%s prints the usage on stdout and exits 0', (flag) => {
    const r = cli([flag]);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: kvindex <command>/);
    expect(r.stderr).toBe('');
  });
});
