/**
 * One measurement of the fleet-scale suite (fleet-scale.bench.ts), in a process of its own so
 * that its memory figures (heap + buffers after a full GC, RSS) are the indexer's and a fresh
 * process is what restarts and fresh indexers really are. Prints one JSON line on stdout.
 *
 * Modes:
 * - `measure <workload> <shards> <snapshot-out>`: streams a fleet workload (kvindex fleet) into a
 *   fresh indexer, batch by batch (parsing is not timed), then memory after a full GC, the
 *   workload's lookups (checked against their expected scores, then timed), two bincode dumps
 *   (the second is written to `snapshot-out` for the restore mode).
 * - `restore <snapshot> <shards>`: a restarting router: reads the snapshot file, creates an
 *   indexer, restores it (`restoreSnapshot(bytes)`, the product path of the NATS
 *   snapshot recovery for bincode) and answers one lookup; each step timed.
 * - `ingest <workload> <shards> <max-blocks> [flags]`: the workload's first events (up to
 *   max-blocks stored blocks) parsed into memory, then applied to a fresh indexer and flushed
 *   (fresh), every worker removed, and applied again (warm). Flags, comma-separated: `warm-up`
 *   creates the indexer with `warmUp: true`, `presize` with `expectedPairs: max-blocks`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { iterateSnapshot } from '../src/protocol/snapshot-reader.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { openLineSource } from '../src/trace/line-source.js';
import { parseWorkloadLine } from '../src/trace/workload.js';
import { byteLines, occurrences, startsWith } from './byte-lines.js';
import { createMatchResult } from '../src/tree/match-result.js';
import { getHeapSpaceStatistics } from 'node:v8';
import { smapsSummary } from './smaps-probe.js';
import { gc, latencyStats } from './suite.js';
import { removeAll } from './warm-up.js';

const BLOCK_SIZE = 64;
/**
 * Events parsed before they are applied (`KVX_FLEET_BATCH`): 1 since run 14, each event applied
 * as it is parsed, as the product's subscribers do (a ZMQ message, a NATS pull's messages one by
 * one); 512 in runs 1-13. A batch of parsed event objects held for the indexer is the bench's
 * data, not the index's, yet it survives the scavenges that run while it is built and V8 grows
 * the young generation for it: at 16.4M pairs with 2 shards, 28.6 MiB of new space after ingest
 * with 512 against 15.3 with 1, RSS 40.25-40.73 against 40.08-40.13 bytes a pair (2 alternating
 * fresh processes a side, session 29). Apply time is taken around the apply calls either way.
 */
const BATCH = Number(process.env['KVX_FLEET_BATCH'] ?? 1);

function blocksOf(e: RouterEvent): number {
  const d = e.event.data;
  return d.type === 'stored' ? d.blocks.length : d.type === 'removed' ? d.blockHashes.length : 0;
}

/** Heap + ArrayBuffers and RSS after two full GCs. */
function memory(): { heapAb: number; heap: number; rss: number } {
  gc();
  gc();
  const m = process.memoryUsage();
  return { heapAb: m.heapUsed + m.arrayBuffers, heap: m.heapUsed, rss: m.rss };
}

/** KVX_FLEET_PROBE=1: resident memory by kind (smaps-probe.ts) on stderr, for docs/layout.md. */
function probe(label: string): void {
  if (process.env['KVX_FLEET_PROBE'] === undefined) return;
  const newSpace = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
  const MiB = (x: number): number => Math.round((x / 1048576) * 10) / 10;
  process.stderr.write(`PROBE ${label} ${JSON.stringify({ rssMiB: MiB(process.memoryUsage().rss), newSpaceMiB: MiB(newSpace?.physical_space_size ?? 0), ...smapsSummary() })}\n`);
}

const EVENT_BYTES = Buffer.from('{"op":"event","event":');
const REMOVED = Buffer.from('"removed":');
const BLOCK_HASH = Buffer.from('"block_hash":');
const COMMA = Buffer.from(',');

