/**
 * The README's routing example, run as written against the build (dist/, `npm test` builds
 * first): every `console.log` line must print what its comment says, so the README cannot rot.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = `${ROOT}dist/src/index.js`;

describe('README routing example', () => {
  it.skipIf(!existsSync(DIST))('prints what its comments say', () => {
    const readme = readFileSync(`${ROOT}README.md`, 'utf8');
    const section = readme.slice(readme.indexOf('<!-- quickstart-library -->'));
    const code = /```ts\n([\s\S]*?)```/.exec(section)![1]!;
    const expected = code
      .split('\n')
      .filter((l) => l.startsWith('console.log('))
      .map((l) => l.slice(l.indexOf('// ') + 3).split('  (')[0]!.trim());
    expect(expected).toHaveLength(2);
    const runnable = code.replace("from 'kvindex'", `from '${pathToFileURL(DIST).href}'`);
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', runnable], { encoding: 'utf8' });
    expect(out.trim().split('\n')).toEqual(expected);
  });
});
