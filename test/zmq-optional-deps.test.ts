/**
 * Without the optional dependencies: the core and the `kvindex/zmq` entry still load, and
 * starting a source fails with the typed `KVX_ZMQ_DEPENDENCY_MISSING`. A module resolution hook
 * in a child process makes `zeromq` unresolvable, as on an install with `--omit=optional`.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ENTRY = fileURLToPath(new URL('../dist/src/zmq/index.js', import.meta.url));
const CORE = fileURLToPath(new URL('../dist/src/index.js', import.meta.url));

const HOOK = `
export async function resolve(specifier, context, next) {
  if (specifier === 'zeromq' || specifier === '@msgpack/msgpack') {
    const err = new Error('Cannot find package ' + specifier);
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
  return next(specifier, context);
}`;

describe.skipIf(!existsSync(ENTRY))('kvindex/zmq without its optional dependencies', () => {
  it('loads, and a source start throws ZmqError KVX_ZMQ_DEPENDENCY_MISSING naming the package', () => {
    const script = `
      import { register } from 'node:module';
      register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HOOK)}));
      const core = await import(${JSON.stringify(CORE)});
      const zmq = await import(${JSON.stringify(ENTRY)});
      const index = new zmq.EngineIndex({ blockSize: 4 });
      try {
        await zmq.ZmqKvSource.start({ index, workerId: 1n, endpoint: 'tcp://127.0.0.1:1' });
        console.log('started');
      } catch (err) {
        console.log(err.name, err.code, err instanceof core.KvIndexError, /npm install zeromq/.test(err.message));
      }
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(out.trim()).toBe('ZmqError KVX_ZMQ_DEPENDENCY_MISSING true true');
  });
});
