/**
 * The committed src/hash/wasm/xxh3.wasm is what its source builds to: the AssemblyScript
 * compiler (a pinned devDependency) rebuilds it with the options in asconfig.json, and the
 * bytes must be identical. After editing xxh3.as.ts, run `npm run build:wasm` and commit both.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvindex-wasm-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('xxh3.wasm', () => {
  it('is byte-identical to a rebuild from src/hash/wasm/xxh3.as.ts', () => {
    const asc = createRequire(import.meta.url).resolve('assemblyscript/bin/asc.js');
    const out = join(dir, 'xxh3.wasm');
    execFileSync(process.execPath, [asc, '--config', 'src/hash/wasm/asconfig.json', '-o', out], { cwd: ROOT, stdio: 'pipe' });
    const committed = readFileSync(join(ROOT, 'src/hash/wasm/xxh3.wasm'));
    const rebuilt = readFileSync(out);
    expect(rebuilt.length, 'rebuilt size (run `npm run build:wasm` and commit xxh3.wasm)').toBe(committed.length);
    expect(rebuilt.equals(committed), 'rebuilt bytes (run `npm run build:wasm` and commit xxh3.wasm)').toBe(true);
  });

  it('imports nothing and exports its memory and the four hashing calls', () => {
    const api = (globalThis as unknown as { WebAssembly: {
      Module: (new (bytes: Uint8Array) => object) & {
        imports(m: object): unknown[];
        exports(m: object): Array<{ name: string; kind: string }>;
      };
    } }).WebAssembly;
    const module = new api.Module(readFileSync(join(ROOT, 'src/hash/wasm/xxh3.wasm')));
    expect(api.Module.imports(module)).toEqual([]);
    expect(api.Module.exports(module).map((e) => `${e.kind} ${e.name}`).sort()).toEqual([
      'function hashBlocks', 'function hashBytes', 'function heapBase', 'function sequenceHashes', 'memory memory',
    ]);
  });
});
