/**
 * Time for a `kvindex serve --http` replica to be ready from a peer (issue 38's target: <= 2 s
 * at 1M pairs). Replica A (the built CLI) indexes ~1M (worker, block) pairs published by 8
 * vLLM-format engines (test/support/vllm-publisher.ts, with replay rings) on loopback; then
 * replica B is spawned with `--peers A`, and the bench reads from B's log the time from spawn to
 * `recovered from a peer: ready`, and the recovery's own `ms` (GET /dump, parse, apply, start
 * the listeners), with the JSON dump (Dynamo's) and the binary one (src/http/dump-binary.ts)
 * alternating. Each round starts a fresh B; median of the rounds. Before the numbers count,
 * B must answer a set of /query bodies exactly as A does. Then, in this process, each way from
 * the dump's bytes to a loaded index, on the same bytes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { VllmPublisher } from '../test/support/vllm-publisher.js';
import { DUMP_BINARY_TYPE, readBinaryDump } from '../src/http/dump-binary.js';
import { readDump } from '../src/http/dump-read.js';
import { decodeSnapshot } from '../src/protocol/snapshot-reader.js';
import { EngineIndex } from '../src/zmq/engine-index.js';
import { runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

const MAIN = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const BS = 16;
const ENGINES = 8;
const CHAIN = 64;

interface Proc {
  proc: ChildProcess;
  lines: Array<Record<string, unknown>>;
  wait(msg: string, timeoutMs?: number): Promise<Record<string, unknown>>;
}

function serve(args: string[]): Proc {
  const proc = spawn(process.execPath, [MAIN, 'serve', '--http', '127.0.0.1:0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  createInterface({ input: proc.stderr! }).on('line', (l) => {
    try {
      lines.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      lines.push({ msg: l });
    }
    for (const w of waiters) w();
  });
  return {
    proc,
    lines,
    wait: (msg, timeoutMs = 600_000) => new Promise((resolve, reject) => {
      const check = (): boolean => {
        const hit = lines.find((l) => l.msg === msg);
        if (hit !== undefined) resolve(hit);
        return hit !== undefined;
      };
      if (check()) return;
      const t = setTimeout(() => reject(new Error(`no '${msg}' within ${timeoutMs} ms`)), timeoutMs);
      waiters.push(() => {
        if (check()) clearTimeout(t);
      });
      proc.once('exit', () => reject(new Error(`exited before '${msg}': ${JSON.stringify(lines.slice(-5))}`)));
    }),
  };
}

async function stop(p: Proc): Promise<void> {
  const exited = new Promise((r) => p.proc.once('exit', r));
  p.proc.kill('SIGTERM');
  await exited;
}

/** Tokens of engine e's batch i: distinct per (e, i), CHAIN blocks. */
function tokens(e: number, i: number): number[] {
  const base = (e * 100_000 + i) * CHAIN * BS;
  return Array.from({ length: CHAIN * BS }, (_, k) => (base + k) % 0xffff_ffff);
}

