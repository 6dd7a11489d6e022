/**
 * Time for a `kvindex serve --http` replica to be ready from a peer (issue 38's target: <= 2 s
 * at 1M pairs). Replica A (the built CLI) indexes ~1M (worker, block) pairs published by 8
 * vLLM-format engines (test/support/vllm-publisher.ts, with replay rings) on loopback; then
 * replica B is spawned with `--peers A`, and the bench reads from B's log the time from spawn to
 * `recovered from a peer: ready`, and the recovery's own `ms` (GET /dump, parse, apply, start
 * the listeners). Each round starts a fresh B; median of the rounds. Before the numbers count,
 * B must answer a set of /query bodies exactly as A does.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { VllmPublisher } from '../test/support/vllm-publisher.js';
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

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const batches = opts.quick ? 128 : 2048; // per engine: 8 x 2048 x 64 = 1,048,576 pairs
  const rounds = opts.quick ? 1 : 3;
  const pubs: VllmPublisher[] = [];
  for (let e = 0; e < ENGINES; e++) pubs.push(await VllmPublisher.start({ replay: 'topic' }));
  const a = serve(['--metrics', '127.0.0.1:0']);
  const rows: Array<Record<string, string | number | boolean>> = [];
  try {
    const aUrl = (await a.wait('kvindex serve ready'))['address'] as string;
    const aMetrics = (await a.wait('metrics, health and readiness served over HTTP'))['metricsUrl'] as string;
    for (let e = 0; e < ENGINES; e++) {
      const body = `{"instance_id":${7587889975016782855n + BigInt(e)},"endpoint":"${pubs[e]!.endpoint}","replay_endpoint":"${pubs[e]!.replayEndpoint}","model_name":"m","block_size":${BS}}`;
      const res = await fetch(`${aUrl}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      if (res.status !== 201) throw new Error(`register: ${res.status} ${await res.text()}`);
    }
    await Promise.all(pubs.map((p) => p.subscribed()));
    const total = ENGINES * batches * CHAIN;
    for (let i = 0; i < batches; i++) {
      for (let e = 0; e < ENGINES; e++) {
        const hash = (k: number): bigint => (BigInt(e + 1) << 40n) + BigInt(i * CHAIN + k) + 1n;
        await pubs[e]!.publish([{ stored: { hashes: Array.from({ length: CHAIN }, (_, k) => hash(k)), parent: null, tokens: tokens(e, i), blockSize: BS } }]);
      }
    }
    for (const end = Date.now() + 600_000; (await metricSum(aMetrics, 'kvindex_zmq_stored_blocks_total{')) < total; await new Promise((r) => setTimeout(r, 200))) {
      if (Date.now() > end) throw new Error('A did not index every block');
    }
    const t = performance.now();
    const dump = await (await fetch(`${aUrl}/dump`)).arrayBuffer();
    const dumpMs = performance.now() - t;
    const queries = Array.from({ length: 32 }, (_, q) => JSON.stringify({ token_ids: tokens(q % ENGINES, (q * 37) % batches).slice(0, (1 + (q % CHAIN)) * BS + 3), model_name: 'm' }));
    const answers = await Promise.all(queries.map(async (b) => (await fetch(`${aUrl}/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b })).text()));
    const spawnMs: number[] = [];
    const recoveryMs: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      const b = serve(['--peers', aUrl]);
      const rec = await b.wait('recovered from a peer: ready');
      spawnMs.push(performance.now() - t0);
      recoveryMs.push(Number(rec['ms']));
      const bUrl = b.lines.find((l) => l.msg === 'kvindex serve ready')!['address'] as string;
      for (let q = 0; q < queries.length; q++) {
        const got = await (await fetch(`${bUrl}/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: queries[q]! })).text();
        if (!sameScores(got, answers[q]!)) throw new Error(`B answered ${got.slice(0, 200)} where A answered ${answers[q]!.slice(0, 200)}`);
      }
      if (Number(rec['blocks']) !== total) throw new Error(`B recovered ${String(rec['blocks'])} blocks of ${total}`);
      await stop(b);
    }
    const median = (x: number[]): number => [...x].sort((p, q) => p - q)[Math.floor(x.length / 2)]!;
    rows.push({
      pairs: total,
      'dump MB': Math.round(dump.byteLength / 1e5) / 10,
      'GET /dump on A ms': Math.round(dumpMs),
      'recovery ms (dump, parse, apply, listeners)': Math.round(median(recoveryMs)),
      'spawn to ready ms': Math.round(median(spawnMs)),
      rounds,
      'target <= 2000 ms': median(spawnMs) <= 2000 ? 'met' : 'missed',
    });
  } finally {
    await stop(a);
    for (const p of pubs) p.close();
  }
  return {
    title: 'Replica ready from a peer (serve --http --peers)',
    markdown: `${ENGINES} vLLM-format engines on loopback, ${batches.toLocaleString('en-US')} batches each of one Stored chain of ${CHAIN} blocks of ${BS} tokens, indexed by replica A; replica B spawned with \`--peers A\` (a fresh process per round, median of ${rounds}); B answered 32 /query bodies as A did in every round.\n\n${table(rows)}`,
    rows,
  };
}

/** The same scores and tree sizes, whatever the order of the workers in the text. */
function sameScores(x: string, y: string): boolean {
  const norm = (s: string): string => JSON.stringify(JSON.parse(s), (_k, v: unknown) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort()) : v));
  return norm(x) === norm(y);
}

runIfMain(import.meta.url, run);
