/**
 * `kvindex serve --http` without the optional `zeromq` (an install with --omit=optional): it
 * starts, says so in one WARN line before "ready" naming the package and the command to install
 * it, and /register answers 503 with the stable code KVX_ZMQ_DEPENDENCY_MISSING (it answered 500
 * with no word at start-up). The absence is made by a module resolution hook given to node with
 * --import, as test/zmq-optional-deps.test.ts does in-process.
 */
import { describe, expect, it } from 'vitest';
import { ServeProcess } from './support/serve-process.js';

const HOOK = `export async function resolve(specifier, context, next) {
  if (specifier === 'zeromq') {
    const err = new Error('Cannot find package ' + specifier);
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
  return next(specifier, context);
}`;
const REGISTER = `import { register } from 'node:module'; register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HOOK)}));`;
const WITHOUT_ZEROMQ = ['--import', `data:text/javascript,${encodeURIComponent(REGISTER)}`];

describe('kvindex serve --http without zeromq', () => {
  it('warns once at start-up, before ready, naming the package and the install command', async () => {
    const proc = new ServeProcess(['--http', '127.0.0.1:0'], WITHOUT_ZEROMQ);
    try {
      await proc.waitFor('kvindex serve ready');
      const warns = proc.lines.filter((l) => l.level === 40);
      expect(warns, proc.dump()).toHaveLength(1);
      expect(warns[0]).toMatchObject({ code: 'KVX_ZMQ_DEPENDENCY_MISSING', missing: ['zeromq'], install: 'npm install zeromq' });
      expect(warns[0]!.msg).toContain("'zeromq' is not installed; /register answers 503");
      expect(proc.lines.indexOf(warns[0]!)).toBeLessThan(proc.lines.findIndex((l) => l.msg === 'kvindex serve ready'));
    } finally {
      proc.signal('SIGTERM');
      await proc.exited;
    }
  });

  it('answers /register with 503 and the code, every time, with no error line per request', async () => {
    const proc = new ServeProcess(['--http', '127.0.0.1:0'], WITHOUT_ZEROMQ);
    try {
      const address = (await proc.waitFor('kvindex serve ready'))['address'] as string;
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`${address}/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"instance_id":1,"endpoint":"tcp://127.0.0.1:5557","model_name":"m","block_size":16}',
        });
        expect(res.status).toBe(503);
        const body = (await res.json()) as { error: string; code: string };
        expect(body.code).toBe('KVX_ZMQ_DEPENDENCY_MISSING');
        expect(body.error).toContain("npm install zeromq");
      }
      // The failed registrations left no index behind.
      expect(await (await fetch(`${address}/dump`)).text()).toBe('{}');
    } finally {
      proc.signal('SIGTERM');
      expect(await proc.exited).toBe(0);
    }
    expect(proc.lines.filter((l) => l.level >= 50), proc.dump()).toEqual([]);
  });
});
