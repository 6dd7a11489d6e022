/**
 * Fleet scale (issue 40): the index of a whole fleet, from `kvindex fleet` workloads (engines of
 * 16,384 blocks filled from the conversation trace's prefix structure until every engine is
 * full): 64 engines (1M pairs), 1,000 (16.4M) and, opt-in, 4,000 (65.5M). Per size and shard
 * count (0: in-thread, 2), in a fresh process each (fleet-scale-child.ts): bytes per pair (the
 * trees' arrays; heap + ArrayBuffers after a full GC; RSS), apply block-ops/s, lookup
 * p50/p99/p99.9 (every expected score checked first), bincode dump ms and bytes, and a restart
 * in another fresh process: read the snapshot, create, restore, answer (restore-to-ready).
 * Then fresh against warm ingest, in-thread against 2 shards, on the 1M workload.
 *
 * Re-run (after a change to the tree's layout or the restore path):
 *   flock /work/bigmem.lock flock /work/bench.lock npm run bench -- --only fleet-scale
 * 1M and 16.4M take ~10 minutes on the 2-core dev VM (the workloads are generated once and kept
 * in $TMPDIR/kvindex-fleet-bench). `KVX_FLEET_SIZES=1m,16m,64m` adds 65.5M pairs (~5.5 GB for
 * the generator, a 4.9 GB workload file, the indexer process ~5-8 GB): run it alone.
 * `KVX_FLEET_SHARDS=0` (or `2`) measures one shard count only; `KVX_FLEET_INGEST=0` skips the
 * ingest comparison, `KVX_FLEET_SIZES=none` runs only that. `KVX_FLEET_ARENAS=1` adds a 2-shard row
 * run with `MALLOC_ARENA_MAX=1`; `KVX_FLEET_PROBE=1` makes each child print where its resident
 * memory is (smaps-probe.ts) on stderr. `KVX_FLEET_BATCH=n` makes the measure child parse n
 * events before applying them (default 1, each applied as parsed; runs 1-13 used 512).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

const run$ = promisify(execFile);
const BLOCKS = 16_384;
const SEED = 1;
/** Generator version in the cache's file names: bump when fleet-workload.ts changes its output. */
const GEN_VERSION = 1;
const SIZES: Record<string, number> = { '1m': 64, '16m': 1000, '64m': 4000 };
const HERE = fileURLToPath(new URL('.', import.meta.url));
const CLI = resolve(HERE, '../src/cli/main.js');
const CHILD = resolve(HERE, 'fleet-scale-child.js');

type Row = Record<string, string | number | boolean>;
type Json = Record<string, number>;

const r2 = (x: number): number => Math.round(x * 100) / 100;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function traceFile(shared: string): string {
  const file = resolve(shared, 'traces/conversation_trace.jsonl');
  return existsSync(file) ? file : resolve(HERE, '../../data/conversation_trace_head.jsonl');
}

/** The workload of `engines` engines, generated once into the cache folder. */
async function workload(shared: string, engines: number): Promise<string> {
  const dir = resolve(tmpdir(), 'kvindex-fleet-bench');
  mkdirSync(dir, { recursive: true });
  const trace = traceFile(shared);
  const file = resolve(dir, `fleet-v${GEN_VERSION}-${trace.endsWith('head.jsonl') ? 'head' : 'conv'}-e${engines}-b${BLOCKS}-s${SEED}.jsonl`);
  if (existsSync(file)) return file;
  process.stderr.write(`fleet-scale: generating ${engines} engines x ${BLOCKS} blocks into ${file}\n`);
  const max = engines >= 4000 ? 8192 : 4096;
  await run$(process.execPath, [`--max-old-space-size=${max}`, CLI, 'fleet', trace, '--engines', String(engines), '--blocks', String(BLOCKS), '--seed', String(SEED), '--out', `${file}.part`, '--quiet'], { maxBuffer: 1 << 20 });
  renameSync(`${file}.part`, file);
  return file;
}