async function measure(file: string, shards: number, snapshotOut: string, json: boolean): Promise<Record<string, unknown>> {
  const before = memory();
  probe('before');
  const ix = await ShardedIndexer.create({ shards, blockSize: BLOCK_SIZE });
  const source = await openLineSource(file);
  const lookups: Array<{ seq: BigUint64Array; expect: Map<bigint, number> }> = [];
  let batch: RouterEvent[] = [];
  let callerMs = 0;
  let stored = 0;
  let removed = 0;
  let events = 0;
  const apply = async (): Promise<void> => {
    const t = performance.now();
    for (const e of batch) {
      ix.applyEvent(e);
      if (ix.needsDrain) await ix.drained();
    }
    callerMs += performance.now() - t;
    batch = [];
  };
  // Memory is taken once every event is applied, before the lookups (the workload's last
  // lines) are parsed: 1,000 lookups and their expected scores are ~3.3 bytes a pair of heap
  // at 16.4M pairs, the bench's data, not the index's.
  let taken: { stats: Awaited<ReturnType<ShardedIndexer['stats']>>; after: ReturnType<typeof memory> } | null = null;
  const take = async (): Promise<void> => {
    await apply();
    const t = performance.now();
    await ix.flush();
    callerMs += performance.now() - t;
    const stats = await ix.stats();
    taken = { stats, after: memory() };
    probe('after');
    // `pause`: time to attach a debugger (gdb: `call malloc_info(0, stderr)`); `exit`: memory only.
    if (process.env['KVX_FLEET_PROBE'] === 'pause') await new Promise((r) => setTimeout(r, 90_000));
    if (process.env['KVX_FLEET_PROBE'] === 'exit') {
      process.stdout.write(`${JSON.stringify({ rss: taken.after.rss - before.rss, treeBytes: stats.reduce((k, s) => k + s.bytes, 0) })}\n`);
      process.exit(0);
    }
  };
  let n = 0;
  if (json) {
    // The events' bytes straight to `applyEventJson`, the path of a router on NATS: no string,
    // no event object on the calling thread (byte-lines.ts). Blocks are counted in the bytes.
    const decoder = new TextDecoder();
    for (const line of byteLines(file)) {
      n++;
      if (startsWith(line, EVENT_BYTES) && line[line.length - 1] === 0x7d) {
        if (taken !== null) throw new Error(`fleet-scale: line ${n}: an event after the lookups (memory was taken before them)`);
        const inner = (line as Buffer).subarray(EVENT_BYTES.length, line.length - 1);
        events++;
        if (inner.indexOf(REMOVED) >= 0) {
          const open = inner.indexOf(0x5b);
          const close = inner.indexOf(0x5d, open);
          if (close > open + 1) removed += occurrences(inner.subarray(open, close), COMMA) + 1;
        } else {
          stored += occurrences(inner, BLOCK_HASH);
        }
        const t = performance.now();
        ix.applyEventJson(inner, n);
        if (ix.needsDrain) await ix.drained();
        callerMs += performance.now() - t;
        continue;
      }
      const op = parseWorkloadLine(decoder.decode(line), n);
      if (op.op === 'match') {
        if (taken === null) await take();
        lookups.push({ seq: op.seq, expect: op.expect });
      } else if (op.op === 'event') {
        throw new Error(`fleet-scale: line ${n}: an event not in the generator's layout`);
      }
    }
  }
  if (!json) for await (const { text } of source.lines()) {
    n++;
    if (text.length === 0) continue;
    const op = parseWorkloadLine(text, n);
    if (op.op === 'event') {
      if (taken !== null) throw new Error(`fleet-scale: line ${n}: an event after the lookups (memory was taken before them)`);
      batch.push(op.event);
      events++;
      if (op.event.event.data.type === 'stored') stored += blocksOf(op.event);
      else removed += blocksOf(op.event);
      if (batch.length >= BATCH) await apply();
    } else if (op.op === 'match') {
      if (taken === null) await take();
      lookups.push({ seq: op.seq, expect: op.expect });
    }
  }
  if (taken === null) await take();
  const { stats, after } = taken!;
  const shardMs = shards === 0 ? 0 : Math.max(...stats.map((s) => s.applyMs ?? 0));
  const pairs = stats.reduce((k, s) => k + s.pairs, 0);
  const treeBytes = stats.reduce((k, s) => k + s.bytes, 0);
  // Heap and buffers of the index. In-thread: the isolate's heap and ArrayBuffers, plus the
  // tree's SharedArrayBuffers (growable memory, array-store.ts), which memoryUsage() leaves
  // out. With shards: the calling isolate's heap, each shard isolate's heap, and the trees'
  // arrays once (the calling isolate's arrayBuffers counts the shards' shared arrays it maps,
  // at the size they had when it mapped them: 6-23 bytes a pair in earlier runs, counted twice).
  const heapAb = shards === 0
    ? after.heapAb - before.heapAb + stats.reduce((k, s) => k + s.sharedBytes, 0)
    : after.heap - before.heap + stats.reduce((k, s) => k + (s.heapBytes ?? 0), 0) + treeBytes;
  // Lookups: every score checked first (after the flush the answers are exact), then timed.
  let mismatches = 0;
  for (const l of lookups) {
    const got = ix.findMatchesSync(l.seq).scores;
    let bad = got.size !== l.expect.size;
    for (const [w, s] of l.expect) if (got.get(w) !== s) bad = true;
    if (bad) mismatches++;
  }
  const result = createMatchResult();
  const passes = 5;
  const lat = new Float64Array(lookups.length * passes);
  for (let p = 0, k = 0; p < passes; p++) {
    for (const l of lookups) {
      const t0 = performance.now();
      ix.findMatchesInto(l.seq, result);
      lat[k++] = (performance.now() - t0) * 1000;
    }
  }
  const lookupStats = latencyStats(lat);
  gc();
  const d0 = performance.now();
  await ix.dumpSnapshot('bincode');
  const firstDumpMs = performance.now() - d0;
  gc();
  const d1 = performance.now();
  const snap = await ix.dumpSnapshot('bincode');
  const dumpMs = performance.now() - d1;
  writeFileSync(snapshotOut, snap);
  await ix.close();
  return {
    shards, events, stored, removed, pairs, treeBytes,
    heapAb, rss: after.rss - before.rss, rssTotal: after.rss,
    callerMs, shardMs, lookups: lookups.length, mismatches,
    p50: lookupStats['p50 us'], p99: lookupStats['p99 us'], p999: lookupStats['p99.9 us'],
    firstDumpMs, dumpMs, dumpBytes: snap.length,
    // Batches through the shards' batch rings and in transferred buffers (absent before the ring).
    ringBatches: stats.reduce((k, s) => k + (s.ringBatches ?? 0), 0),
    transferredBatches: stats.reduce((k, s) => k + (s.transferredBatches ?? 0), 0),
  };
}

