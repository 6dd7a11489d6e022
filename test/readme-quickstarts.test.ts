/**
 * The README's quickstarts, run as written against the build (dist/, `npm test` builds first),
 * so the front door cannot rot:
 * - the library one runs as a module; every `console.log` must print what its comment says;
 * - the standalone one starts `kvindex serve` with the README's flags, registers a real
 *   vLLM-format ZMQ publisher with the README's body, and the README's query must answer exactly
 *   the README's line once the engine stored the prompt's blocks;
 * - the gateway one starts `kvindex gateway` with the README's flags over the README's
 *   engines.json, its engines two fake OpenAI engines publishing real vLLM KV events, and the
 *   README's request must answer with the headers and the stream end the README shows;
 * - the NATS one starts a real nats-server and `kvindex serve` with the README's flags and runs
 *   the README's TypeScript.
 * Only addresses change: the README's fixed ports become free loopback ports.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { NatsServer, freePort, natsServerInstalled } from './support/nats-server.js';
import { FakeEngine } from './support/fake-engine.js';
import { ServeProcess } from './support/serve-process.js';
import { VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = `${ROOT}dist/src/`;
const README = readFileSync(`${ROOT}README.md`, 'utf8');
const run = promisify(execFile);

/** The text between `<!-- name -->` and `<!-- /name -->`. */
function section(name: string): string {
  const m = new RegExp(`<!-- ${name} -->\\n([\\s\\S]*?)<!-- /${name} -->`).exec(README);
  if (m === null) throw new Error(`README has no ${name} section`);
  return m[1]!;
}

/** The code blocks of a section, by language. */
function blocks(text: string, lang: string): string[] {
  return [...text.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);
}

/** What each `console.log(...)` line's comment says it prints. */
function expectedLogs(code: string): string[] {
  return code
    .split('\n')
    .filter((l) => l.startsWith('console.log('))
    .map((l) => l.slice(l.indexOf('// ') + 3).split('  (')[0]!.trim());
}

/** Runs TypeScript-free module code with `kvindex` imports pointed at the build. */
async function runModule(code: string): Promise<string[]> {
  const runnable = code
    .replace(/from 'kvindex'/g, `from '${pathToFileURL(`${DIST}index.js`).href}'`)
    .replace(/from 'kvindex\/(\w+)'/g, (_, sub: string) => `from '${pathToFileURL(`${DIST}${sub}/index.js`).href}'`)
    // The README's snippets are TypeScript only through non-null assertions.
    .replace(/\]!/g, ']');
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', runnable], { encoding: 'utf8', timeout: 30_000 });
  return stdout.trim().split('\n');
}

/** The `kvindex ...` arguments of a `npx kvindex ... &` line of a shell block. */
function cliArgs(shell: string): string[] {
  const line = shell.split('\n').find((l) => l.startsWith('npx kvindex '));
  if (line === undefined) throw new Error('no npx kvindex line');
  return line.replace(/^npx kvindex /, '').replace(/ &$/, '').split(/\s+/);
}

/** The JSON body (`-d '...'`) and the answer comment (`# ...`) after each curl of a shell block. */
function curls(shell: string): Array<{ path: string; body: string; answer: string }> {
  const out: Array<{ path: string; body: string; answer: string }> = [];
  const re = /curl -s -XPOST [\d.]+:\d+(\/\w+)[^\n]*\\\n\s+-d '([^']*)'\n# ([^\n]*)/g;
  for (const m of shell.matchAll(re)) out.push({ path: m[1]!, body: m[2]!, answer: m[3]! });
  return out;
}

const built = existsSync(`${DIST}index.js`);
const zmq = await zmqAvailable();

