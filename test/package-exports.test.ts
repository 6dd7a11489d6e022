/** The built package resolves as `kvindex` from a dependent project (exports map, ESM). */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvindex-dependent-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('package entry', () => {
  it("import { RadixTree } from 'kvindex' works from a dependent project", () => {
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(root, join(dir, 'node_modules', 'kvindex'), 'dir');
    const script = `
      import { RadixTree, ShardedIndexer, computeBlockHashes, parseRouterEvent, formatRouterEvent } from 'kvindex';
      const text = '{"worker_id":7587889975016782855,"event":{"event_id":44,"data":"cleared"}}';
      const t = new RadixTree();
      console.log(typeof ShardedIndexer.create, computeBlockHashes([1, 2, 3, 4], 4)[0], t.applyEvent(parseRouterEvent(text)), formatRouterEvent(parseRouterEvent(text)) === text);
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' });
    expect(out.trim()).toBe('function 14643705804678351452n ok true');
  });
});
