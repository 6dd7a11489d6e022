/**
 * Routing decisions (issue "Routing decisions"), on the shipped slice of the Mooncake
 * conversation trace (data/conversation_trace_head.jsonl, 2,000 requests) replayed through the
 * simulated 4-worker fleet of `kvindex replay`:
 * - `KvRouter.route(tokens)` latency with the index and the in-flight loads as the replay builds
 *   them, in-thread and through 2 shard threads: the whole call (performance.now() around it)
 *   and its phases as `route` reports them (hashing the tokens, the lookup, the selection with
 *   the loads), p50 / p99 / p99.9 / max in microseconds over `PASSES` replays of the slice;
 * - the hit rate of the requests' chosen workers (block-weighted, from the fleet's cache
 *   models) with KvRouter at temperature 0, at 0.5, without overlap credit, and with random and
 *   round-robin routing, each beside the oracle (the best hit any worker had at that request).
 */
import { defaultTraceFile } from '../src/cli/replay-options.js';
import { ReplayRouting } from '../src/cli/replay-routing.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { seededRandom } from '../src/router/random.js';
import { ClusterSim } from '../src/trace/cluster-sim.js';
import { readTraceFile, type TraceRequest } from '../src/trace/mooncake.js';
import { percentile, quiesce, runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

type Row = Record<string, string | number | boolean>;
const r2 = (x: number): number => Math.round(x * 100) / 100;

function pcts(name: string, values: number[]): Row {
  const v = Float64Array.from(values).sort();
  return {
    phase: name,
    'p50 us': r2(percentile(v, 50)), 'p99 us': r2(percentile(v, 99)),
    'p99.9 us': r2(percentile(v, 99.9)), 'max us': r2(v[v.length - 1]!),
  };
}

/** Replays the trace once with KvRouter over a fresh indexer; returns the samples and hit counts. */
async function replayRouted(
  requests: TraceRequest[],
  shards: number,
  readYourWrites: boolean,
  routingOptions: { temperature?: number; credit?: number },
  samples: { total: number[]; hash: number[]; lookup: number[]; select: number[]; record: number[] } | null,
): Promise<{ blocks: number; hit: number; oracle: number }> {
  const sim = new ClusterSim();
  const ix = await ShardedIndexer.create({ shards, blockSize: sim.config.blockSize, readYourWrites });
  try {
    const routing = new ReplayRouting(ix, sim.config, routingOptions);
    const index = new Map(sim.config.workerIds.map((id, i) => [id, i]));
    let blocks = 0;
    let hit = 0;
    let oracle = 0;
    let n = 0;
    for (const req of requests) {
      const prepared = sim.prepare(req);
      routing.advance(req.timestamp);
      const t0 = performance.now();
      const d = routing.routeTokens(prepared.tokens).decision;
      n++;
      const dt = (performance.now() - t0) * 1000;
      if (samples !== null) {
        samples.total.push(dt);
        samples.hash.push(d.hashUs);
        samples.lookup.push(d.lookupUs);
        samples.select.push(d.selectUs);
        samples.record.push(d.recordUs);
      }
      const scores = new Map<bigint, number>();
      d.candidates.forEach((c, i) => scores.set(c.workerId, d.overlaps[i]!));
      const served = sim.serve(prepared, scores, index.get(d.workerId)!);
      // Without read-your-writes a lookup may miss the previous request's events (still in flight).
      if (readYourWrites && served.mismatches > 0) throw new Error(`request ${n}: the indexer disagrees with the fleet's caches`);
      routing.started(req.timestamp, served.blocks, served.hit, req.outputLength);
      for (const e of served.events) ix.applyEvent(e);
      if (ix.needsDrain) await ix.drained();
      blocks += served.blocks;
      hit += served.hit;
      oracle += served.oracle;
    }
    return { blocks, hit, oracle };
  } finally {
    await ix.close();
  }
}

/** The fleet routed by a fixed policy (no indexer needed: the hit comes from the cache models). */
function replayPolicy(requests: TraceRequest[], choose: (i: number, workers: number) => number): { blocks: number; hit: number; oracle: number } {
  const sim = new ClusterSim();
  let blocks = 0;
  let hit = 0;
  let oracle = 0;
  requests.forEach((req, i) => {
    const served = sim.serve(sim.prepare(req), new Map(), choose(i, sim.config.workers));
    blocks += served.blocks;
    hit += served.hit;
    oracle += served.oracle;
  });
  return { blocks, hit, oracle };
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const file = defaultTraceFile();
  const { requests } = await readTraceFile(file);
  const passes = opts.quick ? 1 : 3;
  const rows: Row[] = [];
  const latency: Row[] = [];
  for (const [shards, ryw] of [[0, true], [2, true], [2, false]] as const) {
    const samples = { total: [] as number[], hash: [] as number[], lookup: [] as number[], select: [] as number[], record: [] as number[] };
    await replayRouted(requests.slice(0, 200), shards, ryw, {}, null); // warm-up
    for (let p = 0; p < passes; p++) {
      await quiesce(100);
      await replayRouted(requests, shards, ryw, {}, samples);
    }
    const phases = [['route() total', samples.total], ['hash', samples.hash], ['lookup', samples.lookup], ['select', samples.select], ['record', samples.record]] as const;
    for (const [name, v] of phases) {
      const row = { shards, readYourWrites: ryw, ...pcts(name, v), samples: v.length };
      latency.push(row);
      rows.push({ kind: 'latency', ...row });
    }
  }

  const hits: Row[] = [];
  const add = (policy: string, r: { blocks: number; hit: number; oracle: number }): void => {
    const row = { policy, 'hit rate %': r2((100 * r.hit) / r.blocks), 'oracle %': r2((100 * r.oracle) / r.blocks), 'hit / oracle': r2(r.hit / r.oracle) };
    hits.push(row);
    rows.push({ kind: 'hit rate', ...row });
  };
  add('KvRouter, temperature 0', await replayRouted(requests, 0, true, {}, null));
  add('KvRouter, temperature 0.5', await replayRouted(requests, 0, true, { temperature: 0.5 }, null));
  add('KvRouter, credit 0 (loads only)', await replayRouted(requests, 0, true, { credit: 0 }, null));
  const random = seededRandom(1);
  add('random', replayPolicy(requests, (_, w) => Math.floor(random() * w)));
  add('round-robin', replayPolicy(requests, (i, w) => i % w));
  add("simulation's own model (before KvRouter)", (() => {
    const sim = new ClusterSim();
    let blocks = 0;
    let hit = 0;
    let oracle = 0;
    for (const req of requests) {
      // The scores the indexer would give (the replay checks they are equal: 0 mismatches).
      const prepared = sim.prepare(req);
      const words = new Uint32Array(prepared.seq.buffer, prepared.seq.byteOffset, prepared.seq.length * 2);
      const scores = new Map(sim.config.workerIds.map((id, w) => [id, sim.cache(w).match(words, prepared.seq.length)]));
      const served = sim.serve(prepared, scores);
      blocks += served.blocks;
      hit += served.hit;
      oracle += served.oracle;
    }
    return { blocks, hit, oracle };
  })());

  const markdown = [
    `The shipped conversation trace slice (${requests.length.toLocaleString('en-US')} requests) through the simulated fleet of ` +
      '`kvindex replay` (4 workers x 16,384 blocks of 64 tokens), routed by `KvRouter` over a `ShardedIndexer`, events applied ' +
      `as the fleet publishes them, requests freed on the fleet's model of prefill and decode. ${passes} pass(es) after a warm-up; ` +
      'the phases are the times `route()` reports (record: ActiveSequences bookkeeping), the total is measured around the call. ' +
      'With shard threads and read-your-writes (the default) the lookup first waits until the shards applied the events ' +
      'the previous request just published, which is most of its time here; without it the lookup reads the latest applied state.',
    '',
    table(latency),
    '',
    'Hit rate of the chosen workers (block-weighted) and of the oracle (the best worker at each request, from the cache ' +
      "models of that run; runs differ in what the caches hold, so each has its own oracle). The simulation's own model is " +
      'the routing `kvindex replay` used before KvRouter: blocks to compute plus blocks in flight, ties to the least recently chosen.',
    '',
    table(hits),
  ].join('\n');
  return { title: 'Routing decisions: route() latency and hit rate', markdown, rows };
}

runIfMain(import.meta.url, run);
