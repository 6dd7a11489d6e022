/**
 * `kvindex serve --http --peers`: a /register or /unregister on any replica reaches the others
 * (forwarded once, marked so it is not forwarded back), so an engine registers once. Two
 * replicas of the built CLI, each the other's peer, with the token, and a real vLLM-format
 * publisher on loopback.
 */
import { existsSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { MAIN, ServeProcess } from './support/serve-process.js';
import { until, VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';

const ID = 18446744073709551557n;
const auth = { 'content-type': 'application/json', authorization: 'Bearer tok' };

async function workers(url: string): Promise<string> {
  return (await fetch(`${url}/workers`)).text();
}

describe.skipIf(!existsSync(MAIN) || !(await zmqAvailable()))('kvindex serve --http: registration forwarding', () => {
  const procs: ServeProcess[] = [];
  const pubs: VllmPublisher[] = [];
  afterAll(async () => {
    for (const p of procs) p.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.exited));
    for (const p of pubs) p.close();
  });

  it('an engine registered on one replica is listened to by both; unregistered on the other, by neither; never forwarded back', async () => {
    const a = new ServeProcess(['--http', '127.0.0.1:0', '--token', 'tok', '--log-level', 'debug']);
    procs.push(a);
    const aUrl = (await a.waitFor('kvindex serve ready'))['address'] as string;
    const b = new ServeProcess(['--http', '127.0.0.1:0', '--token', 'tok', '--peers', aUrl, '--log-level', 'debug']);
    procs.push(b);
    const bUrl = (await b.waitFor('kvindex serve ready'))['address'] as string;
    await b.waitFor('recovered from a peer: ready');
    expect((await fetch(`${aUrl}/register_peer`, { method: 'POST', headers: auth, body: JSON.stringify({ url: bUrl }) })).status).toBe(201);

    const pub = await VllmPublisher.start({ replay: 'topic' });
    pubs.push(pub);
    const reg = `{"instance_id":${ID},"endpoint":"${pub.endpoint}","replay_endpoint":"${pub.replayEndpoint}","model_name":"m","block_size":2}`;
    expect((await fetch(`${aUrl}/register`, { method: 'POST', headers: auth, body: reg })).status).toBe(201);
    await until(() => a.lines.some((l) => l.msg === 'registration forwarded'), 15_000, 'A forwarded to B');
    // Reached B (by A's forward): B lists the engine too, and both index what it publishes.
    let text = '';
    for (const end = Date.now() + 15_000; Date.now() < end && !text.includes(`"instance_id":${ID}`); await new Promise((r) => setTimeout(r, 20))) text = await workers(bUrl);
    expect(text).toContain(`"instance_id":${ID}`);
    await pub.subscribed();
    await pub.publish([{ stored: { hashes: [1n, 2n], tokens: [5, 6, 7, 8], blockSize: 2 } }]);
    const query = '{"token_ids":[5,6,7,8],"model_name":"m"}';
    for (const url of [aUrl, bUrl]) {
      let answer = '';
      for (const end = Date.now() + 15_000; Date.now() < end && !answer.includes('"0":4'); await new Promise((r) => setTimeout(r, 20))) {
        answer = await (await fetch(`${url}/query`, { method: 'POST', headers: auth, body: query })).text();
      }
      expect(answer, url).toBe(`{"scores":{"${ID}":{"0":4}},"frequencies":[],"tree_sizes":{"${ID}":{"0":2}}}`);
    }
    // Not forwarded back: A logged its forward, B none (it got it forwarded).
    await new Promise((r) => setTimeout(r, 300));
    expect(a.lines.filter((l) => l.msg === 'registration forwarded')).toHaveLength(1);
    expect(b.lines.filter((l) => l.msg === 'registration forwarded')).toHaveLength(0);

    // The engine registers again on B (a retry): 201, one listener each, still.
    expect((await fetch(`${bUrl}/register`, { method: 'POST', headers: auth, body: reg })).status).toBe(201);
    await until(() => b.lines.filter((l) => l.msg === 'registration forwarded').length === 1, 15_000, 'B forwarded the retry');
    expect(a.lines.some((l) => l.msg === 'a peer refused a forwarded registration' || l.msg.startsWith('could not forward'))).toBe(false);
    expect(b.lines.some((l) => l.msg === 'a peer refused a forwarded registration' || l.msg.startsWith('could not forward'))).toBe(false);
    expect((await workers(aUrl)).match(/"instance_id":/g)).toHaveLength(1);

    // Unregistered on B: gone from both.
    const unreg = `{"instance_id":${ID},"model_name":"m"}`;
    expect((await fetch(`${bUrl}/unregister`, { method: 'POST', headers: auth, body: unreg })).status).toBe(200);
    for (const end = Date.now() + 15_000; Date.now() < end && (await workers(aUrl)) !== '[]'; ) await new Promise((r) => setTimeout(r, 20));
    expect(await workers(aUrl)).toBe('[]');
    expect(await workers(bUrl)).toBe('[]');
    expect((await fetch(`${aUrl}/query`, { method: 'POST', headers: auth, body: query })).status).toBe(404);
  }, 60_000);

  it('a request without the token is neither applied nor forwarded', async () => {
    const a = new ServeProcess(['--http', '127.0.0.1:0', '--token', 'tok', '--peers', 'http://127.0.0.1:9', '--log-level', 'debug']);
    procs.push(a);
    const aUrl = (await a.waitFor('kvindex serve ready'))['address'] as string;
    const res = await fetch(`${aUrl}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"instance_id":1,"endpoint":"tcp://127.0.0.1:9","model_name":"m","block_size":2}` });
    expect(res.status).toBe(401);
    await new Promise((r) => setTimeout(r, 200));
    expect(a.lines.some((l) => /forward/.test(l.msg))).toBe(false);
  }, 30_000);
});
