/**
 * Fleet scale (issue "thousands of workers sharing a prompt"): 16 to 16,384 workers, each
 * storing one chain of a 48-block prompt shared with all others (shape `shared`) or with its
 * group of 64 (`groups`), then 16 private blocks. Per fleet, in-thread (`shards: 0`, a
 * RadixTree) and through 2 shards: build time per pair (every chain stored, then flushed),
 * bytes per pair, and lookup latency of the shared prompt (every worker matches 48 blocks) and
 * of whole chains (one worker matches 64, the others of its prompt 48), through the
 * allocation-free `findMatchesInto` and through `findMatches` (a Map of every matching worker).
 */
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { createMatchResult } from '../src/tree/match-result.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { fleet } from './fleet-gen.js';
import { percentile, quiesce, table, type SuiteOptions, type SuiteResult } from './suite.js';

const r2 = (x: number): number => Math.round(x * 100) / 100;
type Row = Record<string, string | number | boolean>;

function time(n: number, fn: (i: number) => unknown): Row {
  const lat = new Float64Array(n);
  for (let i = 0; i < n + 200; i++) {
    const t0 = performance.now();
    fn(i);
    const dt = performance.now() - t0;
    if (i >= 200) lat[i - 200] = dt * 1000;
  }
  lat.sort();
  return { 'p50 us': r2(percentile(lat, 50)), 'p99 us': r2(percentile(lat, 99)), 'p99.9 us': r2(percentile(lat, 99.9)), 'max us': r2(lat[lat.length - 1]!) };
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const sizes = opts.quick ? [16, 256, 1024] : [16, 256, 1024, 4096, 16384];
  const build: Row[] = [];
  const lookups: Row[] = [];
  const result = createMatchResult();
  for (const shape of ['shared', 'groups'] as const) {
    for (const workers of sizes) {
      const f = fleet(workers, shape);
      const pairs = workers * 64;
      const n = Math.max(200, Math.min(5_000, Math.floor(2_000_000 / workers)));
      for (const shards of [0, 2]) {
        await quiesce(200);
        let bytes: number;
        let find: (q: BigUint64Array) => number;
        let findMap: (q: BigUint64Array) => unknown;
        let close = async (): Promise<void> => {};
        const t0 = performance.now();
        if (shards === 0) {
          const tree = new RadixTree();
          for (const e of f.events) tree.applyEvent(e);
          bytes = tree.bytes;
          find = (q) => tree.findMatchesInto(q, result);
          findMap = (q) => tree.findMatches(q);
        } else {
          const ix = await ShardedIndexer.create({ shards, blockSize: 16 });
          for (const e of f.events) {
            ix.applyEvent(e);
            if (ix.needsDrain) await ix.drained();
          }
          await ix.flush();
          bytes = (await ix.stats()).reduce((b, s) => b + s.bytes, 0);
          find = (q) => ix.findMatchesInto(q, result);
          findMap = (q) => ix.findMatchesSync(q);
          close = () => ix.close();
        }
        const buildMs = performance.now() - t0;
        build.push({ shape, workers, shards, pairs, 'build ms': Math.round(buildMs), 'build us/pair': r2((buildMs * 1000) / pairs), 'bytes/pair': r2(bytes / pairs) });
        lookups.push({ shape, workers, shards, lookup: 'prompt, findMatchesInto', lookups: n, matched: find(f.prompt), ...time(n, () => find(f.prompt)) });
        lookups.push({ shape, workers, shards, lookup: 'whole chains, findMatchesInto', lookups: n, matched: find(f.chains[0]!), ...time(n, (i) => find(f.chains[i % workers]!)) });
        lookups.push({ shape, workers, shards, lookup: 'whole chains, findMatches (Map)', lookups: Math.min(n, 1000), matched: '-', ...time(Math.min(n, 1000), (i) => findMap(f.chains[i % workers]!)) });
        await close();
      }
    }
  }
  const p50 = (shape: string, workers: number, shards: number): number =>
    lookups.find((r) => r['shape'] === shape && r['workers'] === workers && r['shards'] === shards && r['lookup'] === 'whole chains, findMatchesInto')?.['p50 us'] as number;
  const perPair = (workers: number): number => build.find((r) => r['shape'] === 'shared' && r['workers'] === workers && r['shards'] === 0)?.['build us/pair'] as number;
  const verdict = (ok: boolean): string => (ok ? 'met' : 'NOT met');
  const lines: string[] = [];
  if (sizes.includes(4096)) {
    const a = p50('shared', 4096, 0);
    const b = p50('shared', 16, 0);
    const ratio = r2(a / b);
    const bp = r2(perPair(4096) / perPair(256));
    lines.push(
      `Targets (shape shared, in-thread, whole chains): findMatchesInto p50 at 4,096 workers ${a} us, ${ratio}x the p50 at 16 workers ` +
        `(at most 10x: **${verdict(ratio <= 10)}**; at most 60 us: **${verdict(a <= 60)}**); build time per pair at 4,096 workers ${bp}x ` +
        `that at 256 (at most 1.5x: **${verdict(bp <= 1.5)}**).`,
    );
  }
  const markdown = [
    'Each worker stores one chain: a 48-block prompt shared with every worker (`shared`) or with its group of 64 (`groups`), ' +
      'then 16 private blocks (64 pairs per worker). Build: every chain applied (through 2 shards: then flushed); bytes per pair ' +
      'from the trees\' typed arrays (`stats().bytes`). Lookups: the prompt (every worker of it matches 48 blocks) and whole ' +
      'chains (one worker 64, the rest of its prompt 48); `matched` is the number of matching workers written per lookup.',
    '',
    table(build),
    '',
    table(lookups),
    '',
    ...lines,
  ].join('\n');
  return { title: 'Fleet scale: thousands of workers sharing a prompt', markdown, rows: [...build.map((r) => ({ suite: 'fleet-build', ...r })), ...lookups.map((r) => ({ suite: 'fleet-lookup', ...r }))] };
}
