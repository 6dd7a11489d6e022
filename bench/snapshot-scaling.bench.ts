/**
 * Snapshot scaling: dump time on trees of about 0.25 M, 0.5 M, 1 M and 2 M (worker, block)
 * pairs; the dump must grow linearly (time ratio for 2x pairs at most 2.2). Two ways, in turn:
 * - `dumpTo` a snapshot writer kept from one dump to the next (what shard threads do): the
 *   dump's own cost. The linearity target is judged on it.
 * - `dumpSnapshot('bincode')`, a fresh output buffer per dump: adds what the allocator and the
 *   VM charge for fresh memory. glibc serves buffers under its 32 MB mmap threshold from freed
 *   heap (free of page faults), larger ones from fresh pages (~3-5 ms per MB written here), so
 *   the small sizes of the series dodge a cost the large ones pay: its ratios are shown, not
 *   judged.
 * In the same run, a JS port of the algorithm of Dynamo's dump before its reverse lookup (PR
 * #3370): `dumpByScanning` on the Map-based reference tree, which finds each pair's external
 * hash by scanning the worker's blocks, O(pairs x blocks per worker); it runs on the smaller
 * sizes only. It is not Dynamo's Rust code: its times show the algorithm's cost, not Dynamo's.
 *
 * The trees: a fleet of 8 workers x 4,096 blocks is simulated on the conversation trace
 * (32,768 pairs, the fleet's real prefix sharing and eviction history), then replicated 8, 16,
 * 32 and 64 times with remapped worker ids and hashes XOR-ed with a per-replica constant (each
 * replica a disjoint subtree, parent links kept). Blocks per worker stay 4,096, so the
 * baseline's cost per pair is the same at every size and its gain is a constant factor here;
 * it grows with the cache size of a worker.
 */
