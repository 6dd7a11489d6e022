/**
 * Block-hash benchmark (issue 10): Dynamo's per-request hashing (tokens -> block hashes ->
 * sequence hashes) in WebAssembly, as the product does it, against the batched JavaScript
 * xxh3 it replaced and one native `@node-rs/xxhash` call per block, in one tinybench `Bench`
 * per request shape so the rows of a table come from the same run. Shapes: an 8,192-token
 * prompt and a 1,000-block prompt at block sizes 16, 32, 64 and 128.
 *
 * Then end to end on the conversation workload's final tree, in-thread: 8,192-token prompts
 * hashed (block size 64) and looked up, each step timed on its own and together.
 *
 * Latencies are per call (p50, p99, p99.9, max); "ns/block" is the per-call median divided by
 * the block count. `runHashBench` does not run on import; `bench/run.ts` calls it.
 */

import { resolve } from 'node:path';
import { Bench, hrtimeNow } from 'tinybench';

import { computeBlockHashes, computeSequenceHashes } from '../src/hash/block-hash.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { createMatchResult } from '../src/tree/match-result.js';
import { conversationPrompts } from './hash/conversation-prompts.js';
import { computeBlockHashesJs } from './hash/js-path.js';
import { computeBlockHashesPerBlockNative, loadNativeXxh3 } from './hash/per-block.js';
import { percentile, table, type SuiteOptions, type SuiteResult } from './suite.js';
import { loadWorkload, workloadPath } from './workloads.js';

/** One request shape: `tokens` tokens cut into blocks of `blockSize`. */
interface Scenario {
  readonly name: string;
  readonly tokens: number;
  readonly blockSize: number;
}

const BLOCK_SIZES = [16, 32, 64, 128];
const SCENARIOS: readonly Scenario[] = [
  ...BLOCK_SIZES.map((bs) => ({ name: `8192 tokens, bs ${bs}`, tokens: 8192, blockSize: bs })),
  ...BLOCK_SIZES.map((bs) => ({ name: `1000 blocks, bs ${bs}`, tokens: 1000 * bs, blockSize: bs })),
];

/** The targets: WebAssembly at least this many times faster than the JavaScript path. */
const TARGETS: ReadonlyArray<{ blockSize: number; speedup: number }> = [
  { blockSize: 16, speedup: 4 },
  { blockSize: 64, speedup: 3 },
];

const WASM = 'WebAssembly computeBlockHashes';
const JS = 'JavaScript batched xxh3 (before)';
const NATIVE = 'per-block @node-rs/xxhash';

/** Deterministic token ids in a 150k vocabulary (xorshift32; hashing cost is data-blind). */
function makeTokens(count: number): Uint32Array {
  const tokens = new Uint32Array(count);
  let x = 0x9e3779b9;
  for (let i = 0; i < count; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    tokens[i] = (x >>> 0) % 150_000;
  }
  return tokens;
}

/** Keeps results alive so no task body is dead code. */
let sink = 0n;

function keep(hashes: BigUint64Array): void {
  sink ^= hashes[hashes.length - 1] ?? 0n;
}

const r2 = (x: number): number => Math.round(x * 100) / 100;
const r1 = (x: number): number => Math.round(x * 10) / 10;

type Row = Record<string, string | number | boolean>;