async function restore(file: string, shards: number): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const bytes = readFileSync(file);
  const t1 = performance.now();
  const ix = await ShardedIndexer.create({ shards, blockSize: BLOCK_SIZE });
  const t2 = performance.now();
  // The NATS recovery's path for bincode (src/nats/snapshot.ts): words into trees sized once.
  const pairs = (await ix.restoreSnapshot(bytes, 'bincode')).storedBlocks;
  const t3 = performance.now();
  let first: bigint | null = null;
  for (const e of iterateSnapshot(bytes, 'bincode')) {
    if (e.event.data.type === 'stored') {
      first = e.event.data.blocks[0]!.tokensHash;
      break;
    }
  }
  const answer = ix.findMatchesSync(BigUint64Array.of(first ?? 0n)).scores.size;
  const t4 = performance.now();
  const after = memory();
  const stats = await ix.stats();
  await ix.close();
  return {
    shards, bytes: bytes.length, pairs, restoredPairs: stats.reduce((k, s) => k + s.pairs, 0), answer,
    readMs: t1 - t0, createMs: t2 - t1, restoreMs: t3 - t2, readyMs: t4 - t0, rssTotal: after.rss,
  };
}

async function ingest(file: string, shards: number, maxBlocks: number, flags: string[]): Promise<Record<string, unknown>> {
  const warmUp = flags.includes('warm-up');
  const presize = flags.includes('presize');
  const source = await openLineSource(file);
  const events: RouterEvent[] = [];
  const workers = new Set<bigint>();
  let blocks = 0;
  let n = 0;
  for await (const { text } of source.lines()) {
    n++;
    if (text.length === 0) continue;
    const op = parseWorkloadLine(text, n);
    if (op.op !== 'event') continue;
    if (op.event.event.data.type === 'stored' && blocks + blocksOf(op.event) > maxBlocks) break;
    events.push(op.event);
    workers.add(op.event.workerId);
    blocks += blocksOf(op.event);
  }
  const c0 = performance.now();
  const ix = await ShardedIndexer.create({ shards, blockSize: BLOCK_SIZE, warmUp, ...(presize ? { expectedPairs: maxBlocks } : {}) });
  const createMs = performance.now() - c0;
  const run = async (): Promise<number> => {
    gc();
    await new Promise((r) => setTimeout(r, 300));
    const t = performance.now();
    for (const e of events) {
      ix.applyEvent(e);
      if (ix.needsDrain) await ix.drained();
    }
    await ix.flush();
    return performance.now() - t;
  };
  const freshMs = await run();
  const pairs = (await ix.stats()).reduce((k, s) => k + s.pairs, 0);
  await removeAll(ix, workers);
  const warmMs = await run();
  await ix.close();
  return { shards, warmUp, presize, events: events.length, blocks, pairs, createMs, freshMs, warmMs };
}

async function main(): Promise<void> {
  const [mode, file, shardsText, extra, flag] = process.argv.slice(2);
  const shards = Number(shardsText);
  let out: Record<string, unknown>;
  if (mode === 'measure') out = await measure(file!, shards, extra!, flag === 'json');
  else if (mode === 'restore') out = await restore(file!, shards);
  else if (mode === 'ingest') out = await ingest(file!, shards, Number(extra), (flag ?? '').split(','));
  else throw new Error(`unknown mode ${String(mode)}`);
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`fleet-scale-child: ${String((err as Error).stack ?? err)}\n`);
  process.exitCode = 1;
});
