/**
 * Offered-load sweep, as Dynamo's mooncake benchmark does it: the conversation trace is
 * simulated once into a script (per request: its lookup and the chosen worker's events, see
 * `src/trace/sim-script.ts`), then replayed open-loop against a fresh indexer with timestamps
 * compressed by increasing factors, in-thread (shards 0) and through 2 shard threads, with and
 * without read-your-writes. At each factor: offered vs achieved requests/s and block-ops/s, and
 * lookup p50/p99: in-thread, and with shards without read-your-writes, the time of the call
 * (lookups read the shards' trees on the calling thread and never wait); with read-your-writes
 * from issue to result, which includes waiting until the shards applied the events queued before
 * the lookup (often the previous request's, queued a moment earlier: the shard's wake-up) and
 * the main thread's own work before it takes the result.
 * The knee is the last factor at which achieved throughput still tracks offered (>= 90 %).
 * The pair the latency target judges (shards 0, and 2 without read-your-writes) runs three
 * rounds per factor, alternating sides, each row pooling its rounds (see `run`).
 *
 * Each factor replays a window of the trace's end that lasts at most `windowS` seconds of wall
 * time once compressed (the whole trace when it fits; at least `MIN_REQUESTS` requests);
 * everything before the window is applied first, unpaced and untimed, so every window sees the
 * steady-state index. Every indexer is warmed first by one pass of the whole script, after which
 * every worker is removed (warm-up.ts), so that no side pays V8's compilation of fresh shard
 * threads inside the window. Requests are issued
 * on schedule without waiting for earlier lookups (at most 256 in flight), and each request's
 * events are applied right after its lookup is issued, so a lookup sees exactly the events of the
 * requests before it.
 */