/** The per-block suite: one Bench per scenario. */
async function perBlock(quick: boolean): Promise<{ rows: Row[]; medians: Map<string, number> }> {
  const native = await loadNativeXxh3();
  const time = quick ? 150 : 600;
  const warmupTime = quick ? 50 : 150;
  const rows: Row[] = [];
  /** `${scenario}|${variant}` -> ns per block, median. */
  const medians = new Map<string, number>();
  for (const scenario of SCENARIOS) {
    const tokens = makeTokens(scenario.tokens);
    const tokenList = Array.from(tokens);
    const bs = scenario.blockSize;
    const blocks = Math.floor(scenario.tokens / bs);
    const local = computeBlockHashes(tokens, bs);
    const bench = new Bench({ name: scenario.name, time, warmupTime, throws: true, now: hrtimeNow });
    bench.add(WASM, () => keep(computeBlockHashes(tokens, bs)));
    bench.add('WebAssembly, number[] input', () => keep(computeBlockHashes(tokenList, bs)));
    bench.add(JS, () => keep(computeBlockHashesJs(tokens, bs)));
    bench.add('JavaScript batched, number[] input', () => keep(computeBlockHashesJs(tokenList, bs)));
    if (native !== null) bench.add(NATIVE, () => keep(computeBlockHashesPerBlockNative(tokens, bs, native)));
    bench.add('computeSequenceHashes (WebAssembly)', () => keep(computeSequenceHashes(local)));
    bench.runSync();

    const results = new Map(bench.tasks.map((t) => [t.name, t.result]));
    const jsResult = results.get(JS);
    if (jsResult === undefined || jsResult.state !== 'completed') throw new Error(`hash bench: ${JS} did not complete`);
    const jsMedian = jsResult.latency.p50;
    for (const task of bench.tasks) {
      const result = task.result;
      if (result.state !== 'completed') throw new Error(`hash bench task ${task.name} ended ${result.state}`);
      const l = result.latency;
      const nsPerBlock = (l.p50 * 1e6) / blocks;
      medians.set(`${scenario.name}|${task.name}`, nsPerBlock);
      rows.push({
        scenario: scenario.name,
        variant: task.name,
        blocks,
        'ns/block p50': r1(nsPerBlock),
        'p50 us': r2(l.p50 * 1e3),
        'p99 us': r2(l.p99 * 1e3),
        'p99.9 us': r2(l.p999 * 1e3),
        'max us': r2(l.max * 1e3),
        'JS / this': task.name.startsWith('computeSequenceHashes') ? '-' : `${(jsMedian / l.p50).toFixed(2)}x`,
        samples: l.samplesCount,
      });
    }
  }
  return { rows, medians };
}

/**
 * `table` with the latencies written for reading: two decimals below 100, whole numbers with
 * thousands separators above (suite.ts's four significant digits print 12,570 as 1.257e+4).
 */
function readable(rows: Row[]): string {
  const cell = (v: string | number | boolean): string | number | boolean =>
    typeof v !== 'number' || Number.isInteger(v) ? v : v < 100 ? v.toFixed(2) : Math.round(v).toLocaleString('en-US');
  return table(rows.map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, cell(v)]))));
}

/** One line per target and shape: the ratio of medians and whether it is met. */
function targetLines(medians: Map<string, number>): string[] {
  const lines: string[] = [];
  for (const { blockSize, speedup } of TARGETS) {
    for (const scenario of SCENARIOS.filter((s) => s.blockSize === blockSize)) {
      const wasm = medians.get(`${scenario.name}|${WASM}`)!;
      const js = medians.get(`${scenario.name}|${JS}`)!;
      const native = medians.get(`${scenario.name}|${NATIVE}`);
      const ratio = js / wasm;
      lines.push(
        `- ${scenario.name}: WebAssembly ${r1(wasm)} ns/block, JavaScript ${r1(js)} ns/block: ` +
          `${ratio.toFixed(1)}x (target >= ${speedup}x): **${ratio >= speedup ? 'met' : 'NOT met'}**` +
          (native === undefined ? '' : `; per-block native ${r1(native)} ns/block`),
      );
    }
  }
  return lines;
}

/** p50 / p99 / p99.9 / max of latencies in microseconds (sorted in place). */
function stats(lat: Float64Array): Row {
  lat.sort();
  return {
    'p50 us': r2(percentile(lat, 50)),
    'p99 us': r2(percentile(lat, 99)),
    'p99.9 us': r2(percentile(lat, 99.9)),
    'max us': r2(lat[lat.length - 1]!),
  };
}

/** Times `step` on every prompt in turn, `n` calls after `warm` untimed ones, in microseconds. */
function timeEach(prompts: readonly Uint32Array[], n: number, step: (prompt: Uint32Array, i: number) => void): Float64Array {
  const warm = Math.min(1000, n);
  const lat = new Float64Array(n);
  for (let i = 0; i < n + warm; i++) {
    const k = i % prompts.length;
    const t0 = performance.now();
    step(prompts[k]!, k);
    const dt = performance.now() - t0;
    if (i >= warm) lat[i - warm] = dt * 1000;
  }
  return lat;
}

