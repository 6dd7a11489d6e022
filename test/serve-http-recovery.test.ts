/**
 * `kvindex serve --http --peers`: a replica recovers from a peer before it is ready, exactly.
 * Two replicas of the built CLI and two real vLLM-format publishers (with replay rings) on
 * loopback: while the engines publish, replica B starts from replica A's dump, and once both
 * applied the same engine seqs every /query answer of B equals A's. Also: a peer that breaks
 * off its dump is skipped; with no whole dump anywhere the replica stays 503 KVX_RECOVERING;
 * peers that all refuse the connection mean starting empty; a Dynamo-style dump (no positions)
 * is applied and marked approximate. Three replicas: one killed with SIGKILL while the engines
 * publish and restarted with `--peers` answers 503 until recovered, then as the others. The
 * binary dump (kvindex's, the default between replicas) cut short or corrupted: a typed error,
 * the next peer.
 */
import { createServer, type Server } from 'node:http';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAIN, ServeProcess } from './support/serve-process.js';
import { until, VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';
import { unitRandom } from './support/rng.js';
import { parse, stringify } from 'lossless-json';
import { DUMP_BINARY_TYPE, readBinaryDump } from '../src/http/dump-binary.js';
import { readDump } from '../src/http/dump-read.js';
import { SnapshotDecodeError } from '../src/errors.js';
import { EngineIndex } from '../src/zmq/engine-index.js';
import { freePort as closedPort } from './support/nats-server.js';

const BS = 4;
const MODEL = 'm';
const IDS = [18446744073709551557n, 9007199254740993n];

async function listen(s: Server): Promise<string> {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

const post = (address: string, path: string, body: unknown): Promise<Response> =>
  fetch(address + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v)) });