import { once as onceEvent } from 'node:events';
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { readTraceFile } from '../src/trace/mooncake.js';
import { recordSimulation, type ScriptStep } from '../src/trace/sim-script.js';
import { warmUp } from './warm-up.js';
import { concatLatencies, percentile, quiesce, runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

const KEEPS_UP = 0.9;
const MAX_IN_FLIGHT = 256;
/**
 * The trace's requests come in bursts (about 8 at one timestamp, every ~3 s at 1x): at low
 * factors a window's slowest lookups are the first of each burst, after seconds of idle. With
 * 100 requests (12 bursts) p99 was the second-slowest of those 12 on each side and the 1x ratio
 * ranged 0.9-2.46x between runs of the same build; 300 hold ~36 bursts.
 */
const MIN_REQUESTS = 300;
/** Windows per side and factor of the judged pair, pooled into one row (see `run`). */
const JUDGED_ROUNDS = 3;
/**
 * Factors at which a third series runs in the judged pair's rounds: shards 0 with the other core
 * kept busy by a thread that shares nothing with the indexer (`NEIGHBOUR`). Why: through 2
 * shards both cores are busy at these factors, in-thread one is; this series tells how much of
 * the judged gap a busy neighbour core alone makes. A probe at 3,000x that ran the sides one
 * after the other (not interleaved) had the neighbour lift the in-thread p99 from 23-28 to
 * 47 us; the first full run with the series interleaved in the rounds did not confirm it
 * (in-thread p99 19.6-32.6 us at 1,000-5,000x, with the neighbour 19.6-34.1, 2 shards
 * 40.7-55.4): there the gap is not the neighbour's.
 */
const NEIGHBOUR_FACTORS = new Set([1_000, 2_000, 3_000, 5_000, 7_000]);
/**
 * The neighbour: random writes over 16 MiB (past the L2 cache, within the L3), forever, until
 * terminated. It posts once before its loop, so that the window starts with it running.
 */
const NEIGHBOUR_SERIES = '0, other core busy';
const NEIGHBOUR = `
const { parentPort } = require('node:worker_threads');
const m = new Int32Array(4 << 20);
let x = 1;
parentPort.postMessage('running');
for (;;) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; m[(x >>> 0) & ((4 << 20) - 1)]++; }
`;

interface WindowResult {
  requests: number;
  offeredRps: number;
  achievedRps: number;
  offeredOps: number;
  achievedOps: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
  maxUs: number;
  /**
   * Shard lookups in the window that found their shard's writer stopped inside a write section
   * (descheduled): answered past it, and tried but then waited (ShardedIndexer.readsPastWriter).
   */
  past: { answered: number; waited: number } | null;
  /** Lookup p99 of each round pooled into this row (one entry: a single window). */
  roundP99s: number[];
  /** Lookups issued right after the loop slept for their arrival time (see `WindowRun.slept`). */
  slept: number;
  /** Lookup p99 of the others (NaN: none). */
  awakeP99Us: number;
}

/** One window's raw measurements, before rounds are pooled (`pool`). */
interface WindowRun {
  /** Lookup latencies, us, sorted. */
  latencies: Float64Array;
  wallS: number;
  /** The window's schedule (first to last arrival, compressed), s; the wall time when unpaced. */
  spanS: number;
  ops: number;
  past: { answered: number; waited: number } | null;
  /**
   * Lookups issued right after the loop slept (1 ms or more) until their arrival time, and the
   * latencies of the others, sorted. Why: after a sleep the calling thread's first lookup costs
   * several times a hot one on this host (the idle rows of the lookup suite), and a side that
   * keeps up easily sleeps more: a probe at 1,000-3,000x counted 623-1,284 such lookups of
   * 12,031 through 2 shards against 8-705 in-thread, and 28-74 of each side's slowest 121.
   */
  slept: number;
  awake: Float64Array;
}

/**
 * Pools the rounds of one window (the same factor and series, run at different moments): the
 * percentiles of all their lookups together, rates over their summed times, counters summed.
 */
function pool(runs: readonly WindowRun[]): WindowResult {
  const all = concatLatencies(runs.map((r) => r.latencies));
  all.sort();
  const awake = concatLatencies(runs.map((r) => r.awake));
  awake.sort();
  const n = all.length;
  const sum = (f: (r: WindowRun) => number): number => runs.reduce((k, r) => k + f(r), 0);
  const spanS = sum((r) => r.spanS);
  const wallS = sum((r) => r.wallS);
  const ops = sum((r) => r.ops);
  const past = runs[0]!.past === null ? null : { answered: sum((r) => r.past!.answered), waited: sum((r) => r.past!.waited) };
  return {
    requests: n,
    offeredRps: n / spanS,
    achievedRps: n / wallS,
    offeredOps: ops / spanS,
    achievedOps: ops / wallS,
    p50Us: percentile(all, 50),
    p99Us: percentile(all, 99),
    p999Us: percentile(all, 99.9),
    maxUs: all[n - 1]!,
    past,
    roundP99s: runs.map((r) => percentile(r.latencies, 99)),
    slept: sum((r) => r.slept),
    awakeP99Us: awake.length === 0 ? NaN : percentile(awake, 99),
  };
}

function row(shards: string, factor: number, r: WindowResult, keeps: boolean | null): Record<string, string | number | boolean> {
  const paced = factor !== Infinity;
  return {
    shards,
    factor: paced ? factor : 'unpaced',
    requests: r.requests,
    'offered req/s': paced ? r.offeredRps : '-',
    'achieved req/s': r.achievedRps,
    'offered block-ops/s': paced ? r.offeredOps : '-',
    'achieved block-ops/s': r.achievedOps,
    'lookup p50 us': r.p50Us,
    'lookup p99 us': r.p99Us,
    'lookup p99.9 us': r.p999Us,
    'lookup max us': r.maxUs,
    'keeps up': keeps ?? '-',
    'shard lookups read past a stopped writer (waited)': r.past === null ? '-' : `${r.past.answered} (${r.past.waited})`,
    'lookup p99 per round us': r.roundP99s.map((x) => x.toPrecision(4)).join(' / '),
    'lookups right after a sleep': paced ? r.slept : '-',
    'lookup p99 of the others us': paced && !Number.isNaN(r.awakeP99Us) ? r.awakeP99Us : '-',
  };
}

function traceFile(shared: string): string {
  const file = resolve(shared, 'traces/conversation_trace.jsonl');
  if (existsSync(file)) return file;
  return fileURLToPath(new URL('../../data/conversation_trace_head.jsonl', import.meta.url));
}

const opsOf = (s: ScriptStep): number => s.stored + s.removed + s.matched;

/** Replays `steps[from..]` paced at `factor` (Infinity: unpaced) after applying the rest. */
async function replayWindow(
  steps: readonly ScriptStep[], from: number, factor: number, shards: number, readYourWrites: boolean, blocking: boolean, neighbour = false,
): Promise<WindowRun> {
  // The previous window's indexer is garbage now: collected here, the same for every series,
  // not by a major GC inside this window.
  await quiesce(100);
  const ix = await ShardedIndexer.create({ shards, blockSize: 64, readYourWrites });
  let busy: Worker | null = null;
  try {
    await warmUp(ix, steps.flatMap((s) => s.events), steps.map((s) => s.local));
    for (let i = 0; i < from; i++) {
      for (const e of steps[i]!.events) ix.applyEvent(e);
      if (ix.needsDrain) await ix.drained();
    }
    await ix.flush();
    await quiesce(100); // nor the garbage of applying everything before the window
    if (neighbour) {
      busy = new Worker(NEIGHBOUR, { eval: true });
      await onceEvent(busy, 'message');
    }

    const n = steps.length - from;
    const ts0 = steps[from]!.timestamp;
    const latencies = new Float64Array(n);
    const afterSleep = new Uint8Array(n);
    const inFlight: Promise<void>[] = [];
    let ops = 0;
    const past0 = ix.readsPastWriter;
    const t0 = performance.now();
    for (let i = from; i < steps.length; i++) {
      const step = steps[i]!;
      if (factor !== Infinity) {
        const wait = t0 + (step.timestamp - ts0) / factor - performance.now();
        if (wait >= 1) {
          await sleep(wait);
          afterSleep[i - from] = 1;
        }
      }
      const k = i - from;
      const issued = performance.now();
      if (shards === 0) {
        // In-thread the lookup completes inside the call: time the call itself, before this
        // request's events are applied (a .then would run only after them).
        await ix.findMatches(step.local);
        latencies[k] = (performance.now() - issued) * 1000;
      } else if (!readYourWrites || blocking) {
        // On the calling thread: the synchronous call, timed (with read-your-writes it blocks
        // until the shards applied the events before it).
        ix.findMatchesSync(step.local);
        latencies[k] = (performance.now() - issued) * 1000;
      } else {
        inFlight.push(
          ix.findMatches(step.local).then(() => {
            latencies[k] = (performance.now() - issued) * 1000;
          }),
        );
      }
      for (const e of step.events) ix.applyEvent(e);
      ops += opsOf(step);
      if (ix.needsDrain) await ix.drained();
      if (inFlight.length >= MAX_IN_FLIGHT) await Promise.all(inFlight.splice(0, MAX_IN_FLIGHT / 2));
    }
    await Promise.all(inFlight);
    await ix.flush();
    const wallS = (performance.now() - t0) / 1000;
    // Offered: the window's schedule (first to last arrival, compressed); unpaced: the wall time.
    const spanS = factor === Infinity ? wallS : Math.max(1e-3, (steps[steps.length - 1]!.timestamp - ts0) / 1000 / factor);
    const awake = latencies.filter((_, k) => afterSleep[k] === 0).sort();
    latencies.sort();
    return {
      latencies,
      slept: n - awake.length,
      awake,
      wallS,
      spanS,
      ops,
      past: shards === 0 ? null : { answered: ix.readsPastWriter.answered - past0.answered, waited: ix.readsPastWriter.waited - past0.waited },
    };
  } finally {
    await busy?.terminate();
    await ix.close();
  }
}

/** A series' label: `readYourWrites: false` is always the synchronous call, unlabelled. */
function seriesName(shards: number, readYourWrites: boolean, blocking: boolean, neighbour: boolean): string {
  if (shards === 0) return neighbour ? NEIGHBOUR_SERIES : '0';
  return `${shards}, readYourWrites ${readYourWrites}${readYourWrites && blocking ? ', blocking' : ''}`;
}

/**
 * First step of the window lasting at most `windowS` seconds at `factor`, from the end, but
 * holding at least `MIN_REQUESTS` requests: at factor 1 five seconds hold 22 requests, whose
 * p99 would be their maximum.
 */
function windowStart(steps: readonly ScriptStep[], factor: number, windowS: number): number {
  const end = steps[steps.length - 1]!.timestamp;
  const from = end - windowS * 1000 * factor;
  let i = 0;
  while (i < steps.length - 1 && steps[i]!.timestamp < from) i++;
  return Math.max(0, Math.min(i, steps.length - MIN_REQUESTS));
}

/** One series of the sweep: its windows' rows, in factor order, and where it stopped keeping up. */
class Series {
  readonly name: string;
  readonly rows: Array<Record<string, string | number | boolean>> = [];
  /** No more paced windows: past the knee for two factors, or far past it. */
  done = false;
  private best: { factor: number; rps: number } | null = null;
  private misses = 0;
  private capacity = 0;

  constructor(readonly shards: number, readonly readYourWrites: boolean, readonly blocking: boolean, readonly neighbour = false) {
    this.name = seriesName(shards, readYourWrites, blocking, neighbour);
  }

  /** Records a window (`Infinity`: the unpaced run). */
  add(factor: number, r: WindowResult): void {
    if (factor === Infinity) {
      this.rows.push(row(this.name, Infinity, r, null));
      this.capacity = r.achievedRps;
      return;
    }
    const keeps = r.achievedRps >= KEEPS_UP * r.offeredRps;
    this.rows.push(row(this.name, factor, r, keeps));
    if (keeps && this.misses === 0) this.best = { factor, rps: r.achievedRps };
    if (!keeps) this.misses++;
    // Past the knee for two factors (or far past it): the rest only gets slower to run.
    if (this.misses >= 2 || r.achievedRps < 0.5 * r.offeredRps) this.done = true;
  }

  /** The knee line: the last factor that kept up, and the unpaced capacity. */
  knee(): string {
    const cap = `capacity ${Math.round(this.capacity).toLocaleString('en-US')} req/s unpaced`;
    return this.best === null
      ? `shards ${this.name}: no factor kept up (${cap})`
      : `shards ${this.name}: knee at ${this.best.factor}x (${Math.round(this.best.rps).toLocaleString('en-US')} req/s achieved; ${cap})`;
  }
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  // The trace offers 3.4 req/s on average: the grid is dense between 1,000x and 10,000x, where
  // the indexer's capacity (thousands of requests/s on this machine) lies.
  const factors = opts.quick
    ? [10, 100, 1_000, 2_000, 4_000, 8_000, 16_000]
    : [1, 10, 30, 100, 300, 1_000, 2_000, 3_000, 5_000, 7_000, 10_000, 20_000, 50_000];
  const windowS = opts.quick ? 1 : 5;
  const rounds = opts.quick ? 1 : JUDGED_ROUNDS;
  const file = traceFile(opts.shared);
  const { requests } = await readTraceFile(file, opts.quick ? 3_000 : Infinity);
  const t = performance.now();
  const script = recordSimulation(requests, { workers: 4, cacheBlocks: 16_384, blockSize: 64, seed: 0n });
  const simS = (performance.now() - t) / 1000;
  const steps = script.steps;
  const spanS = (steps[steps.length - 1]!.timestamp - steps[0]!.timestamp) / 1000;

  // The judged pair (in-thread, and 2 shards without read-your-writes: see p99Verdict) runs
  // factor by factor, so that each ratio compares two windows run seconds apart rather than one
  // series' length (minutes) apart: this VM's speed drifts on that scale (in-thread p50 of the
  // same build 0.2-0.5 us within an hour). The read-your-writes series run after them, one after
  // the other: with every series back to back at each factor, a window of the async one (hundreds
  // of lookups in flight through the shards' ports) left the windows after it slower, in-thread
  // ones too (2-shard p99 19-24 us instead of 8-10 at 5,000-10,000x, in-thread capacity 10k
  // instead of 20k req/s once; cause not identified, the blocking series did not do it).
  const series = [[0, true, false], [2, false, true], [2, true, false], [2, true, true]].map(
    ([shards, readYourWrites, blocking]) => new Series(shards as number, readYourWrites as boolean, blocking as boolean),
  );
  const neighbour = new Series(0, true, false, true);
  const once = (s: Series, factor: number): Promise<WindowRun> =>
    replayWindow(steps, factor === Infinity ? 0 : windowStart(steps, factor, windowS), factor, s.shards, s.readYourWrites, s.blocking, s.neighbour);
  const record = (s: Series, factor: number, r: WindowResult): void => {
    s.add(factor, r);
    if (factor !== Infinity) {
      process.stderr.write(`replay: shards ${s.name} x${factor}: offered ${r.offeredRps.toFixed(0)} req/s, achieved ${r.achievedRps.toFixed(0)}, p99 ${r.roundP99s.map((x) => x.toFixed(1)).join('/')} us\n`);
    }
  };
  // The judged pair runs `rounds` rounds at each factor, alternating the two sides window by
  // window, and each row pools its rounds' lookups. One window per side measured the ratio
  // this target judges at 1.3-2.6x for one build at one factor within an hour (2,000x, 2-core
  // dev VM: the host's share of two cores moves on the scale of seconds); a row that pools
  // three windows taken in the same minute on both sides compares the sides, not the moments.
  // Each round's own p99 is listed beside the pooled one.
  // At NEIGHBOUR_FACTORS the reference series (shards 0, the other core busy) joins the rounds.
  const judged = series.slice(0, 2);
  for (const factor of [...factors, Infinity]) {
    const active = judged.filter((s) => !s.done || factor === Infinity);
    if (NEIGHBOUR_FACTORS.has(factor) && active.length > 0) active.push(neighbour);
    const runs = active.map((): WindowRun[] => []);
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < active.length; k++) runs[k]!.push(await once(active[k]!, factor));
    }
    active.forEach((s, k) => record(s, factor, pool(runs[k]!)));
  }
  for (const s of series.slice(2)) {
    for (const factor of factors) if (!s.done) record(s, factor, pool([await once(s, factor)]));
    record(s, Infinity, pool([await once(s, Infinity)]));
  }
  const rows = [...series, neighbour].flatMap((s) => s.rows);
  const knees = series.map((s) => s.knee());

  const markdown = [
    `Trace: ${requests.length.toLocaleString('en-US')} requests of the conversation trace (${spanS.toFixed(0)} s), ` +
      `simulated once on 4 workers x 16,384 blocks of 64 tokens (${simS.toFixed(1)} s, hit rate ` +
      `${(script.hitRate * 100).toFixed(1)} % chosen vs ${(script.oracleHitRate * 100).toFixed(1)} % oracle). Each factor ` +
      `replays the trace's last ${windowS} s of compressed time (after applying everything before it unpaced), ` +
      'open loop; "unpaced" replays the whole script as fast as possible. Block-ops = stored + removed blocks + ' +
      `blocks matched by lookups. A factor keeps up when achieved >= ${KEEPS_UP * 100} % of offered requests/s. ` +
      'With shards and `readYourWrites: false` lookups read the shards\' trees on the calling thread without waiting ' +
      '(timed as the call); with the default, a lookup right after the previous request\'s events waits until the shards ' +
      'applied them: `findMatches` (timed from issue to result, which the loop sees when it next yields), or, "blocking", ' +
      '`findMatchesSync`, which spins and then sleeps until they did (timed as the call). A column counts ' +
      'shard lookups (two per request with 2 shards) that found their shard\'s writer stopped inside a write section ' +
      '(descheduled: three busy threads on two cores): answered by reading the tree past it (src/tree/unit-log.ts) ' +
      'or, in parentheses, tried and then waited for the lock. "Lookups right after a sleep" counts the lookups issued ' +
      'just after the loop slept (1 ms or more) until their arrival time, and the column after it is the p99 of the others. ' +
      `The judged pair (shards 0, and 2 with \`readYourWrites: false\`) runs ${rounds} round${rounds === 1 ? '' : 's'} at every factor, ` +
      'the two sides alternating window by window; each of its rows pools its rounds (requests, percentiles and rates ' +
      'over all of them, counters summed), and a column lists each round\'s own lookup p99. The read-your-writes ' +
      'series run one window per factor. ' +
      `"${NEIGHBOUR_SERIES}" is a reference, not judged: shards 0 at ${[...NEIGHBOUR_FACTORS].join(', ')}x, in the judged ` +
      'pair\'s rounds, while a thread that shares nothing with the indexer writes random words of a 16 MiB array on the ' +
      'other core (through 2 shards both cores are busy at these factors; in-thread only one is).',
    '',
    table(rows),
    '',
    `Knee (last factor that keeps up): ${knees.join('; ')}.`,
    '',
    p99Verdict(rows),
  ].join('\n');
  return { title: 'Offered-load sweep (conversation trace)', markdown, rows };
}

