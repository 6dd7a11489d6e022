/**
 * Routing policies measured in time (issue 39): the timed replay (src/trace/timed-sim.ts) of
 * slices of the Mooncake conversation and synthetic traces through the default fleet (4 engines,
 * 'dynamo-mocker' parameters, 16,384 blocks of 64 tokens, KV events 20 ms late), once per
 * policy. Tuning slices (the first 2,000 requests, which the `kv` configuration was tuned on) at
 * loads 0.5 and 0.8; held-out slices (never tuned on) at 0.8; a load sweep of `kv` and `dynamo`
 * on the synthetic tuning slice. Simulated time: the numbers do not depend on the machine.
 *
 * The goal it judges: at load 0.8, `kv` has the best TTFT p99 of all policies, at least 20 %
 * better than `dynamo`, at no lower throughput, on every slice; beside it, the p99 of the
 * per-request TTFT lower bound (src/trace/timed-bound.ts), which no policy can go below, and two
 * references that say what limits the goal: the `oracle` policy (reads the engines' true state:
 * what perfect information gives a per-request router) and `kv` with simultaneous arrivals
 * dispatched longest first (`burstOrder`: what reordering a burst gives).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { readTraceFile, type TraceRequest } from '../src/trace/mooncake.js';
import { POLICY_NAMES, type PolicyName } from '../src/trace/policies/policy.js';
import { runTimedSim } from '../src/trace/timed-sim.js';
import { summarizeTimed, type TimedSummary } from '../src/trace/timed-stats.js';
import { runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

interface Slice {
  trace: 'conversation' | 'synthetic';
  /** Lines skipped before the slice. */
  skip: number;
  count: number;
  tuned: boolean;
  loads: number[];
}

const SLICES: Slice[] = [
  { trace: 'conversation', skip: 0, count: 2000, tuned: true, loads: [0.5, 0.8] },
  { trace: 'synthetic', skip: 0, count: 2000, tuned: true, loads: [0.5, 0.8] },
  // Held out: every other 2,000-request slice of both traces (fixed before the candidates of
  // issue 39's second round were measured; the first round held out 4001-6000, 8001-10000 and
  // synthetic 2001-3993).
  { trace: 'conversation', skip: 2000, count: 2000, tuned: false, loads: [0.8] },
  { trace: 'conversation', skip: 4000, count: 2000, tuned: false, loads: [0.8] },
  { trace: 'conversation', skip: 6000, count: 2000, tuned: false, loads: [0.8] },
  { trace: 'conversation', skip: 8000, count: 2000, tuned: false, loads: [0.8] },
  { trace: 'conversation', skip: 10000, count: 2000, tuned: false, loads: [0.8] },
  { trace: 'synthetic', skip: 2000, count: 2000, tuned: false, loads: [0.8] },
];
const SWEEP = [0.3, 0.5, 0.7, 0.8, 0.9, 1.0];

const ms = (x: number): string => (x >= 10_000 ? `${(x / 1000).toFixed(1)} s` : `${Math.round(x)} ms`);

async function slice(shared: string, s: Slice, quick: boolean): Promise<TraceRequest[]> {
  const file = resolve(shared, 'traces', `${s.trace}_trace.jsonl`);
  if (!existsSync(file)) throw new Error(`ttft bench: ${file} not found (the shared traces)`);
  const count = quick ? 300 : s.count;
  return (await readTraceFile(file, s.skip + count)).requests.filter((r) => r.line > s.skip);
}

