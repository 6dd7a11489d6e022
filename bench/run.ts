/**
 * `npm run bench [-- --quick] [-- --only name,name]`: runs the tinybench suites. A full run of
 * every suite writes BENCHMARKS.md (with machine, Node version and date), bench/results.json and
 * the plots in bench/plots/ (bench/plots.ts), embedded at the top of their sections;
 * `--quick` (the suites of QUICK on smaller inputs, under a minute) and `--only` print the
 * markdown instead and write bench/results.partial.json.
 */
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { plotsOf, writePlots } from './plots.js';
import type { SuiteOptions, SuiteResult } from './suite.js';

type Suite = (opts: SuiteOptions) => Promise<SuiteResult>;

const SUITES: Array<[string, () => Promise<Suite>]> = [
  ['hash', async () => {
    const m = await import('./hash.bench.js');
    return async (o) => ({ title: 'Hashing: tokens -> block hashes', ...(await m.runHashBench(o)) });
  }],
  ['json', async () => {
    const m = await import('./json.bench.js');
    return async (o) => ({
      title: 'Event JSON parsing',
      ...(await m.runJsonBench({ quick: o.quick, workloadPath: resolve(o.shared, 'workloads/conversation.jsonl.gz') })),
    });
  }],
  ['query-body', async () => (await import('./query-body.bench.js')).run],
  ['tree', async () => (await import('./tree.bench.js')).run],
  ['shard', async () => (await import('./shard.bench.js')).run],
  ['lookup', async () => (await import('./lookup.bench.js')).run],
  ['fleet', async () => (await import('./fleet.bench.js')).run],
  ['fleet-scale', async () => (await import('./fleet-scale.bench.js')).run],
  ['snapshot-scaling', async () => (await import('./snapshot-scaling.bench.js')).run],
  ['replay', async () => (await import('./replay.bench.js')).run],
  ['nats', async () => (await import('./nats.bench.js')).run],
  ['route', async () => (await import('./route.bench.js')).run],
  ['zmq', async () => (await import('./zmq.bench.js')).run],
  ['serve-overhead', async () => (await import('./serve-overhead.bench.js')).run],
  ['ttft', async () => (await import('./ttft.bench.js')).run],
  ['gateway', async () => (await import('./gateway.bench.js')).run],
  ['peers', async () => (await import('./peers.bench.js')).run],
  ['restore', async () => (await import('./restore.bench.js')).run],
  ['shared-loads', async () => (await import('./shared-loads.bench.js')).run],
  ['remote-index', async () => (await import('./remote-index.bench.js')).run],
];

/** The suites of `--quick`: each on a subset; the threaded and NATS suites need `--only`. */
const QUICK = new Set(['hash', 'json', 'query-body', 'tree', 'snapshot-scaling']);

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const onlyAt = args.indexOf('--only');
  const only = onlyAt >= 0 ? new Set((args[onlyAt + 1] ?? '').split(',')) : quick ? QUICK : null;
  const root = resolve(fileURLToPath(import.meta.url), '../../..');
  const opts: SuiteOptions = { quick, shared: resolve(root, '../shared') };
  const results: Array<{ name: string } & SuiteResult> = [];
  for (const [name, load] of SUITES) {
    if (only !== null && !only.has(name)) continue;
    const started = performance.now();
    process.stderr.write(`bench: ${name}...\n`);
    const result = await (await load())(opts);
    process.stderr.write(`bench: ${name} done in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
    results.push({ name, ...result });
  }
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const header = [
    '# kvindex benchmarks',
    '',
    `Written by \`npm run bench${quick ? ' -- --quick' : ''}\` (bench/run.ts) on ${new Date().toISOString().slice(0, 10)}: ` +
      `${cpus().length} x ${cpu}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}. ` +
      'Workloads: `conversation` and `synthetic` from shared/workloads (Mooncake traces replayed through a simulated ' +
      '4-worker fleet). Terms: a *pair* is one (worker, block) entry of the index; *block-ops* are stored blocks + ' +
      'removed blocks + blocks visited by lookups; a *snapshot* is the dump of the index as Dynamo RouterEvents ' +
      '(bincode unless stated). The machine is shared and noisy: compare ratios within one run.',
    '',
  ];
  // A full run also draws the plots (bench/plots/*.svg) and puts each at the top of its section.
  const embeds = only === null ? writePlots(plotsOf(results), resolve(root, 'bench/plots'), 'bench/plots') : new Map<string, string[]>();
  const body = results.map((r) => `## ${r.title}\n\n${(embeds.get(r.name) ?? []).map((l) => `${l}\n\n`).join('')}${r.markdown}\n`);
  if (only === null) writeFileSync(resolve(root, 'BENCHMARKS.md'), [...header, ...body].join('\n'));
  else process.stdout.write([...header, ...body].join('\n'));
  writeFileSync(
    resolve(root, only === null ? 'bench/results.json' : 'bench/results.partial.json'),
    JSON.stringify({ date: new Date().toISOString(), node: process.version, quick, suites: results }, null, 2) + '\n',
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${String((err as Error).stack ?? err)}\n`);
  process.exitCode = 1;
});
