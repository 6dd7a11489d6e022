/**
 * `kvindex serve --http` as a process (the build in dist/): `--ready-strict` makes `/ready` on the
 * API port answer 503 naming a rank whose endpoint nothing listens at, and `--readmit-after`
 * brings a worker back into scores after an unreplayable gap; both flags are checked.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { MAIN, ServeProcess } from './support/serve-process.js';
import { closedEndpoint, VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';

const W = 18_446_744_073_709_551_615n;
const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

async function serve(args: string[]): Promise<{ url: string; proc: ServeProcess }> {
  const proc = new ServeProcess(['--http', '0', ...args]);
  open.push({ close: async () => { proc.signal('SIGTERM'); await proc.exited; } });
  const ready = await proc.waitFor('kvindex serve ready');
  return { url: ready['address'] as string, proc };
}

const post = (url: string, path: string, body: string): Promise<Response> => fetch(url + path, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
const register = (url: string, endpoint: string, replay: string | null = null): Promise<Response> =>
  post(url, '/register', `{"instance_id":${W},"endpoint":"${endpoint}","model_name":"m","block_size":2${replay === null ? '' : `,"replay_endpoint":"${replay}"`}}`);

describe.skipIf(!existsSync(MAIN) || !(await zmqAvailable()))('kvindex serve --http: rank states', () => {
  it('--ready-strict: /ready is 503 naming a rank nothing listens for, 200 once its engine is up', async () => {
    const { url } = await serve(['--ready-strict']);
    expect((await fetch(`${url}/ready`)).status).toBe(200); // nothing registered
    const endpoint = await closedEndpoint();
    expect((await register(url, endpoint)).status).toBe(201);
    const res = await fetch(`${url}/ready`);
    expect(res.status).toBe(503);
    const text = await res.text();
    expect(text).toContain(`"instance_id":"${W}"`);
    expect(JSON.parse(text)).toMatchObject({ ready: false, not_active: [{ endpoint, state: 'connecting', reason: 'never_connected' }] });
    const pub = await VllmPublisher.start({ endpoint });
    open.push(pub);
    let status = 0;
    for (const end = Date.now() + 15_000; status !== 200 && Date.now() < end; await new Promise((r) => setTimeout(r, 50))) status = (await fetch(`${url}/ready`)).status;
    expect(status).toBe(200);
  });

  // 3 s, not 1: the checks that it is out (a /workers and a /query to the child process) must
  // come before the readmission, and a loaded host can delay them by a second.
  it('--readmit-after 3: an excluded worker scores again 3 s after an unreplayable gap', async () => {
    const { url, proc } = await serve(['--readmit-after', '3']);
    const pub = await VllmPublisher.start();
    open.push(pub);
    expect((await register(url, pub.endpoint, await closedEndpoint())).status).toBe(201);
    await pub.subscribed();
    await pub.publish([{ stored: { hashes: [1n], tokens: [1, 2], blockSize: 2 } }]);
    pub.drop([{ stored: { hashes: [2n], tokens: [3, 4], blockSize: 2 } }]);
    await pub.publish([{ stored: { hashes: [3n], tokens: [5, 6], blockSize: 2 } }]);
    await proc.waitFor("unreplayable seq gap: clearing the worker's ranks and keeping them out of scores");
    const workers = await (await fetch(`${url}/workers`)).text();
    expect(workers).toMatch(/"state":"excluded","reason":"unreplayable_gap","since":"[^"]+","readmit_at":"[^"]+"/);
    const query = async (): Promise<string> => (await post(url, '/query', '{"token_ids":[5,6],"model_name":"m"}')).text();
    expect(await query()).toBe('{"scores":{},"frequencies":[],"tree_sizes":{}}');
    const line = await proc.waitFor('readmitting the worker to scores after an unreplayable gap: blocks it stored before the gap (and stores extending them) stay unscored until the engine stores them again');
    expect(line).toMatchObject({ model: 'm', tenant: 'default', readmitAfterMs: 3000 });
    expect(await query()).toBe(`{"scores":{"${W}":{"0":2}},"frequencies":[],"tree_sizes":{"${W}":{"0":1}}}`);
  });

  it.each([['--readmit-after', 'soon'], ['--readmit-after', '-1'], ['--readmit-after', '99999999']])('rejects %s %s with exit 2', (flag, v) => {
    const r = spawnSync(process.execPath, [MAIN, 'serve', '--http', '0', flag, v], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--readmit-after');
  });
});
