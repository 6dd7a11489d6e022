/**
 * Where a tree's bytes go, per (worker, block) pair, split by structure (the typed arrays'
 * capacities, as `RadixTree.bytes` counts them), and the latency of single applies in an
 * interleaved replay (events and lookups in trace order, each `applyEvent` timed alone): the
 * two figures issue 40 asks to see side by side (a smaller heap should mean fewer and shorter
 * collections inside applies). Reads the tree's @internal fields; nothing here is API.
 */
import type { RadixTree } from '../src/tree/radix-tree.js';
import type { LoadedWorkload } from './workloads.js';

/** Bytes per pair of each structure of `tree`, rounded to 0.01. */
export function bytesByStructure(tree: RadixTree): Record<string, number> {
  const n = tree.nodes;
  const pairs = Math.max(1, tree.size);
  const nodeCap = n.node.length / 4;
  let tables = tree.tableSlab.bytes;
  for (const t of tree.tables) if (t !== null) tables += t.bytes;
  const m = n.members.bytesBy;
  const r = (b: number): number => Math.round((b / pairs) * 100) / 100;
  const parts: Record<string, number> = {
    'node records (16/node)': r(nodeCap * 16),
    'parent (4/node)': r(nodeCap * 4),
    'child count (1/node)': r(nodeCap),
    'inline external hash (8/node)': r(nodeCap * 8),
    'free-id bitmap': r(n.bytes - nodeCap * 29 - n.keyLo.length * 16 - n.members.bytes),
    'edge table + root keys': r(tree.edges.bytes),
    'worker tables (external hash -> pair)': r(tables),
    'member set records (28/set)': r(m.records),
    'member pool (12/position: slot, hash)': r(m.pool),
    'member id words (sets of 64+)': r(m.ids),
    'member tables (sets of 16+)': r(m.tables),
    'per-slot keys and ids': r(n.keyLo.length * 16),
  };
  parts['total typed arrays'] = r(tree.bytes);
  return parts;
}

/** Per-call latency of `applyEvent` in an interleaved replay of `w` into `tree`, in us. */
export function applyLatencies(tree: RadixTree, w: LoadedWorkload): { p50: number; p99: number; p999: number; max: number; count: number } {
  const times: number[] = [];
  for (const op of w.ops) {
    if (op.kind === 'event') {
      const t0 = performance.now();
      tree.applyEvent(op.event);
      times.push(performance.now() - t0);
    } else {
      tree.findMatches(op.seq);
    }
  }
  times.sort((a, b) => a - b);
  const at = (q: number): number => Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))]! * 1000 * 100) / 100;
  return { p50: at(0.5), p99: at(0.99), p999: at(0.999), max: at(1), count: times.length };
}
