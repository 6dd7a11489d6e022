/**
 * A script that uses an indexer with shard threads and forgets `close()` ends by itself, and
 * what it awaits still settles first (src/shard/main/thread-shard.ts, "Lifetime"). Each case is
 * a real `node` process on a small script in a temp dir, importing the build (`npm run build`).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ENTRY = pathToFileURL(fileURLToPath(new URL('../dist/src/index.js', import.meta.url))).href;
/** Generous: a loaded CI machine starts threads slowly. A script that hangs is killed at this. */
const KILL_MS = 20_000;

interface Exit {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvindex-lifetime-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `body` (top-level await allowed) after the prelude; resolves when the process exits. */
function runScript(name: string, body: string): Promise<Exit> {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(file, `import { ShardedIndexer, computeBlockHashes, computeSequenceHashes } from ${JSON.stringify(ENTRY)};
const tokens = Uint32Array.from({ length: 16 }, (_, i) => i + 1);
const local = computeBlockHashes(tokens, 4);
const seq = computeSequenceHashes(local);
const stored = (workerId, eventId) => ({ workerId, event: { eventId, data: { type: 'stored', parentHash: null, blocks: Array.from(local, (t, i) => ({ blockHash: seq[i], tokensHash: t })) } } });
${body}
`);
  return new Promise((resolve) => {
    execFile(process.execPath, [file], { timeout: KILL_MS, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { code?: number | string; signal?: string }) | null;
      resolve({ code: e === null ? 0 : typeof e.code === 'number' ? e.code : null, signal: e?.signal ?? null, stdout, stderr });
    });
  });
}

describe('an indexer with shard threads and no close()', () => {
  it('lets the script end once its awaited lookup answered', async () => {
    const r = await runScript('lookup', `
const ix = await ShardedIndexer.create({ shards: 2, blockSize: 4 });
ix.applyEvent(stored(1n, 0n));
const { scores } = await ix.findMatches(local);
console.log(JSON.stringify([...scores].map(([w, s]) => [String(w), s])));
`);
    expect(r).toEqual({ code: 0, signal: null, stdout: '[["1",4]]\n', stderr: '' });
  }, KILL_MS + 5_000);

  it('keeps the script up for a lookup answered on the reply board (a pending Atomics.waitAsync alone would not)', async () => {
    // With expirationMs every async lookup goes through the shards and the reply board.
    const r = await runScript('board', `
const ix = await ShardedIndexer.create({ shards: 2, blockSize: 4, expirationMs: 60_000 });
ix.applyEvent(stored(1n, 0n));
ix.applyEvent(stored(2n, 0n));
const { scores } = await ix.findMatches(local);
console.log(JSON.stringify([...scores].map(([w, s]) => [String(w), s]).sort()));
`);
    expect(r).toEqual({ code: 0, signal: null, stdout: '[["1",4],["2",4]]\n', stderr: '' });
  }, KILL_MS + 5_000);

  it('keeps the script up for requests and backpressure waits, then ends', async () => {
    const r = await runScript('requests', `
const ix = await ShardedIndexer.create({ shards: 2, blockSize: 4, highWaterEvents: 4 });
for (let w = 1n; w <= 64n; w++) ix.applyEvent(stored(w, 0n));
console.log('needsDrain', ix.needsDrain);
await ix.drained();
await ix.flush();
const stats = await ix.stats();
const dump = await ix.dumpEvents();
console.log('pairs', stats.reduce((n, s) => n + s.pairs, 0), 'events', dump.length);
`);
    expect(r).toEqual({ code: 0, signal: null, stdout: 'needsDrain true\npairs 256 events 64\n', stderr: '' });
  }, KILL_MS + 5_000);

  it('ends a script that only applied events and awaited nothing', async () => {
    const r = await runScript('fire-and-forget', `
const ix = await ShardedIndexer.create({ shards: 2, blockSize: 4 });
for (let w = 1n; w <= 1000n; w++) ix.applyEvent(stored(w, 0n));
console.log('applied');
`);
    expect(r).toEqual({ code: 0, signal: null, stdout: 'applied\n', stderr: '' });
  }, KILL_MS + 5_000);
});
