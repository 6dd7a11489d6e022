/**
 * Block-hash benchmark: Dynamo's per-request hashing (tokens -> block hashes -> sequence
 * hashes) as kvindex does it, against one-call-per-block alternatives, in one tinybench `Bench`
 * per request shape so the rows of a table come from the same run.
 *
 * Rows report ns per block (median and p99 of the per-request latency divided by the block
 * count) and the median's ratio to the batched `computeBlockHashes` row. `runHashBench` does
 * not run on import; `bench/run.ts` calls it.
 */

import { Bench, hrtimeNow } from 'tinybench';

import { computeBlockHashes, computeSequenceHashes } from '../src/hash/block-hash.js';
import {
  computeBlockHashesPerBlock,
  computeBlockHashesPerBlockNative,
  loadNativeXxh3,
} from './hash/per-block.js';

/** One request shape: `tokens` tokens cut into blocks of `blockSize`. */
interface Scenario {
  readonly name: string;
  readonly tokens: number;
  readonly blockSize: number;
}

const SCENARIOS: readonly Scenario[] = [
  { name: '8192 tokens, bs 16', tokens: 8192, blockSize: 16 },
  { name: '8192 tokens, bs 64', tokens: 8192, blockSize: 64 },
  { name: '1000 blocks, bs 64', tokens: 64_000, blockSize: 64 },
];

const BATCHED = 'batched computeBlockHashes';

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

function fixed(x: number): string {
  return x.toFixed(x < 10 ? 2 : 1);
}

/**
 * Runs the hash benchmarks. `quick` shortens every task's time budget (for smoke runs); the
 * figures are then noisier. Returns one row per task and a markdown table of the same rows.
 */
export async function runHashBench(opts: { quick: boolean }): Promise<{
  rows: Array<Record<string, string | number>>;
  markdown: string;
}> {
  const native = await loadNativeXxh3();
  const time = opts.quick ? 150 : 1000;
  const warmupTime = opts.quick ? 50 : 250;
  const rows: Array<Record<string, string | number>> = [];

  for (const scenario of SCENARIOS) {
    const tokens = makeTokens(scenario.tokens);
    const tokenList = Array.from(tokens);
    const blocks = Math.floor(scenario.tokens / scenario.blockSize);
    const local = computeBlockHashes(tokens, scenario.blockSize);
    const bs = scenario.blockSize;

    const bench = new Bench({ name: scenario.name, time, warmupTime, throws: true, now: hrtimeNow });
    bench.add(BATCHED, () => keep(computeBlockHashes(tokens, bs)));
    bench.add('batched, number[] input', () => keep(computeBlockHashes(tokenList, bs)));
    bench.add('per-block xxh3Into', () => keep(computeBlockHashesPerBlock(tokens, bs)));
    if (native !== null) {
      bench.add('per-block @node-rs/xxhash', () => keep(computeBlockHashesPerBlockNative(tokens, bs, native)));
    }
    bench.add('computeSequenceHashes', () => keep(computeSequenceHashes(local)));
    bench.runSync();

    let batchedMedian = Number.NaN;
    for (const task of bench.tasks) {
      const result = task.result;
      if (result.state !== 'completed') throw new Error(`hash bench task ${task.name} ended ${result.state}`);
      const median = (result.latency.p50 * 1e6) / blocks;
      const p99 = (result.latency.p99 * 1e6) / blocks;
      if (task.name === BATCHED) batchedMedian = median;
      rows.push({
        scenario: scenario.name,
        variant: task.name,
        blocks,
        'ns/block median': Number(fixed(median)),
        'ns/block p99': Number(fixed(p99)),
        'vs batched': task.name === 'computeSequenceHashes' ? '-' : `${(median / batchedMedian).toFixed(2)}x`,
        samples: result.latency.samplesCount,
      });
    }
  }

  const columns = ['scenario', 'variant', 'blocks', 'ns/block median', 'ns/block p99', 'vs batched', 'samples'];
  const lines = [
    `| ${columns.join(' | ')} |`,
    `| ${columns.map((c) => (c === 'scenario' || c === 'variant' ? '---' : '---:')).join(' | ')} |`,
    ...rows.map((row) => `| ${columns.map((c) => String(row[c])).join(' | ')} |`),
  ];
  if (native === null) lines.push('', '@node-rs/xxhash is not installed: no native row.');
  return { rows, markdown: lines.join('\n') };
}
