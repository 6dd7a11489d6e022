/**
 * `kvindex serve --http --token`: the routes that answer 401 without the bearer token are
 * exactly the ones its help names (the help said /register and /unregister, but /route,
 * /mark_prefill and /free needed the token too). The built CLI on a loopback port.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { MAIN, ServeProcess } from './support/serve-process.js';

/** Every route of the standalone indexer API (docs/http-api.md), with a method. */
const ROUTES: Array<[string, string]> = [
  ['POST', '/register'], ['POST', '/unregister'], ['GET', '/workers'], ['POST', '/query'], ['POST', '/query_by_hash'],
  ['GET', '/dump'], ['GET', '/health'], ['POST', '/route'], ['POST', '/mark_prefill'], ['POST', '/free'],
  ['POST', '/register_peer'], ['POST', '/deregister_peer'], ['GET', '/peers'],
];

describe('kvindex serve --http --token', () => {
  it('the help names exactly the routes that answer 401 without the token', async () => {
    const help = spawnSync(process.execPath, [MAIN, 'serve', '--http', '0', '--help'], { encoding: 'utf8' });
    const line = /--token <t>\s+bearer token required by ([^\n]*)/.exec(help.stdout);
    expect(line, help.stdout).not.toBeNull();
    const named = line![1]!.trim().split(/\s+/).sort();

    const proc = new ServeProcess(['--http', '127.0.0.1:0', '--token', 'secret-token']);
    const guarded: string[] = [];
    try {
      const address = (await proc.waitFor('kvindex serve ready'))['address'] as string;
      for (const [method, path] of ROUTES) {
        const res = await fetch(address + path, { method, ...(method === 'POST' ? { headers: { 'content-type': 'application/json' }, body: '{}' } : {}) });
        if (res.status === 401) guarded.push(path);
      }
    } finally {
      proc.signal('SIGTERM');
      await proc.exited;
    }
    expect(guarded.sort()).toEqual(['/deregister_peer', '/free', '/mark_prefill', '/register', '/register_peer', '/route', '/unregister']);
    expect(named).toEqual(guarded);
    expect(proc.dump()).not.toContain('secret-token');
  });
});