async function metricSum(url: string, prefix: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(prefix)).reduce((k, l) => k + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/** Median and spread (min-max) of `x`. */
function med(x: number[]): { median: number; spread: string } {
  const s = [...x].sort((p, q) => p - q);
  return { median: s[Math.floor(s.length / 2)]!, spread: s.length < 2 ? '-' : `${Math.round(s[0]!)}-${Math.round(s[s.length - 1]!)}` };
}

/** In this process, from the bytes of A's dumps: each way from bytes to a loaded index. */
function inProcess(json: Uint8Array | null, binary: Uint8Array, pairs: number, rows: Array<Record<string, string | number | boolean>>): void {
  const ways: Array<[string, () => number]> = [
    ['binary: readBinaryDump (CRC, checks) + loadBincode per rank (bulk load)', () => {
      const ix = new EngineIndex({ blockSize: BS });
      let n = 0;
      for (const s of readBinaryDump(binary)) for (const t of s.trees!) n += ix.loadRankBincode(t.rank, t.bytes).storedBlocks;
      return n;
    }],
    ['binary: decodeSnapshot to RouterEvents + applyEvent each', () => {
      const ix = new EngineIndex({ blockSize: BS });
      let n = 0;
      for (const s of readBinaryDump(binary)) for (const t of s.trees!) for (const e of decodeSnapshot(t.bytes)) {
        ix.applyEvent(t.rank === 0 ? e : { workerId: e.workerId, event: { ...e.event, dpRank: t.rank } });
        if (e.event.data.type === 'stored') n += e.event.data.blocks.length;
      }
      return n;
    }],
  ];
  if (json !== null) ways.push(['json: readDump (lossless scanner) + applyEvent each (before)', () => {
    const ix = new EngineIndex({ blockSize: BS });
    let n = 0;
    for (const s of readDump(json)) for (const e of s.events) {
      ix.applyEvent(e);
      if (e.event.data.type === 'stored') n += e.event.data.blocks.length;
    }
    return n;
  }]);
  const times = ways.map(() => [] as number[]);
  for (let r = 0; r < 3; r++) {
    for (let w = 0; w < ways.length; w++) {
      globalThis.gc?.();
      const t = performance.now();
      const n = ways[w]![1]();
      times[w]!.push(performance.now() - t);
      if (n !== pairs) throw new Error(`${ways[w]![0]}: ${n} pairs of ${pairs}`);
    }
  }
  for (let w = 0; w < ways.length; w++) {
    const m = med(times[w]!);
    rows.push({ pairs, way: ways[w]![0], 'ms (median of 3)': Math.round(m.median), 'spread ms': m.spread, 'ns/pair': Math.round((m.median * 1e6) / pairs) });
  }
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  // Millions of pairs per size; 16M needs ~5 GB across A, B and this process: run it as
  // `PEERS_MILLIONS=1,16 flock /work/bigmem.lock npm run bench -- --only peers`.
  const sizes = opts.quick ? [128 * ENGINES * CHAIN] : (process.env.PEERS_MILLIONS ?? '1').split(',').map((m) => Number(m) * 1_048_576);
  const rounds = opts.quick ? 1 : 3;
  const rows: Array<Record<string, string | number | boolean>> = [];
  const local: Array<Record<string, string | number | boolean>> = [];
  for (const total of sizes) await one(total, rounds, rows, local);
  return {
    title: 'Replica ready from a peer (serve --http --peers)',
    markdown:
      `${ENGINES} vLLM-format engines on loopback, each publishing Stored chains of ${CHAIN} blocks of ${BS} tokens until replica A holds the pairs; replica B spawned with \`--peers A\` (a fresh process per round, ${rounds} rounds, the two dumps alternating: \`--peer-dump json\`, Dynamo's JSON /dump as before, and \`--peer-dump binary\`, kvindex's binary dump). B answered 32 /query bodies as A did in every round. ` +
      '`spawn to listening`: node start and module load, until B logs its address; `take`: GET /dump and parse/check it whole; `apply`: restore into the trees and start the listeners. A JSON /dump above 7M pairs would exceed V8\'s largest string (~512 MB): the peer answers it with 507 `KVX_DUMP_TOO_LARGE`.\n\n' +
      `${table(rows)}\n\nFrom the same dump bytes, in the bench process (fresh index each time, median of 3 alternating):\n\n${table(local)}`,
    rows: [...rows, ...local],
  };
}

async function one(total: number, rounds: number, rows: Array<Record<string, string | number | boolean>>, local: Array<Record<string, string | number | boolean>>): Promise<void> {
  const batches = total / (ENGINES * CHAIN);
  const pubs: VllmPublisher[] = [];
  for (let e = 0; e < ENGINES; e++) pubs.push(await VllmPublisher.start({ replay: 'topic' }));
  const a = serve(['--metrics', '127.0.0.1:0']);
  try {
    const aUrl = (await a.wait('kvindex serve ready'))['address'] as string;
    const aMetrics = (await a.wait('metrics, health and readiness served over HTTP'))['metricsUrl'] as string;
    for (let e = 0; e < ENGINES; e++) {
      const body = `{"instance_id":${7587889975016782855n + BigInt(e)},"endpoint":"${pubs[e]!.endpoint}","replay_endpoint":"${pubs[e]!.replayEndpoint}","model_name":"m","block_size":${BS}}`;
      const res = await fetch(`${aUrl}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      if (res.status !== 201) throw new Error(`register: ${res.status} ${await res.text()}`);
    }
    await Promise.all(pubs.map((p) => p.subscribed()));
    const tPub = performance.now();
    for (let i = 0; i < batches; i++) {
      for (let e = 0; e < ENGINES; e++) {
        const hash = (k: number): bigint => (BigInt(e + 1) << 40n) + BigInt(i * CHAIN + k) + 1n;
        await pubs[e]!.publish([{ stored: { hashes: Array.from({ length: CHAIN }, (_, k) => hash(k)), parent: null, tokens: tokens(e, i), blockSize: BS } }]);
      }
      // Let A keep up: a replay ring holds a bounded number of batches.
      if (i % 256 === 255) while ((await metricSum(aMetrics, 'kvindex_zmq_stored_blocks_total{')) < (i - 128) * ENGINES * CHAIN) await new Promise((r) => setTimeout(r, 50));
    }
    for (const end = Date.now() + 1_800_000; (await metricSum(aMetrics, 'kvindex_zmq_stored_blocks_total{')) < total; await new Promise((r) => setTimeout(r, 200))) {
      if (Date.now() > end) throw new Error('A did not index every block');
    }
    process.stderr.write(`peers: A indexed ${total} pairs in ${Math.round(performance.now() - tPub)} ms\n`);
    let json: Uint8Array | null = null;
    let jsonMs = NaN;
    let jsonFail = '';
    try {
      const t = performance.now();
      const res = await fetch(`${aUrl}/dump`);
      if (res.status !== 200) throw new Error(`status ${res.status}: ${(await res.text()).slice(0, 200)}`);
      json = new Uint8Array(await res.arrayBuffer());
      jsonMs = performance.now() - t;
    } catch (err) {
      jsonFail = (err as Error).message;
      process.stderr.write(`peers: JSON /dump at ${total} pairs failed: ${jsonFail}\n`);
    }
    const tb = performance.now();
    const binary = new Uint8Array(await (await fetch(`${aUrl}/dump`, { headers: { accept: DUMP_BINARY_TYPE } })).arrayBuffer());
    const binaryMs = performance.now() - tb;
    const queries = Array.from({ length: 32 }, (_, q) => JSON.stringify({ token_ids: tokens(q % ENGINES, (q * 37) % batches).slice(0, (1 + (q % CHAIN)) * BS + 3), model_name: 'm' }));
    const answers = await Promise.all(queries.map(async (b) => (await fetch(`${aUrl}/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b })).text()));
    const modes: Array<'json' | 'binary'> = json === null ? ['binary'] : ['json', 'binary'];
    const by = new Map(modes.map((m) => [m, { spawn: [] as number[], listen: [] as number[], recovery: [] as number[], take: [] as number[], apply: [] as number[] }]));
    for (let r = 0; r < rounds; r++) {
      for (const mode of r % 2 === 0 ? modes : [...modes].reverse()) {
        const t0 = performance.now();
        const b = serve(['--peers', aUrl, '--peer-dump', mode]);
        const listening = await b.wait('kvindex serve ready');
        const tl = performance.now() - t0;
        const rec = await b.wait('recovered from a peer: ready');
        const m = by.get(mode)!;
        m.spawn.push(performance.now() - t0);
        m.listen.push(tl);
        m.recovery.push(Number(rec['ms']));
        m.take.push(Number(rec['takeMs']));
        m.apply.push(Number(rec['applyMs']));
        if (rec['dump'] !== mode) throw new Error(`B took a ${String(rec['dump'])} dump, asked ${mode}`);
        const bUrl = listening['address'] as string;
        for (let q = 0; q < queries.length; q++) {
          const got = await (await fetch(`${bUrl}/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: queries[q]! })).text();
          if (!sameScores(got, answers[q]!)) throw new Error(`B answered ${got.slice(0, 200)} where A answered ${answers[q]!.slice(0, 200)}`);
        }
        if (Number(rec['blocks']) !== total) throw new Error(`B recovered ${String(rec['blocks'])} blocks of ${total}`);
        await stop(b);
      }
    }
    if (json === null) rows.push({ pairs: total, dump: 'json', 'dump MB': '-', 'GET /dump on A ms': `failed: ${jsonFail.slice(0, 60)}`, 'spawn to listening ms': '-', 'take ms': '-', 'apply ms': '-', 'spawn to ready ms': '-', 'spread ms': '-', rounds: 0, 'target <= 2000 ms': '-' });
    for (const mode of modes) {
      const m = by.get(mode)!;
      const s = med(m.spawn);
      rows.push({
        pairs: total,
        dump: mode,
        'dump MB': Math.round((mode === 'json' ? json!.byteLength : binary.byteLength) / 1e5) / 10,
        'GET /dump on A ms': Math.round(mode === 'json' ? jsonMs : binaryMs),
        'spawn to listening ms': Math.round(med(m.listen).median),
        'take ms': Math.round(med(m.take).median),
        'apply ms': Math.round(med(m.apply).median),
        'spawn to ready ms': Math.round(s.median),
        'spread ms': s.spread,
        rounds,
        'target <= 2000 ms': total > 1_100_000 ? '-' : s.median <= 2000 ? 'met' : 'missed',
      });
    }
    inProcess(json, binary, total, local);
  } finally {
    await stop(a);
    for (const p of pubs) p.close();
  }
}

/** The same scores and tree sizes, whatever the order of the workers in the text. */
function sameScores(x: string, y: string): boolean {
  const norm = (s: string): string => JSON.stringify(JSON.parse(s), (_k, v: unknown) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort()) : v));
  return norm(x) === norm(y);
}

runIfMain(import.meta.url, run);