/** Runs the suite. */
export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const rows: Array<Record<string, string | number | boolean>> = [];
  const sections: string[] = [];
  const verdicts: string[] = [];
  const references: string[] = [];
  for (const s of opts.quick ? SLICES.slice(0, 2) : SLICES) {
    const requests = await slice(opts.shared, s, opts.quick);
    const name = `${s.trace} ${s.skip + 1}-${s.skip + requests.length}${s.tuned ? ' (tuning slice)' : ' (held out)'}`;
    for (const load of opts.quick ? [0.8] : s.loads) {
      let bounds: Float64Array | null = null;
      const runs: TimedSummary[] = POLICY_NAMES.map((policy) => {
        const raw = runTimedSim(requests, { policy, load });
        bounds ??= raw.requests.ttftBoundMs;
        return summarizeTimed(raw, load);
      });
      const tableRows = runs.map((r) => ({
        policy: r.policy,
        'TTFT p50': ms(r.ttftMs.p50),
        'TTFT p90': ms(r.ttftMs.p90),
        'TTFT p99': ms(r.ttftMs.p99),
        'TPOT p50': `${r.tpotMs.p50.toFixed(1)} ms`,
        'e2e p50': ms(r.e2eMs.p50),
        'e2e p99': ms(r.e2eMs.p99),
        'queue p99': ms(r.queueMs.p99),
        'req/s': r.throughputRps.toFixed(3),
        'tok/s': Math.round(r.throughputTokS),
        cached: `${(100 * r.cachedTokenFraction).toFixed(1)} %`,
      }));
      sections.push(`**${name}, load ${load}** (one engine's capacity on the slice, caching off: ${runs[0]!.engineCapacityRps!.toFixed(3)} req/s)\n\n${table(tableRows)}`);
      for (const r of runs) {
        rows.push({
          trace: s.trace, skip: s.skip, tuned: s.tuned, load, policy: r.policy,
          ttftP50: r.ttftMs.p50, ttftP90: r.ttftMs.p90, ttftP99: r.ttftMs.p99, ttftBoundP99: r.ttftBoundMs.p99, tpotP50: r.tpotMs.p50,
          e2eP50: r.e2eMs.p50, e2eP99: r.e2eMs.p99, queueP99: r.queueMs.p99,
          throughputRps: r.throughputRps, throughputTokS: r.throughputTokS, cachedTokenFraction: r.cachedTokenFraction,
        });
      }
      if (load === 0.8) {
        // References (not routers, not in the policy table): the greedy oracle, which reads the
        // engines' true state, and kv with simultaneous arrivals dispatched longest first.
        const oracle = summarizeTimed(runTimedSim(requests, { policy: 'oracle', load }), load);
        const lpt = summarizeTimed(runTimedSim(requests, { policy: 'kv', load, burstOrder: 'longest-first' }), load);
        const by = (p: PolicyName): TimedSummary => runs.find((r) => r.policy === p)!;
        const kv = by('kv');
        const dynamo = by('dynamo');
        const gain = 1 - kv.ttftMs.p99 / dynamo.ttftMs.p99;
        // Best of the policies; `kv-time` is a candidate configuration of kv itself,
        // reported in its own column.
        const best = runs.every((r) => r.policy === 'kv' || r.policy === 'kv-time' || kv.ttftMs.p99 <= r.ttftMs.p99);
        const thr = kv.throughputRps / dynamo.throughputRps;
        const met = best && gain >= 0.2 && thr >= 1;
        // The bound (timed-bound.ts) is the same for every policy: no policy's p99 is below it.
        const bound = kv.ttftBoundMs.p99;
        const pct = (x: number): string => `${(100 * x).toFixed(1)} %`;
        verdicts.push(`| ${name} | ${ms(kv.ttftMs.p99)} | ${ms(dynamo.ttftMs.p99)} | ${pct(gain)} | ${ms(by('kv-time').ttftMs.p99)} | ${ms(bound)} | ${pct(1 - bound / dynamo.ttftMs.p99)} | `
          + `${pct((dynamo.ttftMs.p99 - kv.ttftMs.p99) / (dynamo.ttftMs.p99 - bound))} | ${pct(1 - kv.ttftMs.p90 / dynamo.ttftMs.p90)} | ${best ? 'yes' : 'no'} | ${thr.toFixed(4)}x | ${met ? 'met' : 'NOT met'} |`);
        // Requests whose bound plus a fixed overhead exceeds the 20 % target: a p99 of 2,000
        // requests allows 20, so past 20 the target needs every long prompt within that
        // overhead of an idle engine with a perfect cache.
        const target = 0.8 * dynamo.ttftMs.p99;
        const over = (extra: number): number => Array.from(bounds!).filter((b) => b + extra > target).length;
        references.push(`| ${name} | ${ms(target)} | ${over(0)} / ${over(100)} / ${over(200)} | ${ms(oracle.ttftMs.p99)} | ${pct(1 - oracle.ttftMs.p99 / dynamo.ttftMs.p99)} | `
          + `${ms(lpt.ttftMs.p99)} | ${pct(1 - lpt.ttftMs.p99 / dynamo.ttftMs.p99)} | ${ms(lpt.ttftMs.p50)} (kv ${ms(kv.ttftMs.p50)}) |`);
        rows.push({ trace: s.trace, skip: s.skip, tuned: s.tuned, load, reference: 'oracle', ttftP50: oracle.ttftMs.p50, ttftP90: oracle.ttftMs.p90, ttftP99: oracle.ttftMs.p99, throughputRps: oracle.throughputRps });
        rows.push({ trace: s.trace, skip: s.skip, tuned: s.tuned, load, reference: 'kv longest-first', ttftP50: lpt.ttftMs.p50, ttftP90: lpt.ttftMs.p90, ttftP99: lpt.ttftMs.p99, throughputRps: lpt.throughputRps });
      }
    }
  }
  // The sweep: TTFT p99 against achieved throughput, kv and dynamo, synthetic tuning slice.
  const sweepRows: Array<Record<string, string | number>> = [];
  if (!opts.quick) {
    const requests = await slice(opts.shared, SLICES[1]!, false);
    for (const load of SWEEP) {
      for (const policy of ['kv', 'dynamo', 'llm-d', 'round-robin'] as const) {
        const r = summarizeTimed(runTimedSim(requests, { policy, load }), load);
        sweepRows.push({ load, policy, 'req/s': r.throughputRps.toFixed(3), 'TTFT p50': ms(r.ttftMs.p50), 'TTFT p99': ms(r.ttftMs.p99), cached: `${(100 * r.cachedTokenFraction).toFixed(1)} %` });
        rows.push({ sweep: true, load, policy, throughputRps: r.throughputRps, ttftP50: r.ttftMs.p50, ttftP99: r.ttftMs.p99 });
      }
    }
  }
  const markdown = [
    'Timed replay (`kvindex replay --policy all --load X`, docs/replay-timed.md): 4 engines with the `dynamo-mocker` parameter set '
      + '(Dynamo mocker\'s scheduler limits and timing polynomials), 16,384 blocks of 64 tokens each, KV events 20 ms late. '
      + 'Times are simulated ms (machine-independent). `kv` is kvindex\'s default configuration (prefillLoadScale 30, overlapBonus 100, prefillTokensPerMs = the engines\' profiled prefill speed, 48.5), '
      + '`dynamo` KvRouter with Dynamo\'s defaults, `kv-time` the candidate cost in predicted ms (timeCost with the engines\' profile, overlapBonus 10 ms).',
    '',
    '**Goal** (load 0.8): kv has the best TTFT p99 of all policies, >= 20 % better than dynamo, at no lower throughput. '
      + '"bound p99": the p99 of each request\'s TTFT lower bound (best possible cache, engine doing nothing else; src/trace/timed-bound.ts), below which no policy can go; '
      + '"closable": the share of dynamo\'s p99 any policy could remove; "of gap": the share of the dynamo-to-bound gap kv removes; "p90 gain": kv against dynamo at p90.',
    '',
    '| slice | kv p99 | dynamo p99 | gain | kv-time p99 | bound p99 | closable | of gap | p90 gain | kv best (of the 7) | throughput kv/dynamo | goal |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |',
    ...verdicts,
    '',
    '**What limits it** (load 0.8): "target" is 80 % of dynamo\'s p99; "over target at bound + 0 / 100 / 200 ms": requests whose lower bound plus that much '
      + 'exceeds it (a p99 of 2,000 requests allows 20); `oracle` (a reference, not a router) reads the engines\' true state and sends each request where its own first token is predicted soonest; '
      + '"kv longest-first" is kv with the requests that arrive at the same instant dispatched longest prompt first (a router that batches simultaneous arrivals; not a cost).',
    '',
    '| slice | target | over target at bound + 0 / 100 / 200 ms | oracle p99 | oracle gain | kv longest-first p99 | its gain | its p50 |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...references,
    '',
    ...sections.flatMap((s) => [s, '']),
    ...(sweepRows.length > 0 ? ['**Load sweep, synthetic 1-2000**: TTFT against achieved throughput', '', table(sweepRows), ''] : []),
  ].join('\n');
  return { title: 'Routing policies in time: TTFT per policy (timed replay)', markdown, rows };
}

runIfMain(import.meta.url, run);