describe.skipIf(!built)('README quickstarts', () => {
  it('library: prints what its comments say', async () => {
    const [code] = blocks(section('quickstart-library'), 'ts');
    const expected = expectedLogs(code!);
    expect(expected.length).toBeGreaterThanOrEqual(2);
    expect(await runModule(code!)).toEqual(expected);
  });

  it.skipIf(!zmq)('standalone indexer: the README commands answer as shown against a vLLM publisher', async () => {
    const [shell] = blocks(section('quickstart-standalone'), 'sh');
    const args = cliArgs(shell!);
    expect(args.slice(0, 2)).toEqual(['serve', '--http']);
    const port = await freePort();
    const server = new ServeProcess(args.slice(1).map((a) => a.replace(/:8090$/, `:${port}`)));
    const pub = await VllmPublisher.start({ replay: 'topic' });
    try {
      await server.waitFor('kvindex serve ready');
      const [register, query] = curls(shell!);
      expect(register!.path).toBe('/register');
      expect(query!.path).toBe('/query');
      const post = async (path: string, body: string): Promise<string> =>
        (await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } })).text();
      const body = register!.body.replace('tcp://127.0.0.1:5557', pub.endpoint).replace('tcp://127.0.0.1:5558', pub.replayEndpoint);
      expect(body).not.toBe(register!.body);
      expect(await post('/register', body)).toBe(register!.answer);
      await pub.subscribed();
      // The engine stores the prompt's first two blocks of 16 (what the README's answer says).
      const tokens = (JSON.parse(query!.body) as { token_ids: number[] }).token_ids;
      await pub.publish([{ stored: { hashes: [101n, 102n], tokens: tokens.slice(0, 32), blockSize: 16 } }]);
      let answer = '';
      for (const end = Date.now() + 15_000; Date.now() < end && answer !== query!.answer; await new Promise((r) => setTimeout(r, 20))) {
        answer = await post('/query', query!.body);
      }
      expect(answer).toBe(query!.answer);
    } finally {
      pub.close();
      server.signal('SIGTERM');
    }
    expect(await server.exited).toBe(0);
  });

  it.skipIf(!zmq)('gateway: the README engines.json, command and request answer as shown', async () => {
    const text = section('quickstart-gateway');
    const [json] = blocks(text, 'json');
    const [shell] = blocks(text, 'sh');
    const entries = JSON.parse(json!) as Array<{ endpoint: string; url: string; model_name: string; block_size: number }>;
    expect(entries).toHaveLength(2);
    const engines = await Promise.all(entries.map((e) => FakeEngine.start({ model: e.model_name, blockSize: e.block_size })));
    const dir = mkdtempSync(join(tmpdir(), 'kvindex-readme-'));
    const file = join(dir, 'engines.json');
    let text2 = json!;
    entries.forEach((e, i) => (text2 = text2.replace(e.endpoint, engines[i]!.endpoint).replace(e.url, engines[i]!.url)));
    writeFileSync(file, text2);
    const args = cliArgs(shell!);
    expect(args.slice(0, 5)).toEqual(['gateway', '--http', '127.0.0.1:8080', '--engines', 'engines.json']);
    const port = await freePort();
    const server = new ServeProcess(args.slice(1).map((a) => a.replace(/:8080$/, `:${port}`).replace(/^engines\.json$/, file)), [], 'gateway');
    try {
      await server.waitFor('kvindex gateway ready');
      const m = /-d '([^']*)'\n((?:# [^\n]*\n)+)/.exec(shell!)!;
      const shown = m[2]!.split('\n').filter((l) => l !== '').map((l) => l.slice(2));
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', body: m[1]!, headers: { 'content-type': 'application/json' } });
      expect(`HTTP/1.1 ${res.status} ${res.statusText}`).toBe(shown[0]);
      for (const line of shown.filter((l) => l.startsWith('x-kvindex-'))) {
        const [name, value] = line.split(': ') as [string, string];
        // Which of two idle engines takes the first request is a tie, broken at random.
        if (name === 'x-kvindex-worker') expect(['1', '2']).toContain(res.headers.get(name));
        else expect(res.headers.get(name)).toBe(value);
      }
      const body = await res.text();
      expect(body.trimEnd().endsWith(shown.at(-1)!)).toBe(true);
    } finally {
      server.signal('SIGTERM');
      await server.exited;
      await Promise.all(engines.map((e) => e.stop()));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!natsServerInstalled())('NATS: the README commands and code answer as shown', async () => {
    const text = section('quickstart-nats');
    const [shell] = blocks(text, 'sh');
    const [code] = blocks(text, 'ts');
    expect(shell).toMatch(/^nats-server -js -a 127\.0\.0\.1 -p 4222 &$/m);
    const nats = await NatsServer.start();
    const args = cliArgs(shell!).map((a) => a.replace('nats://127.0.0.1:4222', nats.url));
    expect(args.slice(0, 3)).toEqual(['serve', '--nats', nats.url]);
    const server = new ServeProcess(args.slice(1));
    try {
      await server.waitFor('kvindex serve ready');
      const expected = expectedLogs(code!);
      expect(expected.length).toBeGreaterThanOrEqual(1);
      expect(await runModule(code!.replaceAll('nats://127.0.0.1:4222', nats.url))).toEqual(expected);
    } finally {
      server.signal('SIGTERM');
      await server.exited;
      await nats.stop();
    }
  });
});
