/**
 * Issue 40's shared-prompt figure, in a fresh process: 4,096 workers each storing one 48-block
 * prompt (the same tokens hashes, the workers' own block hashes) into one in-thread RadixTree.
 * Prints build time (median of `--builds` builds, the first dropped: it warms the JIT and is the
 * one whose memory is measured), typed-array bytes a pair (`RadixTree.bytes`), RSS and heap plus
 * array buffers a pair (after two full GCs, minus the same before the tree; the events exist
 * before), and `findMatchesInto` of the prompt (every worker matches all 48 blocks), p50 / p99.
 * Also the minor page faults of each build (`process.resourceUsage()`) and what one costs on this
 * host (a fresh 16 MiB buffer written a word a page, before the builds): every build writes
 * fresh growable memory, and on the dev VM (Firecracker) a first touch costs ~15-18 us a page,
 * so faults are a large share of a build; `build ms less faults` subtracts them (an estimate).
 *
 * `node --expose-gc dist/bench/shared-prompt.js [--workers 4096] [--blocks 48] [--builds 7]
 * [--tree <path of another build's dist/src/tree/radix-tree.js>]`: with `--tree` the same
 * fleet is built by another build of the tree (A/B against main in alternating processes).
 * Issue 40 quotes Dynamo's own tree at 44 ms and 43 bytes a pair of RSS on this fleet
 * (measured by an earlier session beside ours; Dynamo is not built here).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createMatchResult } from '../src/tree/match-result.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { fleet } from './fleet-gen.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : dflt;
};
const gc = (): void => {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g === undefined) throw new Error('run node with --expose-gc');
  g();
  g();
};
const r2 = (x: number): number => Math.round(x * 100) / 100;
const medianOf = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

/** Microseconds a first write to a fresh page costs here (16 MiB of a fresh buffer, a word a page). */
function firstTouchUs(): number {
  const a = new Int32Array(new SharedArrayBuffer(16 << 20, { maxByteLength: 16 << 20 }));
  const t0 = performance.now();
  for (let i = 0; i < a.length; i += 1024) a[i] = 1;
  return ((performance.now() - t0) * 1000) / (a.length / 1024);
}

async function main(): Promise<void> {
  const workers = Number(arg('workers', '4096'));
  const blocks = Number(arg('blocks', '48'));
  const builds = Number(arg('builds', '7'));
  const treePath = arg('tree', '');
  const Tree: typeof RadixTree = treePath === '' ? RadixTree : ((await import(pathToFileURL(resolve(treePath)).href)) as { RadixTree: typeof RadixTree }).RadixTree;
  const f = fleet(workers, 'shared', blocks, 0);
  const pairs = workers * blocks;
  const mem = (): { rss: number; heap: number } => {
    const m = process.memoryUsage();
    return { rss: m.rss, heap: m.heapUsed + m.arrayBuffers };
  };
  gc();
  const before = mem();
  const times: number[] = [];
  let first: RadixTree | null = null;
  let typed = 0;
  let after = before;
  const faults: number[] = [];
  for (let b = 0; b < builds; b++) {
    if (b > 0) gc();
    const f0 = process.resourceUsage().minorPageFault;
    const t0 = performance.now();
    const tree = new Tree();
    for (const e of f.events) tree.applyEvent(e);
    times.push(performance.now() - t0);
    faults.push(process.resourceUsage().minorPageFault - f0);
    if (tree.size !== pairs) throw new Error(`built ${tree.size} pairs, expected ${pairs}`);
    if (b === 0) {
      first = tree;
      typed = tree.bytes;
      gc();
      after = mem();
    }
  }
  const result = createMatchResult();
  const lat = new Float64Array(2000);
  for (let i = 0; i < lat.length + 200; i++) {
    const t0 = performance.now();
    const n = first!.findMatchesInto(f.prompt, result);
    const dt = performance.now() - t0;
    if (n !== workers) throw new Error(`lookup matched ${n} workers`);
    if (i >= 200) lat[i - 200] = dt * 1000;
  }
  lat.sort();
  // Last: a freed 16 MiB malloc'd buffer raises glibc's mmap threshold (it is dynamic), and the
  // tree's RSS measured after it was 60 bytes a pair instead of 43-52. A growable buffer (V8's
  // page allocator, not malloc) and after every memory figure.
  const faultUs = firstTouchUs();
  const timed = times.slice(1).sort((a, b) => a - b);
  const med = timed[timed.length >> 1]!;
  console.log(JSON.stringify({
    tree: treePath === '' ? 'this' : treePath,
    workers,
    blocks,
    'build ms median': r2(med),
    'build ms min': r2(timed[0]!),
    'build ms max': r2(timed[timed.length - 1]!),
    'builds ms': times.map(r2),
    'faults a build, median': medianOf(faults.slice(1)),
    'first touch us a page': r2(faultUs),
    'build ms less faults, median': r2(medianOf(times.slice(1).map((t, i) => t - (faults[i + 1]! * faultUs) / 1000))),
    'typed B/pair': r2(typed / pairs),
    'rss B/pair': r2((after.rss - before.rss) / pairs),
    // Plus the tree's SharedArrayBuffers (growable memory, array-store.ts), not in memoryUsage().
    'heap+buffers B/pair': r2((after.heap - before.heap + ((first as { sharedBytes?: number }).sharedBytes ?? 0)) / pairs),
    'lookup p50 us': r2(lat[lat.length >> 1]!),
    'lookup p99 us': r2(lat[Math.floor(lat.length * 0.99)]!),
  }));
}

void main();