/**
 * The sweep's latency target: through 2 shards, lookup p99 within 2x of shards 0 at every
 * factor both ran (the paced ones; "unpaced" compares capacities, reported by the knees). It is
 * judged on `readYourWrites: false`, the configuration the project names for a router under
 * load. With read-your-writes a lookup right after events waits for a shard thread to wake and
 * apply them, which in-thread costs nothing inside the lookup (applyEvent applied them before):
 * those ratios are printed beside it, not judged.
 */
function p99Verdict(rows: ReadonlyArray<Record<string, string | number | boolean>>): string {
  type Row = Record<string, string | number | boolean>;
  // The worst ratio of a series to shards 0 at a common factor, on the p99s `of` gives per row,
  // paired by position: the pooled p99, or each round's (round r against round r).
  const worst = (series: string, of: (r: Row) => number[], against = '0'): { ratio: number; text: string } => {
    const base = new Map(rows.filter((r) => r['shards'] === against).map((r) => [r['factor'], of(r)]));
    let ratio = 0;
    let at: string | number = '-';
    for (const r of rows) {
      const b = base.get(r['factor']);
      if (r['shards'] !== series || r['factor'] === 'unpaced' || b === undefined) continue;
      of(r).forEach((x, i) => {
        if (b[i] !== undefined && x / b[i]! > ratio) [ratio, at] = [x / b[i]!, r['factor'] as string | number];
      });
    }
    return { ratio, text: `${ratio.toFixed(2)}x (at ${at}x)` };
  };
  const pooled = (r: Row): number[] => [r['lookup p99 us'] as number];
  const perRound = (r: Row): number[] => String(r['lookup p99 per round us']).split(' / ').map(Number);
  const judged = worst('2, readYourWrites false', pooled);
  const awakeOf = (r: Row): number[] => (typeof r['lookup p99 of the others us'] === 'number' ? [r['lookup p99 of the others us']] : []);
  const awake = worst('2, readYourWrites false', awakeOf);
  const rounds = worst('2, readYourWrites false', perRound);
  const busy = worst('2, readYourWrites false', pooled, NEIGHBOUR_SERIES);
  const busyBase = rows.filter((r) => r['shards'] === NEIGHBOUR_SERIES).map((r) => `${(r['lookup p99 us'] as number).toPrecision(4)} us at ${String(r['factor'])}x`);
  return [
    `Target: lookup p99 through 2 shards (\`readYourWrites: false\`, a router under load) within 2x of shards 0 at every factor: `,
    `worst ratio ${judged.text} -> **${judged.ratio <= 2 ? 'met' : 'NOT met'}** (rounds pooled; the worst single round's ratio, `,
    `round against round: ${rounds.text}). `,
    `Not judged, beside it: the same ratio on the lookups that did not come right after the loop slept until their arrival ` +
      `(the first lookup after a sleep pays this host's wake-up cost, and the side that keeps up more easily sleeps more: ` +
      `the column "lookups right after a sleep"): worst ${awake.text}. `,
    busyBase.length === 0 ? '' : `Not judged, beside it: shards 0 with the other core busy (${NEIGHBOUR_SERIES}) measured p99 ${busyBase.join(', ')}; ` +
      `the 2-shard p99 against it: worst ${busy.text}. `,
    'With read-your-writes (the default), not judged: a lookup right after the previous request\'s events waits for ',
    `a shard to wake and apply them: worst ratio ${worst('2, readYourWrites true', pooled).text} (findMatches), `,
    `${worst('2, readYourWrites true, blocking', pooled).text} (blocking).`,
  ].join('');
}

// `node dist/bench/replay.bench.js [--quick]` runs this suite alone.
runIfMain(import.meta.url, run);