/** Runs a child mode; its JSON line, or the error's last stderr line (a finding, not a crash). */
async function child(args: string[], heapMb: number, env: NodeJS.ProcessEnv = process.env): Promise<Json | string> {
  try {
    const { stdout } = await run$(process.execPath, ['--expose-gc', `--max-old-space-size=${heapMb}`, CHILD, ...args], { maxBuffer: 1 << 20, env });
    return JSON.parse(stdout.trim().split('\n').pop()!) as Json;
  } catch (err) {
    const e = err as { stderr?: string; message: string; signal?: string };
    const lines = (e.stderr ?? e.message).trim().split('\n').filter((l) => l.trim().length > 0);
    const what = lines.find((l) => /Error|heap|memory|Range/i.test(l)) ?? lines.pop() ?? e.message;
    return `failed${e.signal ? ` (${e.signal})` : ''}: ${what.trim().slice(0, 200)}`;
  }
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const sizes = opts.quick ? ['1m'] : (process.env['KVX_FLEET_SIZES'] ?? '1m,16m').split(',').filter((s) => s in SIZES);
  // KVX_FLEET_SHARDS=0 or =2 runs one side alone (65.5M pairs: each row is ~20 minutes here).
  const shardCounts = (process.env['KVX_FLEET_SHARDS'] ?? '0,2').split(',').map(Number).filter((n) => n === 0 || n === 2);
  // KVX_FLEET_ARENAS=1 adds a 2-shard row run with MALLOC_ARENA_MAX=1 (glibc: one malloc arena
  // for every thread; docs/layout.md "Where a 2-shard process's RSS goes").
  const scaleSides = shardCounts.map((shards) => ({ shards, arenas: '' }));
  if (process.env['KVX_FLEET_ARENAS'] === '1' && shardCounts.includes(2)) scaleSides.push({ shards: 2, arenas: '1' });
  const rows: Row[] = [];
  const failures: string[] = [];
  for (const size of sizes) {
    const engines = SIZES[size]!;
    const file = await workload(opts.shared, engines);
    const heapMb = engines >= 4000 ? 12_288 : engines >= 1000 ? 6144 : 2048;
    for (const { shards, arenas } of scaleSides) {
      const snap = resolve(tmpdir(), `kvindex-fleet-bench-${process.pid}-${engines}-${shards}${arenas}.bin`);
      process.stderr.write(`fleet-scale: ${engines} engines, shards ${shards}${arenas === '' ? '' : `, MALLOC_ARENA_MAX=${arenas}`}\n`);
      const env = arenas === '' ? process.env : { ...process.env, MALLOC_ARENA_MAX: arenas };
      const m = await child(['measure', file, String(shards), snap], heapMb, env);
      if (typeof m === 'string') {
        failures.push(`${engines} engines, shards ${shards}, ingest: ${m}`);
        rows.push({ engines, shards: arenas === '' ? shards : `${shards}, MALLOC_ARENA_MAX=${arenas}`, pairs: engines * BLOCKS, result: m });
        continue;
      }
      const rst = existsSync(snap) ? await child(['restore', snap, String(shards)], heapMb, env) : 'no snapshot';
      rmSync(snap, { force: true });
      if (typeof rst === 'string') failures.push(`${engines} engines, shards ${shards}, restore: ${rst}`);
      const pairs = m['pairs']!;
      const applyMs = Math.max(m['callerMs']!, m['shardMs']!);
      rows.push({
        engines,
        shards: arenas === '' ? shards : `${shards}, MALLOC_ARENA_MAX=${arenas}`,
        pairs,
        'tree B/pair': r2(m['treeBytes']! / pairs),
        // The shards' SharedArrayBuffers do not count in the calling isolate's arrayBuffers
        // (1M pairs, 2 shards: 14.85 B/pair without them), so their trees' arrays are added.
        'heap+buffers B/pair': r2(m['heapAb']! / pairs),
        'RSS B/pair': r2(m['rss']! / pairs),
        'apply M block-ops/s': r2((m['stored']! + m['removed']!) / applyMs / 1000),
        'apply s': r2(applyMs / 1000),
        'lookup p50 us': m['p50']!,
        'lookup p99 us': m['p99']!,
        'lookup p99.9 us': m['p999']!,
        'scores checked, wrong': `${m['lookups']}, ${m['mismatches']}`,
        'dump ms': Math.round(m['dumpMs']!),
        'first dump ms': Math.round(m['firstDumpMs']!),
        'dump MB': r2(m['dumpBytes']! / 1e6),
        'restore-to-ready s': typeof rst === 'string' ? rst : r2(rst['readyMs']! / 1000),
        'of it: create ms': typeof rst === 'string' ? '-' : Math.round(rst['createMs']!),
        'restored pairs': typeof rst === 'string' ? '-' : rst['restoredPairs']!,
      });
    }
  }

  // Fresh against warm ingest, in fresh processes, sides alternating.
  const ingestFile = await workload(opts.shared, SIZES['1m']!);
  // KVX_FLEET_INGEST=0 skips this part (a run of the big sizes alone).
  const rounds = process.env['KVX_FLEET_INGEST'] === '0' ? 0 : opts.quick ? 1 : 3;
  const maxBlocks = 1_000_000;
  // `expectedPairs` (the capacity hint, src/indexer/options.ts) is the ingest's stored blocks.
  const sides = [
    { name: 'in-thread', shards: 0, flag: 'x' },
    { name: '2 shards, warmUp: true', shards: 2, flag: 'warm-up' },
    { name: '2 shards (default, no warm-up)', shards: 2, flag: 'x' },
    { name: 'in-thread, expectedPairs', shards: 0, flag: 'presize' },
    { name: '2 shards, expectedPairs', shards: 2, flag: 'presize' },
    { name: '2 shards, expectedPairs, warmUp: true', shards: 2, flag: 'presize,warm-up' },
  ];
  const fresh: number[][] = sides.map(() => []);
  const warm: number[][] = sides.map(() => []);
  const create: number[][] = sides.map(() => []);
  let blocks = 0;
  for (let r = 0; r < rounds; r++) {
    for (const [i, side] of sides.entries()) {
      const g = await child(['ingest', ingestFile, String(side.shards), String(maxBlocks), side.flag], 2048);
      if (typeof g === 'string') {
        failures.push(`ingest, ${side.name}: ${g}`);
        continue;
      }
      blocks = g['blocks']!;
      fresh[i]!.push(g['freshMs']!);
      warm[i]!.push(g['warmMs']!);
      create[i]!.push(g['createMs']!);
    }
  }
  const spread = (xs: number[]): string => (xs.length === 0 ? '-' : `${Math.round(Math.min(...xs))}-${Math.round(Math.max(...xs))}`);
  const ingestRows: Row[] = rounds === 0 ? [] : sides.map((side, i) => ({
    indexer: side.name,
    blocks,
    'create ms (median)': Math.round(median(create[i]!)),
    'fresh ms (median)': Math.round(median(fresh[i]!)),
    'fresh spread': spread(fresh[i]!),
    'warm ms (median)': Math.round(median(warm[i]!)),
    'warm spread': spread(warm[i]!),
    'fresh: speed vs in-thread fresh': r2(median(fresh[0]!) / median(fresh[i]!)),
    'warm: speed vs in-thread warm': r2(median(warm[0]!) / median(warm[i]!)),
  }));
  const freshRatio = median(fresh[0]!) / median(fresh[1]!);

  const markdown = [
    `Workloads from \`kvindex fleet ${traceFile(opts.shared).endsWith('head.jsonl') ? '(shipped slice)' : '../shared/traces/conversation_trace.jsonl'} --engines N --blocks ${BLOCKS} --seed ${SEED}\` ` +
      '(docs/replay.md: copies of the trace with the system prompt shared by every engine, session-affine routing, LRU, until every engine is full). ' +
      'Each row is a fresh process: the workload streamed into a fresh indexer in batches of 512 events (parsing not timed); apply time is the ' +
      'calling thread\'s time inside `applyEvent` and the final flush, or, with shards, the busiest shard\'s apply time if longer; block-ops are ' +
      'blocks stored + removed. Bytes per pair, taken once every event is applied and before the lookups are parsed: `tree` from the trees\' typed arrays ' +
      '(`stats().bytes`); `heap+buffers` after two full GCs minus the same before the indexer was created: in-thread the JS heap, ArrayBuffers and the ' +
      'tree\'s SharedArrayBuffers (`stats().sharedBytes`, which `process.memoryUsage()` does not count); with shards the calling isolate\'s heap, each ' +
      'shard isolate\'s heap (`stats().heapBytes`) and the trees\' arrays once; `RSS` the difference of RSS. Lookups: the ' +
      'workload\'s 1,000 lookups, every score compared with its expected score after the flush, then 5 timed passes of `findMatchesInto`. ' +
      'Dump: `dumpSnapshot(\'bincode\')` twice (first, then the one timed). Restore-to-ready: another fresh process reads that snapshot file, ' +
      'creates the indexer, restores it (`restoreSnapshot(bytes)`: the NATS recovery path for bincode, trees sized once from the snapshot\'s counts) and answers a lookup.',
    '',
    table(rows),
    '',
    ...(rounds === 0 ? [] : [
    `**Ingest from a fresh indexer** (issue 40: a fresh 2-shard indexer must not ingest slower than in-thread): the first ${blocks.toLocaleString('en-US')} ` +
      `stored blocks of the 1M workload, parsed first, then applied and flushed on an indexer just created (fresh), every worker removed, and applied ` +
      `again (warm); ${rounds} fresh processes per side, sides alternating, median and spread. Speed vs in-thread > 1: faster than in-thread. ` +
      '`create ms` is `ShardedIndexer.create()`, where the shard threads warm up (src/shard/thread/warm-up.ts) and the trees are sized for `expectedPairs`.',
    '',
    table(ingestRows),
    '',
    `Fresh 2-shard ingest with \`warmUp: true\` at ${r2(freshRatio)}x the speed of in-thread: **${freshRatio >= 1 ? 'met' : 'NOT met'}** (target >= 1x); ` +
      `without (the default) ${r2(median(fresh[0]!) / median(fresh[2]!))}x. With \`expectedPairs\` on both sides: 2 shards at ` +
      `${r2(median(fresh[3]!) / median(fresh[4]!))}x of in-thread (${r2(median(fresh[3]!) / median(fresh[5]!))}x with \`warmUp: true\` too); ` +
      `against in-thread without the hint ${r2(median(fresh[0]!) / median(fresh[4]!))}x.`,
    ]),
    ...(failures.length > 0 ? ['', 'Runs that did not finish:', ...failures.map((f) => `- ${f}`)] : []),
  ].join('\n');
  return {
    title: 'Fleet scale: 1M to 65M pairs from kvindex fleet workloads',
    markdown,
    rows: [...rows.map((r) => ({ suite: 'fleet-scale', ...r })), ...ingestRows.map((r) => ({ suite: 'fleet-ingest', ...r }))],
  };
}

// `node --expose-gc dist/bench/fleet-scale.bench.js [--quick]` runs this suite alone.
runIfMain(import.meta.url, run);