async function timeEachAsync(
  prompts: readonly Uint32Array[],
  n: number,
  step: (prompt: Uint32Array) => Promise<unknown>,
): Promise<Float64Array> {
  const warm = Math.min(500, n);
  const lat = new Float64Array(n);
  for (let i = 0; i < n + warm; i++) {
    const prompt = prompts[i % prompts.length]!;
    const t0 = performance.now();
    await step(prompt);
    const dt = performance.now() - t0;
    if (i >= warm) lat[i - warm] = dt * 1000;
  }
  return lat;
}

/** End to end on the conversation workload's final tree, in-thread; null without the workload. */
async function endToEnd(opts: SuiteOptions): Promise<{ rows: Row[]; prompts: number } | null> {
  const path = workloadPath(opts.shared, 'conversation');
  const trace = resolve(opts.shared, 'traces/conversation_trace.jsonl');
  if (path === null) return null;
  const workload = await loadWorkload(path, 'conversation');
  const prompts = await conversationPrompts(trace, workload, 8192, opts.quick ? 200 : 2000);
  const indexer = await ShardedIndexer.create({ shards: 0, blockSize: 64 });
  try {
    for (const op of workload.ops) if (op.kind === 'event') indexer.applyEvent(op.event);
    await indexer.flush();
    const n = opts.quick ? 2_000 : 20_000;
    const result = createMatchResult();
    const hashed = prompts.map((p) => computeBlockHashes(p, 64));
    let matched = 0;
    const rows: Row[] = [];
    const add = (step: string, lat: Float64Array): void => {
      rows.push({ step, calls: lat.length, ...stats(lat) });
    };
    add('hash: computeBlockHashes (WebAssembly)', timeEach(prompts, n, (p) => keep(computeBlockHashes(p, 64))));
    add('hash: JavaScript batched xxh3 (before)', timeEach(prompts, n, (p) => keep(computeBlockHashesJs(p, 64))));
    add('lookup: findMatchesInto (hashes given)', timeEach(prompts, n, (_, k) => {
      matched += indexer.findMatchesInto(hashed[k]!, result);
    }));
    add('hash + lookup: computeBlockHashes, findMatchesInto', timeEach(prompts, n, (p) => {
      matched += indexer.findMatchesInto(computeBlockHashes(p, 64), result);
    }));
    add('findMatchesForTokensSync', timeEach(prompts, n, (p) => {
      matched += indexer.findMatchesForTokensSync(p).scores.size;
    }));
    add('await findMatchesForTokens', await timeEachAsync(prompts, opts.quick ? 1_000 : 10_000, (p) => indexer.findMatchesForTokens(p)));
    if (matched === 0) throw new Error('hash bench: no prompt matched any worker');
    return { rows, prompts: prompts.length };
  } finally {
    await indexer.close();
  }
}

/**
 * Runs the hash benchmarks. `quick` shortens every task's time budget and the end-to-end run
 * (for smoke runs); the figures are then noisier.
 */
export async function runHashBench(opts: SuiteOptions): Promise<Omit<SuiteResult, 'title'>> {
  const { rows, medians } = await perBlock(opts.quick);
  const e2e = await endToEnd(opts);
  const markdown = [
    'Per request shape, one tinybench run of every variant. WebAssembly: the product ' +
      '(`computeBlockHashes`, src/hash/wasm). JavaScript: the batched xxh3 it replaced ' +
      '(src/hash/xxh3.ts, kept as the reference). Native: one `@node-rs/xxhash` call (and one ' +
      '`bigint`) per block. Latencies are per call; "JS / this" is the JavaScript median over ' +
      "this row's median.",
    '',
    readable(rows),
    '',
    'Targets (issue 10, vs the JavaScript path):',
    '',
    ...targetLines(medians),
    '',
    e2e === null
      ? 'End to end: the conversation workload is not in shared/workloads; skipped.'
      : `End to end on the conversation workload's final tree (shards: 0, block size 64): ${e2e.prompts} ` +
        'prompts of 8,192 tokens (128 blocks) rebuilt from the trace, cycled; every call timed with ' +
        '`performance.now()` (~0.05 us of it included).',
    '',
    ...(e2e === null ? [] : [readable(e2e.rows)]),
  ].join('\n');
  return { rows: [...rows, ...(e2e?.rows ?? [])], markdown };
}
