/**
 * Loads shared between gateways (`kvindex gateway --nats`), on loopback with a real nats-server
 * and 4 fake OpenAI engines (test/support/fake-engine.ts), each in its own process.
 *
 * - Added latency: two pairs of `kvindex gateway` processes from dist/ over the same engines,
 *   one pair without `--nats` (the baseline), one pair sharing loads; one request at a time
 *   (local and shared alternating, no queueing), then open loop at 100 and 400 requests/s split
 *   evenly over the pair's two gateways (so each applies the other's
 *   events while it routes), token-id prompts of 512 tokens. The request leg (client send to
 *   the engine's arrival, on the host's monotonic clock) and end to end, p50 / p99 / p99.9 / max
 *   per round; the pairs alternate within each round.
 * - Propagation: two `Gateway`s in this process, each with its own NATS connection. The time
 *   from gateway A's decision (its `pickEngine`, which publishes the add) until gateway B's
 *   router counts the request, and from A's `free` until B's no longer does; B's view is
 *   polled once per event-loop turn (`setImmediate`). One request at a time, then while A
 *   routes 200 requests/s (A, B and the poller share this process's event loop).
 * - CPU per event, synchronous: formatting and encoding an add of a 512-token prompt (32 sequence
 *   hashes) as the publisher does, and parsing and applying it as a peer does (with its free),
 *   median of 5 runs of 20,000: the host-independent part of what sharing costs a request
 *   (3 events published, 3 applied per peer).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from 'undici';
import { Gateway } from '../src/gateway/gateway.js';
import { PeerLoads } from '../src/gateway/peer-loads.js';
import { computeBlockHashes, computeSequenceHashes } from '../src/hash/block-hash.js';
import { ActiveSequences } from '../src/router/active-sequences.js';
import { formatActiveSequenceEvent, parseActiveSequenceEvent, type ActiveSequenceEvent } from '../src/router/sequence-event.js';
import { Endpoint, readOpenAiRequest } from '../src/gateway/openai-request.js';
import { SharedLoads } from '../src/gateway/shared-loads.js';
import type { EnginePick } from '../src/gateway/engine-pick.js';
import { ROUTING_PRESETS } from '../src/router/presets.js';
import { client, post, startEngine, startGateway, stop, type EngineProc, type GatewayProc } from './gateway-procs.js';
import { latencyRound, openLoop, stats, type LatencyRound } from './gateway.bench.js';
import { startServer } from './nats.bench.js';
import { runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

const MODEL = 'bench';
const BLOCK = 16;

/** A 512-token prompt, unique per `i` (no cache hits: load decides). */
function tokens(i: number): number[] {
  return Array.from({ length: 512 }, (_, k) => 100_000 + ((i * 7919 + k * 13) % 900_000));
}

/** A round over a pair of gateways, request `i` to gateway `i % 2`, prompts from `offset`. */
function pairRound(rate: number, n: number, pair: readonly Pool[], offset: number): Promise<LatencyRound> {
  return latencyRound(rate, n, (i) => post(pair[i % 2]!, '/v1/completions', JSON.stringify({ model: MODEL, prompt: tokens(offset + i), max_tokens: 1 })));
}

/** Waits one event-loop turn (I/O included). */
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Add and free propagation, A -> B, one request at a time, then under A's open loop. */
async function propagation(engines: EngineProc[], natsUrl: string, quick: boolean): Promise<Array<Record<string, string | number>>> {
  const entries = engines.map((e, i) => ({ instanceId: BigInt(i + 1), endpoint: e.endpoint, modelName: MODEL, blockSize: BLOCK, tenantId: 'default', dpRank: 0, replayEndpoint: null, url: e.url }));
  const make = async (): Promise<{ gw: Gateway; shared: SharedLoads }> => {
    const shared = new SharedLoads({ servers: natsUrl });
    const gw = new Gateway({ routing: { ...ROUTING_PRESETS.kv, ...shared.routerOptions() } });
    await gw.start(entries);
    shared.start(gw);
    if (!(await shared.connected())) throw new Error('NATS not connected');
    return { gw, shared };
  };
  const a = await make();
  const b = await make();
  try {
    const seqB = (): ReturnType<typeof b.gw.registry.router> => b.gw.registry.router(MODEL, 'default');
    const hexA = a.shared.routerId.toString(16);
    const keyInB = (p: EnginePick): string => `${hexA}/${p.requestId}@${hexA}`;
    const request = (i: number) => readOpenAiRequest(Endpoint.Completions, Buffer.from(JSON.stringify({ model: MODEL, prompt: tokens(5_000_000 + i), max_tokens: 1 })));
    const rows: Array<Record<string, string | number>> = [];
    // One at a time.
    const n = quick ? 300 : 2000;
    const add: number[] = [];
    const free: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const p = await a.gw.pickEngine(request(i));
      const key = keyInB(p);
      while (seqB()?.sequences.has(key) !== true) await turn();
      add.push((performance.now() - t0) * 1000);
      const t1 = performance.now();
      a.gw.free(p);
      while (seqB()?.sequences.has(key) === true) await turn();
      free.push((performance.now() - t1) * 1000);
    }
    for (const [what, us] of [['add (route) -> view', add], ['free -> view', free]] as const) {
      const s = stats(us);
      rows.push({ load: 'one at a time', event: what, samples: us.length, 'p50 us': s.p50, 'p99 us': s.p99, 'p99.9 us': s.p999, 'max us': s.max });
    }
    // Under A's open loop: 200 routes/s, each freed 50 ms later.
    const m = quick ? 400 : 2000;
    const pending = new Map<string, number>();
    const seen: number[] = [];
    let done = false;
    const poller = (async () => {
      while (!done || pending.size > 0) {
        const s = seqB()?.sequences;
        const now = performance.now();
        for (const [key, t0] of pending) {
          if (s?.has(key) === true) {
            seen.push((now - t0) * 1000);
            pending.delete(key);
          }
        }
        await turn();
      }
    })();
    await openLoop(200, m, async (i) => {
      const t0 = performance.now();
      const p = await a.gw.pickEngine(request(n + i));
      pending.set(keyInB(p), t0);
      await sleep(50);
      a.gw.free(p);
    });
    done = true;
    // A request freed before B saw it is never seen: counted as lost, not as a latency.
    await Promise.race([poller, sleep(2000)]);
    const lost = pending.size;
    pending.clear();
    const s = stats(seen);
    rows.push({ load: '200 routes/s', event: 'add (route) -> view', samples: seen.length, 'p50 us': s.p50, 'p99 us': s.p99, 'p99.9 us': s.p999, 'max us': s.max, lost });
    return rows;
  } finally {
    for (const g of [a, b]) {
      await g.shared.close();
      await g.gw.close();
    }
  }
}