/** A registration body with the u64 id exact (JSON.stringify cannot write a bigint). */
function register(address: string, id: bigint, pub: VllmPublisher): Promise<Response> {
  const body = `{"instance_id":${id},"endpoint":"${pub.endpoint}","replay_endpoint":"${pub.replayEndpoint}","model_name":"${MODEL}","block_size":${BS}}`;
  return fetch(`${address}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
}

/** The seq each listener of a replica's dump reflects, by instance id (as text: u64). */
async function seqs(address: string): Promise<Map<string, string | null>> {
  const text = await (await fetch(`${address}/dump`)).text();
  const out = new Map<string, string | null>();
  for (const m of text.matchAll(/\{"instance_id":(\d+),"dp_rank":\d+,"endpoint":"[^"]*","replay_endpoint":(?:"[^"]*"|null),"seq":(\d+|null)/g)) out.set(m[1]!, m[2] === 'null' ? null : m[2]!);
  return out;
}

/** Prompts: 24 token ranges of 2 to 10 blocks; engine e stores some, removes some of their tails. */
const PROMPTS = Array.from({ length: 24 }, (_, k) => Array.from({ length: BS * (2 + (k % 9)) }, (_, i) => 1000 * (k + 1) + i));

/** One random batch of engine `e`: store a prompt's prefix, or remove a stored prompt's tail. */
function batch(rng: () => number, e: number, held: Map<number, number>): Parameters<VllmPublisher['publish']>[0] {
  const k = Math.floor(rng() * PROMPTS.length);
  const p = PROMPTS[k]!;
  const blocks = p.length / BS;
  const hash = (i: number): bigint => BigInt(e + 1) * 1_000_000_007n + BigInt(k) * 1000n + BigInt(i) + 1n;
  const have = held.get(k) ?? 0;
  if (have > 1 && rng() < 0.3) {
    const keep = 1 + Math.floor(rng() * (have - 1));
    held.set(k, keep);
    return [{ removed: Array.from({ length: have - keep }, (_, j) => hash(keep + j)) }];
  }
  const n = Math.max(have + 1, Math.min(blocks, 1 + Math.floor(rng() * blocks)));
  if (n <= have || n > blocks) return [];
  held.set(k, n);
  return [{ stored: { hashes: Array.from({ length: n - have }, (_, j) => hash(have + j)), parent: have === 0 ? null : hash(have - 1), tokens: p.slice(have * BS, n * BS), blockSize: BS } }];
}

describe.skipIf(!existsSync(MAIN) || !(await zmqAvailable()))('kvindex serve --http --peers: recovery', () => {
  let pubs: VllmPublisher[] = [];
  let a: ServeProcess;
  let aUrl: string;
  const held = [new Map<number, number>(), new Map<number, number>()];
  const rng = unitRandom(38);
  const procs: ServeProcess[] = [];
  /** The replica the first test starts from A (the kill -9 test kills it). */
  let replicaB: ServeProcess | null = null;
  const servers: Server[] = [];

  const start = (args: string[]): ServeProcess => {
    const p = new ServeProcess(['--http', '127.0.0.1:0', ...args]);
    procs.push(p);
    return p;
  };
  const publishRound = async (): Promise<void> => {
    for (let e = 0; e < pubs.length; e++) await pubs[e]!.publish(batch(rng, e, held[e]!));
  };
  /** Until `url` reflects every seq the engines published. */
  const caughtUp = (url: string): Promise<void> => {
    let ok = false;
    const check = async (): Promise<void> => {
      const s = await seqs(url);
      ok = IDS.every((id, e) => s.get(String(id)) === String(pubs[e]!.seq - 1n));
    };
    return (async () => {
      const end = Date.now() + 20_000;
      for (await check(); !ok; await check()) {
        if (Date.now() > end) throw new Error(`${url} did not catch up: ${JSON.stringify([...(await seqs(url))])}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
  };

  beforeAll(async () => {
    pubs = [await VllmPublisher.start({ replay: 'topic' }), await VllmPublisher.start({ replay: 'topic' })];
    a = start([]);
    aUrl = (await a.waitFor('kvindex serve ready'))['address'] as string;
    for (let e = 0; e < 2; e++) expect((await register(aUrl, IDS[e]!, pubs[e]!)).status).toBe(201);
    await Promise.all(pubs.map((p) => p.subscribed()));
    for (let i = 0; i < 60; i++) await publishRound();
    await caughtUp(aUrl);
  }, 60_000);

  afterAll(async () => {
    for (const p of procs) p.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.exited));
    for (const s of servers) s.close();
    for (const p of pubs) p.close();
  });

  it('a replica started from a peer while the engines publish answers every /query as the peer does', async () => {
    let publishing = true;
    const background = (async () => {
      while (publishing) {
        await publishRound();
        await new Promise((r) => setTimeout(r, 3));
      }
    })();
    const b = start(['--peers', aUrl, '--metrics', '127.0.0.1:0']);
    replicaB = b;
    const bUrl = (await b.waitFor('kvindex serve ready'))['address'] as string;
    const recovered = await b.waitFor('recovered from a peer: ready');
    expect(recovered).toMatchObject({ peer: aUrl, exact: true, dump: 'binary' });
    await new Promise((r) => setTimeout(r, 100));
    publishing = false;
    await background;
    // One more batch each: a batch published between B's dump and its subscription is replayed
    // when the next live one shows the gap.
    await publishRound();
    await caughtUp(aUrl);
    await caughtUp(bUrl);
    let nonzero = 0;
    for (const p of PROMPTS) {
      for (const cut of [p.length, p.length - BS, BS + 1]) {
        const body = { token_ids: p.slice(0, cut), model_name: MODEL };
        const [ra, rb] = await Promise.all([post(aUrl, '/query', body), post(bUrl, '/query', body)]);
        // The same scores and tree sizes (keys are strings, values small: JSON.parse is exact
        // here); the order of workers in the text follows each tree's insertion order.
        const ta = await ra.text();
        expect(JSON.parse(await rb.text()), JSON.stringify(body)).toEqual(JSON.parse(ta));
        if (ta.includes('"scores":{"')) nonzero++;
      }
    }
    expect(nonzero).toBeGreaterThan(10);
    // B never lost a batch: what the engines published between A's dump and B's subscription
    // came from their replay rings, and no gap was unreplayable.
    const metricsUrl = (await b.waitFor('metrics, health and readiness served over HTTP'))['metricsUrl'] as string;
    const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
    expect(metrics).not.toMatch(/kvindex_zmq_gaps_total\{[^}]*outcome="unreplayable"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/kvindex_zmq_gaps_total\{[^}]*outcome="replayed"[^}]*\} [1-9]/);
    const workers = (await (await fetch(`${bUrl}/workers`)).text());
    expect(workers).toContain(`"recovered_from":${JSON.stringify(aUrl)},"approximate":false`);
    expect(workers).toContain(`"instance_id":${IDS[0]}`);
    expect((await fetch(`${bUrl}/ready`)).status).toBe(200);
  }, 90_000);

  it('a peer that breaks off its dump is skipped for the next; with none left the replica stays 503 KVX_RECOVERING', async () => {
    // A real HTTP server that starts a dump and drops the connection half-way.
    const broken = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100000' });
      res.write('{"m:default":{"block_size":4,"events":[');
      setTimeout(() => res.destroy(), 20);
    });
    servers.push(broken);
    const brokenUrl = await listen(broken);
    const alone = start(['--peers', brokenUrl]);
    const aloneUrl = (await alone.waitFor('kvindex serve ready'))['address'] as string;
    await alone.waitFor('no peer gave a whole dump: not ready, retrying');
    const q = await post(aloneUrl, '/query', { token_ids: PROMPTS[0], model_name: MODEL });
    expect(q.status).toBe(503);
    expect(((await q.json()) as { code: string }).code).toBe('KVX_RECOVERING');
    expect((await fetch(`${aloneUrl}/dump`)).status).toBe(503);
    const ready = await fetch(`${aloneUrl}/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { reason: string }).reason).toContain('recovering from peers');
    // Still retrying (a second round), never ready with part of a dump.
    await until(() => alone.lines.filter((l) => l.msg === 'no peer gave a whole dump: not ready, retrying').length >= 2, 15_000, 'a second round');
    expect(alone.lines.some((l) => l.msg.startsWith('recovered'))).toBe(false);
    expect((await post(aloneUrl, '/query', { token_ids: PROMPTS[0], model_name: MODEL })).status).toBe(503);

    // The broken peer first, then A: recovered from A.
    const c = start(['--peers', `${brokenUrl},${aUrl}`]);
    await c.waitFor('kvindex serve ready');
    expect(await c.waitFor('recovered from a peer: ready')).toMatchObject({ peer: aUrl });
    expect(c.lines.some((l) => l.msg === 'recovery from a peer failed: trying the next' && l['peer'] === brokenUrl)).toBe(true);
  }, 60_000);

  it('peers that all refuse the connection: starts empty, ready at once, and says so', async () => {
    const p1 = await closedPort();
    const p2 = await closedPort();
    const d = start(['--peers', `http://127.0.0.1:${p1},http://127.0.0.1:${p2}`]);
    const dUrl = (await d.waitFor('kvindex serve ready'))['address'] as string;
    await d.waitFor('no reachable peer (each refused the connection or is recovering too): starting empty');
    expect((await fetch(`${dUrl}/ready`)).status).toBe(200);
    expect((await post(dUrl, '/query', { token_ids: PROMPTS[0], model_name: MODEL })).status).toBe(404);
  }, 30_000);

  it('a Dynamo peer\'s dump (no positions, no names): applied, and marked approximate in the log and /workers', async () => {
    // Dynamo's shapes, made from A's answers: the dump without kvindex's keys, /workers without
    // model and tenant.
    const dynamo = createServer((req, res) => {
      void (async () => {
        const doc = parse(await (await fetch(aUrl + req.url!)).text()) as Record<string, Record<string, unknown>>;
        for (const item of Object.values(doc)) {
          for (const k of ['model_name', 'tenant_id', 'listeners']) Reflect.deleteProperty(item, k);
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(stringify(doc));
      })();
    });
    servers.push(dynamo);
    const dynamoUrl = await listen(dynamo);
    const dumpText = await (await fetch(`${dynamoUrl}/dump`)).text();
    expect(dumpText).not.toContain('"listeners"');
    const e = start(['--peers', dynamoUrl]);
    const eUrl = (await e.waitFor('kvindex serve ready'))['address'] as string;
    expect(await e.waitFor('recovered from a peer: ready')).toMatchObject({ peer: dynamoUrl, exact: false });
    expect(e.lines.some((l) => l.msg.includes('approximate'))).toBe(true);
    const workers = await (await fetch(`${eUrl}/workers`)).text();
    expect(workers).toContain(`"recovered_from":${JSON.stringify(dynamoUrl)},"approximate":true`);
    expect(workers).toContain(`"instance_id":${IDS[1]}`);
    // The index came with it: a stored prompt scores on E.
    let scored = 0;
    for (const p of PROMPTS) if ((await (await post(eUrl, '/query', { token_ids: p, model_name: MODEL })).text()).includes('"scores":{"')) scored++;
    expect(scored).toBeGreaterThan(5);
  }, 60_000);
  /** Every /query answer of the replicas on every prompt (and two cuts of it), as parsed JSON. */
  const answersOf = async (url: string): Promise<unknown[]> => {
    const out: unknown[] = [];
    for (const p of PROMPTS) {
      for (const cut of [p.length, p.length - BS, BS + 1]) out.push(JSON.parse(await (await post(url, '/query', { token_ids: p.slice(0, cut), model_name: MODEL })).text()));
    }
    return out;
  };

  it('kill -9 of one of 3 replicas while the engines publish: restarted with --peers it answers 503 until recovered, then exactly as the others', async () => {
    expect(replicaB).not.toBeNull();
    const b = replicaB!;
    const bUrl = (await b.waitFor('kvindex serve ready'))['address'] as string;
    let publishing = true;
    const background = (async () => {
      while (publishing) {
        await publishRound();
        await new Promise((r) => setTimeout(r, 3));
      }
    })();
    // The third replica, from B (a peer that recovered itself).
    const c = start(['--peers', bUrl]);
    const cUrl = (await c.waitFor('kvindex serve ready'))['address'] as string;
    expect(await c.waitFor('recovered from a peer: ready')).toMatchObject({ peer: bUrl, exact: true });
    b.signal('SIGKILL');
    expect(await b.exited).toBe(null);
    // A first peer that holds the dump 400 ms, then fails: a window in which the restarted
    // replica is up but not recovered, long enough to see it answer 503 deterministically.
    const slow = createServer((_req, res) => {
      setTimeout(() => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"slow peer"}'), 400);
    });
    servers.push(slow);
    const slowUrl = await listen(slow);
    const b2 = start(['--peers', `${slowUrl},${cUrl},${aUrl}`]);
    const b2Url = (await b2.waitFor('kvindex serve ready'))['address'] as string;
    const statuses: number[] = [];
    let done = false;
    void b2.waitFor('recovered from a peer: ready').then(() => (done = true), () => (done = true));
    while (!done) {
      const r = await post(b2Url, '/query', { token_ids: PROMPTS[3], model_name: MODEL });
      statuses.push(r.status);
      if (r.status === 503) expect(((await r.json()) as { code: string }).code).toBe('KVX_RECOVERING');
      else await r.text();
      // /ready is asked after the 503: the recovery may have ended in between (it takes well
      // under a second after the slow peer), and then, only then, /ready is 200.
      if (r.status === 503 && (await fetch(`${b2Url}/ready`)).status !== 503) expect(await b2.waitFor('recovered from a peer: ready')).toBeTruthy();
    }
    // 503s, then (only after the recovery) answers: never a partial answer first.
    expect(statuses[0]).toBe(503);
    expect(statuses.slice(statuses.indexOf(200) < 0 ? statuses.length : statuses.indexOf(200)).every((x) => x === 200)).toBe(true);
    expect(await b2.waitFor('recovered from a peer: ready')).toMatchObject({ peer: cUrl, exact: true, dump: 'binary' });
    // B2 subscribes to the engines after it reports ready; what they publish before that reaches
    // it as a gap with their next batch (replayed then). So the engines go on publishing until
    // B2 is connected to both and a little after: a last batch sent before its subscription
    // would otherwise leave it one gap behind for good (it failed 4 of 11 runs once recovery
    // took ~100 ms).
    for (const end = Date.now() + 20_000; b2.lines.filter((l) => l.msg === 'engine publisher connected').length < pubs.length; await new Promise((r) => setTimeout(r, 20))) {
      if (Date.now() > end) throw new Error('B2 did not connect to the engines');
    }
    await new Promise((r) => setTimeout(r, 200));
    publishing = false;
    await background;
    await publishRound();
    await Promise.all([caughtUp(aUrl), caughtUp(cUrl), caughtUp(b2Url)]);
    const [qa, qc, qb] = await Promise.all([answersOf(aUrl), answersOf(cUrl), answersOf(b2Url)]);
    expect(qc).toEqual(qa);
    expect(qb).toEqual(qa);
    expect(qa.filter((x) => JSON.stringify(x).includes('"scores":{"')).length).toBeGreaterThan(10);
    expect((await fetch(`${b2Url}/ready`)).status).toBe(200);
  }, 60_000);

  it('a binary dump cut short or corrupted is a typed error; the replica tries the next peer and is never ready with part of it', async () => {
    const res = await fetch(`${aUrl}/dump`, { headers: { accept: DUMP_BINARY_TYPE } });
    expect(res.headers.get('content-type')).toBe(DUMP_BINARY_TYPE);
    const whole = new Uint8Array(await res.arrayBuffer());
    // The same index as the JSON dump: loaded from the binary one, an index dumps the same events.
    const viaBinary = new EngineIndex({ blockSize: BS });
    const sections = readBinaryDump(whole);
    expect(sections.map((x) => x.key)).toEqual([`${MODEL}:default`]);
    for (const t of sections[0]!.trees!) viaBinary.loadRankBincode(t.rank, t.bytes);
    const viaJson = new EngineIndex({ blockSize: BS });
    for (const ev of readDump(new Uint8Array(await (await fetch(`${aUrl}/dump`)).arrayBuffer()))[0]!.events) viaJson.applyEvent(ev);
    expect(viaBinary.dumpEvents()).toEqual(viaJson.dumpEvents());
    expect(sections[0]!.listeners!.map((l) => l.instanceId).sort()).toEqual([...IDS].sort());
    expect(sections[0]!.listeners!.every((l) => l.position !== null && l.replayEndpoint !== null)).toBe(true);

    const codeOf = (bytes: Uint8Array): string => {
      try {
        readBinaryDump(bytes);
      } catch (err) {
        expect(err).toBeInstanceOf(SnapshotDecodeError);
        return (err as SnapshotDecodeError).code;
      }
      return 'none';
    };
    for (const cut of [0, 7, 20, whole.length >> 1, whole.length - 5, whole.length - 1]) expect(codeOf(whole.subarray(0, cut))).toBe('KVX_SNAPSHOT_TRUNCATED');
    for (const at of [12, whole.length >> 1, whole.length - 20]) {
      const bad = whole.slice();
      bad[at] = bad[at]! ^ 0x10;
      expect(codeOf(bad)).toBe('KVX_SNAPSHOT_CHECKSUM');
    }

    // Served by real peers: one cut short (a whole answer, its length honest), one with a bit flipped.
    const cutShort = whole.subarray(0, whole.length >> 1);
    const flipped = whole.slice();
    flipped[whole.length >> 1] = flipped[whole.length >> 1]! ^ 1;
    const peerOf = (body: Uint8Array): Server => createServer((_req, r) => r.writeHead(200, { 'content-type': DUMP_BINARY_TYPE, 'content-length': String(body.length) }).end(body));
    const cutPeer = peerOf(cutShort);
    const flipPeer = peerOf(flipped);
    servers.push(cutPeer, flipPeer);
    const cutUrl = await listen(cutPeer);
    const flipUrl = await listen(flipPeer);
    const d = start(['--peers', `${cutUrl},${flipUrl}`]);
    const dUrl = (await d.waitFor('kvindex serve ready'))['address'] as string;
    await d.waitFor('no peer gave a whole dump: not ready, retrying');
    const fails = d.lines.filter((l) => l.msg === 'recovery from a peer failed: trying the next').map((l) => String(l['err']));
    expect(fails.some((e) => e.includes('truncated'))).toBe(true);
    expect(fails.some((e) => e.includes('CRC-32'))).toBe(true);
    expect((await post(dUrl, '/query', { token_ids: PROMPTS[0], model_name: MODEL })).status).toBe(503);
    expect(await (await fetch(`${dUrl}/workers`)).text()).toBe('[]');
  }, 30_000);
});