import { performance } from 'node:perf_hooks';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSnapshotWriter, type SnapshotWriter } from '../src/protocol/snapshot-writer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { readTraceFile } from '../src/trace/mooncake.js';
import { recordSimulation } from '../src/trace/sim-script.js';
import { splitmix64 } from '../src/trace/synthetic-tokens.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpByScanning, MapRadixTree } from './reference/map-radix-tree.js';
import { gc, quiesce, runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

const WORKERS = 8;
const CACHE_BLOCKS = 4_096;
/** Replicas of the base fleet per size (x 32,768 pairs): 0.26 M, 0.52 M, 1.05 M, 2.1 M pairs. */
const REPLICAS = [8, 16, 32, 64];
const TARGET_RATIO = 2.2;


function traceFile(shared: string): string {
  const file = resolve(shared, 'traces/conversation_trace.jsonl');
  if (existsSync(file)) return file;
  // Without ../shared, the slice shipped in data/ (2,000 requests) is enough to fill the fleet.
  return fileURLToPath(new URL('../../data/conversation_trace_head.jsonl', import.meta.url));
}

/** The base fleet's final state as Stored events (one per chain). */
async function baseFleet(shared: string, requests: number): Promise<{ events: RouterEvent[]; pairs: number }> {
  const { requests: trace } = await readTraceFile(traceFile(shared), requests);
  const script = recordSimulation(trace, { workers: WORKERS, cacheBlocks: CACHE_BLOCKS, seed: 0n }, false);
  return { events: script.tree.dumpEvents(), pairs: script.tree.size };
}

/** Replica `r` of the base events: worker ids and every hash remapped (r = 0: unchanged). */
function replica(events: readonly RouterEvent[], r: number): RouterEvent[] {
  const salt = r === 0 ? 0n : splitmix64(BigInt(r));
  const wsalt = BigInt(r) << 20n; // ids are in [2^62, 2^63): stays above 2^53
  return events.map((e) => {
    const d = e.event.data;
    if (d.type !== 'stored') throw new Error('a dump holds Stored events only');
    return {
      workerId: e.workerId ^ wsalt,
      event: {
        eventId: e.event.eventId,
        data: {
          type: 'stored',
          parentHash: d.parentHash === null ? null : d.parentHash ^ salt,
          blocks: d.blocks.map((b) => ({ blockHash: b.blockHash ^ salt, tokensHash: b.tokensHash ^ salt })),
        },
      },
    };
  });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** A tree holding replicas 0..k-1 of the base fleet. */
function buildTree<T extends { applyEvent(e: RouterEvent): unknown }>(tree: T, base: readonly RouterEvent[], k: number): T {
  for (let r = 0; r < k; r++) for (const e of replica(base, r)) tree.applyEvent(e);
  return tree;
}

/** One timed dump, ms: into `writer` (kept between dumps) or, when null, into fresh memory. */
async function timeDump(tree: RadixTree, writer: SnapshotWriter | null): Promise<number> {
  await quiesce(100);
  const t = performance.now();
  if (writer === null) tree.dumpSnapshot('bincode');
  else {
    tree.dumpTo(writer);
    writer.finishShared();
  }
  return performance.now() - t;
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const rounds = opts.quick ? 5 : 15;
  // The baseline costs ~30 ns x pairs x blocks per worker / 2 here (~8 s at 0.26 M pairs on
  // this machine), so quick mode measures it on a 2-replica tree (65,536 pairs) that is not
  // part of the scaling series, and full mode on the two smallest sizes of the series.
  const sizes = opts.quick ? [2, ...REPLICAS] : REPLICAS;
  const baselineSizes = opts.quick ? [2] : [8, 16];
  const base = await baseFleet(opts.shared, opts.quick ? 600 : 1_500);
  if (base.pairs !== WORKERS * CACHE_BLOCKS) throw new Error(`base fleet holds ${base.pairs} pairs, expected full caches`);

  // One tree per size, measured round-robin (every round dumps each size once), so the load of
  // other processes on this shared machine spreads over all sizes instead of skewing one.
  const trees = sizes.map((k) => buildTree(new RadixTree(), base.events, k));
  // Worst-case size, as dumpSnapshot allocates; the first dump faults its pages in.
  const writers = trees.map((t) => createSnapshotWriter('bincode', 64 + t.size * 57));
  trees.forEach((t, i) => {
    t.dumpSnapshot('bincode');
    t.dumpTo(writers[i]!);
    writers[i]!.finishShared();
  });
  const times: number[][] = sizes.map(() => []);
  const freshTimes: number[][] = sizes.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (const [i, t] of trees.entries()) {
      times[i]!.push(await timeDump(t, writers[i]!));
      freshTimes[i]!.push(await timeDump(t, null));
    }
  }

  const rows: Array<Record<string, string | number | boolean>> = [];
  let prev: { k: number; ms: number; fresh: number } | null = null;
  for (let i = 0; i < sizes.length; i++) {
    const k = sizes[i]!;
    const tree = trees[i]!;
    const ms = median(times[i]!);
    const fresh = median(freshTimes[i]!);
    // Only 2x steps of the series count for the linearity target.
    const ratio = prev !== null && k === 2 * prev.k ? ms / prev.ms : NaN;
    const freshRatio = prev !== null && k === 2 * prev.k ? fresh / prev.fresh : NaN;
    if (REPLICAS.includes(k)) prev = { k, ms, fresh };
    let baselineMs = NaN;
    if (baselineSizes.includes(k)) {
      const map = buildTree(new MapRadixTree(), base.events, k);
      gc();
      const t = performance.now();
      const events = dumpByScanning(map);
      baselineMs = performance.now() - t;
      if (events.length !== map.size) throw new Error(`baseline dumped ${events.length} of ${map.size} pairs`);
    }
    rows.push({
      pairs: tree.size,
      workers: WORKERS * k,
      'blocks/worker': CACHE_BLOCKS,
      'tree nodes': tree.nodeCount,
      'snapshot MB': tree.dumpSnapshot('bincode').length / 1e6,
      'dump ms (median)': ms,
      'ns/pair': (ms * 1e6) / tree.size,
      'ratio vs half size': Number.isNaN(ratio) ? '-' : ratio,
      'ratio <= 2.2': Number.isNaN(ratio) ? '-' : ratio <= TARGET_RATIO,
      'fresh buffer: ms (median)': fresh,
      'fresh: ns/pair': (fresh * 1e6) / tree.size,
      'fresh: ratio vs half size': Number.isNaN(freshRatio) ? '-' : freshRatio,
      'scan baseline ms': Number.isNaN(baselineMs) ? 'skipped' : baselineMs,
      'baseline / ours': Number.isNaN(baselineMs) ? '-' : baselineMs / ms,
    });
    process.stderr.write(`snapshot-scaling: ${tree.size} pairs, dump ${ms.toFixed(1)} ms, into fresh memory ${fresh.toFixed(1)} ms\n`);
  }
  gc();

  const ratios = rows.map((r) => r['ratio vs half size']).filter((r): r is number => typeof r === 'number');
  const worst = Math.max(...ratios);
  const freshWorst = Math.max(...rows.map((r) => r['fresh: ratio vs half size']).filter((r): r is number => typeof r === 'number'));
  const markdown = [
    `Trees of ${opts.quick ? '65 k (baseline comparison only) and ' : ''}0.26 M to 2.1 M pairs: a simulated fleet (${WORKERS} workers x ${CACHE_BLOCKS.toLocaleString('en-US')} blocks, ` +
      'conversation trace, 64-token blocks) replicated 8-64 times with remapped worker ids and hashes. ' +
      `Bincode dumps, median of ${rounds} rounds (sizes and both ways interleaved): \`dump\` writes into a snapshot writer kept ` +
      'between dumps (`tree.dumpTo(writer)`, what each shard thread does); `fresh buffer` is `dumpSnapshot()`, whose output is new ' +
      'memory each time: under glibc\'s 32 MB mmap threshold it reuses freed heap, above it every page written is a first-touch ' +
      'page fault (about 3-5 ms per MB on this VM), so the small sizes skip a cost the large ones pay. The target is judged on ' +
      '`dump`, the walk\'s own scaling. The scan baseline is a JavaScript port of the algorithm of Dynamo\'s dump ' +
      'before its PR #3370 (`dumpByScanning` on the Map-based reference tree: one single-block event per pair, each ' +
      'hash found by scanning the worker\'s blocks); it is not Dynamo\'s Rust code.',
    '',
    table(rows),
    '',
    `Target: dump time ratio for 2x pairs at most ${TARGET_RATIO}. Worst ratio: ${worst.toFixed(2)} -> ` +
      `**${worst <= TARGET_RATIO ? 'met' : 'NOT met'}**. Into fresh memory the worst ratio is ${freshWorst.toFixed(2)}.`,
  ].join('\n');
  return { title: 'Snapshot scaling', markdown, rows };
}

// `node dist/bench/snapshot-scaling.bench.js [--quick]` runs this suite alone.
runIfMain(import.meta.url, run);