/** µs per event of the publisher's and the receiver's work, synchronous. */
export function cpuRows(): Array<Record<string, string | number>> {
  const seq = computeSequenceHashes(computeBlockHashes(Uint32Array.from(tokens(1)), BLOCK));
  const encoder = new TextEncoder();
  const event = (i: number, type: 'add' | 'free'): ActiveSequenceEvent => ({
    requestId: `gw-${i}@5f3a9c1e2b7d4a60`, workerId: 1n + BigInt(i & 3), dpRank: 0, routerId: 0x5f3a9c1e2b7d4a60n, loraName: null,
    data: type === 'add' ? { type: 'add_request', blockHashes: seq, trackPrefillTokens: true, expectedOutputTokens: 1, prefillTokens: 512 } : { type: 'free' },
  });
  const n = 20_000;
  const adds = Array.from({ length: n }, (_, i) => encoder.encode(formatActiveSequenceEvent(event(i, 'add'))));
  const frees = Array.from({ length: n }, (_, i) => encoder.encode(formatActiveSequenceEvent(event(i, 'free'))));
  const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const time = (events: number, work: () => void): { med: number; min: number; max: number } => {
    const runs: number[] = [];
    for (let r = 0; r < 5; r++) {
      const t0 = performance.now();
      work();
      runs.push(((performance.now() - t0) * 1000) / events);
    }
    return { med: median(runs), min: Math.min(...runs), max: Math.max(...runs) };
  };
  let bytes = 0;
  const publish = time(n, () => {
    for (let i = 0; i < n; i++) bytes += encoder.encode(formatActiveSequenceEvent(event(i, 'add'))).length;
  });
  const apply = time(2 * n, () => {
    const seqs = new ActiveSequences({ blockSize: BLOCK });
    const peers = new PeerLoads({ routerId: 1n, sequencesOf: () => [seqs] });
    for (let i = 0; i < n; i++) peers.apply(parseActiveSequenceEvent(adds[i]!));
    for (let i = 0; i < n; i++) peers.apply(parseActiveSequenceEvent(frees[i]!));
  });
  const r = (x: number): number => Math.round(x * 100) / 100;
  return [
    { work: 'publish: format + encode an add (32 hashes)', 'bytes/event': Math.round(bytes / (5 * n)), 'us/event (median of 5)': r(publish.med), spread: `${r(publish.min)}-${r(publish.max)}` },
    { work: 'receive: parse + apply (adds and frees, alternating halves)', 'bytes/event': Math.round((adds[0]!.length + frees[0]!.length) / 2), 'us/event (median of 5)': r(apply.med), spread: `${r(apply.min)}-${r(apply.max)}` },
  ];
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const engines: EngineProc[] = [];
  const gateways: GatewayProc[] = [];
  const nats = await startServer();
  try {
    for (let i = 0; i < 4; i++) engines.push(await startEngine({ model: MODEL, blockSize: BLOCK, cacheBlocks: 4096 }));
    for (const extra of [[], [], ['--nats', nats.url], ['--nats', nats.url]]) gateways.push(await startGateway(engines, MODEL, BLOCK, extra));
    await sleep(1500); // health polled, ZMQ subscribed, NATS connected
    const pools = gateways.map((g) => client(g.url));
    const pairs = { local: [pools[0]!, pools[1]!], shared: [pools[2]!, pools[3]!] } as const;
    let offset = 0;
    for (const pair of Object.values(pairs)) await pairRound(500, 1000, pair, (offset += 10_000)); // warm-up
    // One request at a time, local and shared pairs alternating: the added cost without queueing.
    const one = { local: { leg: [] as number[], e2e: [] as number[] }, shared: { leg: [] as number[], e2e: [] as number[] } };
    const n1 = opts.quick ? 300 : 1500;
    for (let i = 0; i < n1; i++) {
      for (const loads of ['local', 'shared'] as const) {
        const r = await post(pairs[loads][i % 2]!, '/v1/completions', JSON.stringify({ model: MODEL, prompt: tokens((offset += 1)), max_tokens: 1 }));
        one[loads].leg.push(Number(r.arrivalNs - r.sentNs) / 1000);
        one[loads].e2e.push(Number(r.endNs - r.sentNs) / 1000);
      }
    }
    const sequential = (['local', 'shared'] as const).map((loads) => {
      const l = stats(one[loads].leg);
      const e = stats(one[loads].e2e);
      return { loads, requests: n1, 'leg p50 us': l.p50, 'leg p99 us': l.p99, 'leg p99.9 us': l.p999, 'leg max us': l.max, 'e2e p50 us': e.p50, 'e2e p99 us': e.p99, 'e2e p99.9 us': e.p999, 'e2e max us': e.max };
    });
    const latency: Array<Record<string, string | number>> = [];
    const rounds = opts.quick ? 1 : 3;
    for (const rate of [100, 400]) {
      for (let round = 0; round < rounds; round++) {
        for (const loads of ['local', 'shared'] as const) {
          const r = await pairRound(rate, rate * (opts.quick ? 2 : 5), pairs[loads], (offset += 100_000));
          const l = stats(r.leg);
          const e = stats(r.e2e);
          latency.push({ 'req/s': rate, round: round + 1, loads, requests: r.leg.length, errors: r.errors, 'leg p50 us': l.p50, 'leg p99 us': l.p99, 'leg p99.9 us': l.p999, 'leg max us': l.max, 'e2e p50 us': e.p50, 'e2e p99 us': e.p99, 'e2e p99.9 us': e.p999, 'e2e max us': e.max });
        }
      }
    }
    for (const p of pools) await p.close();
    const med = (rate: number, loads: string, col: string): number => {
      const v = latency.filter((r) => r['req/s'] === rate && r.loads === loads).map((r) => r[col] as number).sort((x, y) => x - y);
      return v[Math.floor(v.length / 2)]!;
    };
    const spread = (rate: number, loads: string, col: string): string => {
      const v = latency.filter((r) => r['req/s'] === rate && r.loads === loads).map((r) => r[col] as number);
      return `${Math.min(...v)}-${Math.max(...v)}`;
    };
    const cols = ['leg p50 us', 'leg p99 us', 'leg p99.9 us', 'leg max us'];
    const added = [100, 400].map((rate) => {
      const row: Record<string, string | number> = { 'req/s': rate };
      for (const c of cols) row[`added ${c.slice(4)}`] = med(rate, 'shared', c) - med(rate, 'local', c);
      row['leg p99 us, local (spread)'] = spread(rate, 'local', 'leg p99 us');
      row['leg p99 us, shared (spread)'] = spread(rate, 'shared', 'leg p99 us');
      return row;
    });
    const prop = await propagation(engines, nats.url, opts.quick);
    const cpu = cpuRows();
    const markdown = [
      `Two pairs of \`kvindex gateway\` processes over the same 4 fake engines: one pair without \`--nats\` (baseline), one pair sharing loads over a local nats-server; open loop split evenly over the pair's two gateways, 512-token token-id prompts, every prompt new. *leg* is the client's send to the engine's arrival, *e2e* the whole answer; ${rounds} round(s) per rate, the pairs alternating. The host is shared with other jobs (2 cores): compare within a round.`,
      '',
      'One request at a time, local and shared alternating:',
      '',
      table(sequential),
      '',
      'Open loop:',
      '',
      table(latency),
      '',
      'Added by sharing loads (median over rounds of each percentile, shared minus local; spread = min-max over rounds):',
      '',
      table(added),
      '',
      'Propagation from one gateway\'s decision to another gateway\'s view (two `Gateway`s in one process, each with its own NATS connection; B polled once per event-loop turn):',
      '',
      table(prop),
      '',
      'CPU per event, synchronous (the publisher\'s and a receiving peer\'s work; a request makes 3 events: add, first token, free):',
      '',
      table(cpu),
    ].join('\n');
    return { title: 'Gateway: loads shared over NATS (--nats)', markdown, rows: [...sequential, ...latency, ...added, ...prop, ...cpu] };
  } finally {
    await stop([...engines, ...gateways]);
    nats.stop();
  }
}

runIfMain(import.meta.url, run);
