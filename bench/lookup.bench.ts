/**
 * Lookups (issue "lookups on the calling thread"), shards 0 / 1 / 2 side by side in one run, on
 * the conversation workload's final tree:
 * - quiescent, back to back: `findMatchesInto` (allocation-free, synchronous), `findMatches`
 *   (async, Map), the shards' ordered port path (the fallback), and the floor of the old design:
 *   a bare thread round trip with no indexer;
 * - idle: 10 ms of idle time before each lookup (threads that were asleep), with keep-warm off
 *   and with the default (keep-warm every 1 ms);
 * - while the shards ingest at full speed: the workload replayed unpaced into a warmed, empty indexer,
 *   every lookup timed, `readYourWrites: false` (what a router under load asks) and the default;
 * - allocation: JS heap growth and GC count over 100k `findMatchesInto` in a row, beside the same
 *   loop calling an empty function;
 * - the synthetic workload's no-match and short-match lookups, in-thread;
 * - lookups by tokens that match nothing, cut short after the first block, beside hashing all.
 * Every row reports p50, p99, p99.9 and max, in microseconds (performance.now() around each
 * call: its own ~0.05 us is included).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import { LINGER_MS } from '../src/indexer/keep-warm.js';
import { DEFAULT_KEEP_WARM_MS } from '../src/indexer/options.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { createMatchResult, type MatchResult } from '../src/tree/match-result.js';
import { conversationPrompts } from './hash/conversation-prompts.js';
import { RoundTrip } from './reference/round-trip.js';
import { tokensRows } from './tokens-lookup.js';
import { concatLatencies, gc, latencyStats, quiesce, table, type SuiteOptions, type SuiteResult } from './suite.js';
import { removeAll, warmUp } from './warm-up.js';
import { loadWorkload, workloadPath, type LoadedWorkload } from './workloads.js';

const SHARD_COUNTS = [0, 1, 2];
/** Rounds of the quiescent rows (see run). */
const ROUNDS = 5;
/** Rounds of the judged pair of the rows while ingesting (see run). */
const INGEST_ROUNDS = 3;
const r2 = (x: number): number => Math.round(x * 100) / 100;

type Row = Record<string, string | number | boolean>;
/** A loaded indexer of the lookup rows, and (with shard threads) its bare thread round trip. */
type Side = { shards: number; ix: ShardedIndexer; floor: RoundTrip | null };

const stats = latencyStats;

/** A loaded indexer holding the workload's final state (events applied, then flushed). */
async function loaded(w: LoadedWorkload, shards: number, readYourWrites = true, keepWarmMs?: number): Promise<ShardedIndexer> {
  // keepWarmMs undefined: the default (keep-warm on).
  const ix = await ShardedIndexer.create({ shards, blockSize: 64, readYourWrites, ...(keepWarmMs === undefined ? {} : { keepWarmMs }) });
  for (const op of w.ops) {
    if (op.kind === 'event') ix.applyEvent(op.event);
    if (ix.needsDrain) await ix.drained();
  }
  await ix.flush();
  return ix;
}

/** `n` timed calls (after 1,000 untimed), on the lookups from `from` on, cycling. */
function timeSync(seqs: BigUint64Array[], n: number, find: (s: BigUint64Array) => unknown, from = 0): Float64Array {
  const lat = new Float64Array(n);
  for (let i = 0; i < n + 1000; i++) {
    const s = seqs[(from + i) % seqs.length]!;
    const t0 = performance.now();
    find(s);
    const dt = performance.now() - t0;
    if (i >= 1000) lat[i - 1000] = dt * 1000; // the first 1000 warm up
  }
  return lat;
}

/** One replay of a workload into an indexer, every lookup timed (microseconds, in order). */
interface IngestRun {
  ms: number;
  lat: Float64Array;
}

/**
 * Replays `ops` unpaced: events through `applyEvent` (waiting for `drained()` under
 * backpressure), each lookup a timed `findMatchesInto`; the time runs through the final `flush()`.
 */
async function ingestWithLookups(ix: ShardedIndexer, ops: LoadedWorkload['ops'], lookups: number, result: MatchResult): Promise<IngestRun> {
  const lat = new Float64Array(lookups);
  let k = 0;
  const t0 = performance.now();
  for (const op of ops) {
    if (op.kind === 'event') {
      ix.applyEvent(op.event);
      if (ix.needsDrain) await ix.drained();
    } else {
      const s = performance.now();
      ix.findMatchesInto(op.seq, result);
      lat[k++] = (performance.now() - s) * 1000;
    }
  }
  await ix.flush();
  return { ms: performance.now() - t0, lat: lat.subarray(0, k) };
}

/** `timeSync` for an async call, awaited. */
async function timeAsync(seqs: BigUint64Array[], n: number, find: (s: BigUint64Array) => Promise<unknown>, from = 0): Promise<Float64Array> {
  const lat = new Float64Array(n);
  const warm = 500;
  for (let i = 0; i < n + warm; i++) {
    const s = seqs[(from + i) % seqs.length]!;
    const t0 = performance.now();
    await find(s);
    const dt = performance.now() - t0;
    if (i >= warm) lat[i - warm] = dt * 1000;
  }
  return lat;
}

/** Pages of the host-floor row: about what one shard's walk reads (12.3 pages, node-store.ts). */
const FLOOR_PAGES = 16;
const floorPages = new Int32Array((64 << 20) >> 2);
let floorSink = 0;

/** Reads one word of each of `FLOOR_PAGES` random 4 KiB pages of a 64 MiB array. */
function readRandomPages(seed: number): void {
  let x = seed | 1;
  for (let i = 0; i < FLOOR_PAGES; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    floorSink ^= floorPages[((x >>> 0) % (floorPages.length >> 10)) << 10]!;
  }
}

/**
 * Idle rows: 10 ms of idle time before each call. Every call of a round goes to each row in
 * turn (rows interleaved call by call, as the quiescent rows are round by round): how long a
 * core takes to come back from idle drifts on this VM by the hour (in-thread p50 measured 3 us
 * and 22 us on different runs of one build), so the rows compare calls made in the same
 * seconds. Two host rows are measured in the same rounds: an empty async call, and reads of
 * random pages, a floor for what touching a walk's memory again costs after idle.
 */
async function idleRows(
  sides: Side[], seqs: BigUint64Array[], n: number, result: MatchResult, how = 'findMatches (async)',
): Promise<Row[]> {
  floorPages.fill(1);
  // `sync` rows are timed as the call alone (no await): the allocation-free lookup as a router
  // makes it; the others through their promise, as a caller of the async API sees them.
  const rows: Array<{ shards: number | string; lookup: string; call: (s: BigUint64Array, i: number) => Promise<unknown>; sync?: (s: BigUint64Array) => unknown }> = [];
  for (const { shards, ix, floor } of sides) {
    rows.push({ shards, lookup: how, call: (s) => ix.findMatches(s) });
    rows.push({ shards, lookup: how.replace('findMatches (async)', 'findMatchesInto (sync)'), call: async () => undefined, sync: (s) => ix.findMatchesInto(s, result) });
    if (floor !== null) rows.push({ shards, lookup: 'floor: bare thread round trip', call: () => floor.ping() });
  }
  rows.push({ shards: '-', lookup: 'host: an empty async call', call: async () => undefined });
  rows.push({ shards: '-', lookup: `host: ${FLOOR_PAGES} reads of random 4 KiB pages`, call: async (_s, i) => readRandomPages(i + 1) });
  const lat = rows.map(() => new Float64Array(n));
  const warm = 20;
  for (let i = 0; i < n + warm; i++) {
    const s = seqs[i % seqs.length]!;
    for (let r = 0; r < rows.length; r++) {
      await new Promise((done) => setTimeout(done, 10));
      const row = rows[r]!;
      let dt: number;
      if (row.sync !== undefined) {
        const t0 = performance.now();
        row.sync(s);
        dt = performance.now() - t0;
      } else {
        const t0 = performance.now();
        await row.call(s, i);
        dt = performance.now() - t0;
      }
      if (i >= warm) lat[r]![i - warm] = dt * 1000;
    }
  }
  return rows.map((r, k) => ({ shards: r.shards, lookup: r.lookup, 'idle before each': '10 ms', ...stats(lat[k]!) }));
}

/** The process's CPU time (every thread) while `fn` runs, in % of one core of the wall time. */
async function cpuShare(fn: () => Promise<unknown>): Promise<number> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const c = process.cpuUsage(c0);
  return (100 * (c.user + c.system)) / 1000 / (performance.now() - t0);
}

/**
 * What keep-warm costs: the process's CPU share while one 2-shard indexer gets a lookup every
 * 10 ms for 2 s, keep-warm off against the default, alternating for `rounds` rounds. Each pair
 * starts after every keep-warm timer stopped (LINGER_MS without a lookup), so no other
 * indexer's ticks land in an off slice.
 */
async function keepWarmCost(off: ShardedIndexer, on: ShardedIndexer, seqs: BigUint64Array[], rounds: number): Promise<{ off: number; on: number }> {
  const slice = (ix: ShardedIndexer): Promise<number> => cpuShare(async () => {
    for (let i = 0; i < 200; i++) {
      await new Promise((done) => setTimeout(done, 10));
      await ix.findMatches(seqs[i % seqs.length]!);
    }
  });
  let offSum = 0;
  let onSum = 0;
  for (let r = 0; r < rounds; r++) {
    await new Promise((done) => setTimeout(done, LINGER_MS + 200));
    offSum += await slice(off);
    onSum += await slice(on);
  }
  return { off: r2(offSum / rounds), on: r2(onSum / rounds) };
}

/**
 * Whether every lookup row's young generation grew no more than the baseline row's plus 16,000
 * bytes (one 16-byte object, the smallest, every 100 calls), with no GC run during the lookup
 * rounds. A lookup that allocated anything at every call would add 1.6 MB or more (the control
 * row: 3.2 MB).
 */
function allocVerdict(heap: Row[]): string {
  const key = 'young gen growth bytes (median)';
  const lookups = heap.filter((r) => r['calls'] === 'findMatchesInto');
  const base = heap.find((r) => String(r['calls']).startsWith('baseline'))![key] as number;
  const worst = Math.max(...lookups.map((r) => r[key] as number));
  const gcs = lookups.reduce((t, r) => t + (r['GC runs during them'] as number), 0);
  return `worst median ${worst.toLocaleString('en-US')} bytes against ${base.toLocaleString('en-US')}, ${gcs} GC runs during the lookup rounds -> ` +
    (worst <= base + 16_000 && gcs === 0 ? '**met**' : '**NOT met**');
}

/** Does nothing: the baseline's call, in a loop of the lookups' shape. */
function noop(_s: BigUint64Array, _r: MatchResult): number {
  return 0;
}

/** Where the control row's objects go (module state: V8 cannot drop the allocation). */
let sink: { i: number } | null = null;

/** Makes one small object per call: the control row, what the measure sees of real garbage. */
function allocating(i: number): number {
  sink = { i };
  return sink.i;
}

/** Bytes used in the young generation, where a call's short-lived objects are allocated. */
function youngBytes(): number {
  let used = 0;
  for (const s of getHeapSpaceStatistics()) if (s.space_name === 'new_space') used += s.space_used_size;
  return used;
}

/** A round's start: a GC, then 20k unmeasured calls. */
function settle(call: (i: number) => unknown): void {
  gc();
  // What V8 compiles for the loop (OSR code with the lookup inlined, tens of KB) is then made
  // before the measured calls, and the rows compare the calls alone.
  for (let i = 0; i < 20_000; i++) call(i);
}

/** [JS heap growth, young generation growth] over 100k calls of `call`. */
function measureGrowth(call: (i: number) => unknown): [number, number] {
  const before = process.memoryUsage().heapUsed;
  const young = youngBytes();
  for (let i = 0; i < 100_000; i++) call(i);
  const youngGrown = youngBytes() - young;
  return [process.memoryUsage().heapUsed - before, youngGrown];
}

/**
 * Heap growth over 100k calls of `call` after a GC and 20k calls, `rounds` times after one
 * unmeasured round: the young generation's and the JS heap's, medians and every round's, and
 * the GC runs seen during them (summed). The young generation is where a call's garbage goes
 * (the control row's 100k objects: 3.2 MB there); the whole heap also grows by what V8 compiles
 * meanwhile, in the old generation: in probes with --trace-opt, the rounds whose heap grew by
 * 0.1-0.4 MB were those during which TurboFan finished compiling code, the young generation
 * growing by the same 1-5 KB in every round.
 */
async function heapGrowth(rounds: number, call: (i: number) => unknown): Promise<Row> {
  const grown: number[] = [];
  const young: number[] = [];
  let gcs = 0;
  settle(call);
  measureGrowth(call);
  for (let r = 0; r < rounds; r++) {
    settle(call);
    gcs += await gcCount(() => {
      const [heap, y] = measureGrowth(call);
      grown.push(heap);
      young.push(y);
    });
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  return {
    'calls per round': 100_000, rounds,
    'young gen growth bytes (median)': median(young), 'young, per round': young.join(' / '),
    'heap growth bytes (median)': median(grown), 'heap, per round': grown.join(' / '),
    'GC runs during them': gcs,
  };
}

async function gcCount(fn: () => void): Promise<number> {
  let count = 0;
  const obs = new PerformanceObserver((list) => {
    count += list.getEntries().length;
  });
  obs.observe({ entryTypes: ['gc'] });
  fn();
  await new Promise((r) => setImmediate(r)); // entries are delivered asynchronously
  obs.disconnect();
  return count;
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const rows: SuiteResult['rows'] = [];
  const sections: string[] = [];
  const convPath = workloadPath(opts.shared, 'conversation');
  if (convPath === null) return { title: 'Lookups on the calling thread', markdown: '_skipped: no shared workloads_', rows };
  const conv = await loadWorkload(convPath, 'conversation', opts.quick ? 10_000 : Infinity);
  const seqs = conv.ops.flatMap((o) => (o.kind === 'match' ? [o.seq] : []));
  const n = opts.quick ? 5_000 : 30_000;
  const idleN = opts.quick ? 50 : 300;

  // 1. Quiescent and idle lookups on the final tree. Every shard count's indexer is built first,
  // and the quiescent rows are measured in ROUNDS rounds, each round every shard count in turn,
  // each row pooling its rounds: a ratio then compares latencies taken in the same seconds, not
  // a shard count's whole section apart (this VM's speed drifts: the in-thread p50 of one build
  // measured 0.2-0.5 us within an hour).
  const quiet: Row[] = [];
  const idle: Row[] = [];
  const heap: Row[] = [];
  const result = createMatchResult();
  const sides: Side[] = [];
  // Keep-warm off on these: no indexer that primes exists while the keep-warm-off idle rows are
  // measured (a prime warms code every indexer runs). Back to back, a tick never primes anyway.
  for (const shards of SHARD_COUNTS) {
    sides.push({ shards, ix: await loaded(conv, shards, true, 0), floor: shards > 0 ? await RoundTrip.start(shards) : null });
  }
  const perRound = Math.ceil(n / ROUNDS);
  const pooled = new Map<string, Float64Array[]>();
  for (let round = 0; round < ROUNDS; round++) {
    const from = round * perRound;
    for (const { shards, ix, floor } of sides) {
      const variants: Array<[string, () => Promise<Float64Array>]> = [
        ['findMatchesInto (sync, no allocation)', async () => timeSync(seqs, perRound, (s) => ix.findMatchesInto(s, result), from)],
        ['findMatches (async, Map)', () => timeAsync(seqs, perRound, (s) => ix.findMatches(s), from)],
      ];
      if (floor !== null) {
        variants.push(['port request per shard, port replies (fallback path)', () => timeAsync(seqs, perRound, (s) => ShardedIndexer.unsafeInternals.findMatchesViaPorts(ix, s), from)]);
        variants.push(['floor of the old design: bare thread round trip, no indexer', () => timeAsync(seqs, perRound, () => floor.ping(), from)]);
      }
      for (const [how, time] of variants) {
        await quiesce(100);
        const key = `${shards}\u0000${how}`;
        pooled.set(key, [...(pooled.get(key) ?? []), await time()]);
      }
    }
  }
  for (const [key, parts] of pooled) {
    const [shards, how] = key.split('\u0000') as [string, string];
    quiet.push({ shards: Number(shards), lookup: how, ...stats(concatLatencies(parts)) });
  }
  idle.push(...(await idleRows(sides, seqs, idleN, result, 'findMatches (async), keepWarmMs: 0 (off)')));
  // The same idle rows with the default options (keep-warm every DEFAULT_KEEP_WARM_MS), on
  // indexers of their own made after the rows above; closed before the allocation rows (a
  // prime allocates).
  const warmSides: Side[] = [];
  for (const shards of [0, 2]) warmSides.push({ shards, ix: await loaded(conv, shards), floor: null });
  const warmIdle = await idleRows(warmSides, seqs, idleN, result, `findMatches (async), default (keep-warm every ${DEFAULT_KEEP_WARM_MS} ms)`);
  const cost = await keepWarmCost(sides.find((x) => x.shards === 2)!.ix, warmSides.find((x) => x.shards === 2)!.ix, seqs, opts.quick ? 1 : 3);
  const primes = warmSides.map((w) => w.ix.keepWarmPrimes);
  for (const w of warmSides) await w.ix.close();
  // Allocation: 100k findMatchesInto in a row after a GC, and beside them, the same loop calling
  // a function that does nothing (what the measurement grows by itself) and one that makes an
  // object per call (what it sees of garbage); a lookup row is ~0 when its young generation
  // grows no more than the baseline's (allocVerdict, heapGrowth).
  for (const { shards, ix } of sides) {
    const lookups = await heapGrowth(3, (i) => ix.findMatchesInto(seqs[i % seqs.length]!, result));
    heap.push({ shards, calls: 'findMatchesInto', ...lookups });
  }
  heap.push({ shards: '-', calls: 'baseline: an empty function, same loop', ...(await heapGrowth(3, (i) => noop(seqs[i % seqs.length]!, result))) });
  heap.push({ shards: '-', calls: 'control: one small object per call', ...(await heapGrowth(3, allocating)) });
  // Lookups by tokens that match nothing (tokens-lookup.ts), on the same indexers.
  // The trace's own prompts need the whole workload (quick runs load a part of it). Passed
  // without a name here, so their 138 MB are garbage once the rows are measured, before the
  // rows while ingesting.
  const trace = resolve(opts.shared, 'traces/conversation_trace.jsonl');
  const tokens = await tokensRows(
    sides.filter((x) => x.shards !== 1),
    opts.quick,
    opts.quick || !existsSync(trace) ? null : await conversationPrompts(trace, conv, 8192, Infinity),
  );
  for (const { ix, floor } of sides) {
    await floor?.close();
    await ix.close();
  }
  rows.push(...quiet.map((r) => ({ suite: 'lookup-quiescent', ...r })), ...idle.map((r) => ({ suite: 'lookup-idle-keep-warm-off', ...r })));
  rows.push(...warmIdle.map((r) => ({ suite: 'lookup-idle', ...r })));
  rows.push(...heap.map((r) => ({ suite: 'lookup-heap', ...r })));
  const p = (rs: Row[], shards: number | string, how: string, k: string): number => rs.find((r) => r['shards'] === shards && String(r['lookup']).startsWith(how))?.[k] as number;
  const ratio = (how: string, k: string): number => r2(p(quiet, 2, how, k) / p(quiet, 0, how, k));
  const verdict = (ok: boolean): string => (ok ? 'met' : 'NOT met');
  const q50 = ratio('findMatches (async', 'p50 us');
  const q99 = ratio('findMatches (async', 'p99 us');
  const idle50 = p(idle, 2, 'findMatches (async', 'p50 us');
  const warm50 = p(warmIdle, 2, 'findMatches (async', 'p50 us');
  const idleInto50 = p(idle, 2, 'findMatchesInto', 'p50 us');
  const warmInto50 = p(warmIdle, 2, 'findMatchesInto', 'p50 us');
  sections.push(
    `**Quiescent lookups, back to back**, on the final ${conv.name} tree (${perRound * ROUNDS} per row: ${ROUNDS} rounds, each shard count in turn, each after a warm-up). With shard threads ` +
      'both product calls read the shards\' trees in shared memory on the calling thread, under each shard\'s lock. ' +
      'The port path is the ordered fallback (lagging shards with read-your-writes, or `expirationMs`); the floor is what ' +
      `every lookup through threads used to pay at least.\n\n${table(quiet)}\n\n` +
      `2 shards against shards: 0, findMatches: p50 ${q50}x, p99 ${q99}x (target: within 2x) -> **${verdict(q50 <= 2 && q99 <= 2)}**; ` +
      `findMatchesInto: p50 ${ratio('findMatchesInto', 'p50 us')}x, p99 ${ratio('findMatchesInto', 'p99 us')}x.`,
    `**Idle lookups**, default options: 10 ms of idle time before each call (${idleN} per row), the rows interleaved call by call, with ` +
      'two host rows measured in the same rounds: an empty async call, and reads of random pages (a lookup walk reads ' +
      '~12 distinct 4 KiB pages of each tree it walks, counted on this workload). Keep-warm is on by default ' +
      `(src/indexer/keep-warm.ts): while no lookup comes, the indexer looks up the latest request's first 32 blocks again every ${DEFAULT_KEEP_WARM_MS} ms ` +
      `(primes made during these rows: ${primes.map((k, i) => `shards ${warmSides[i]!.shards}: ${k.toLocaleString('en-US')}`).join(', ')}). ` +
      'Each side is asked through both lookup calls: `findMatches` (async, a Map, timed through its promise) and ' +
      '`findMatchesInto` (synchronous, into a reused result, timed as the call). ' +
      `Target: p50 <= 10 us through 2 shards: findMatches ${warm50} us -> **${verdict(warm50 <= 10)}**, findMatchesInto ${warmInto50} us -> ` +
      `**${verdict(warmInto50 <= 10)}** (same rounds: in-thread ${p(warmIdle, 0, 'findMatches (async', 'p50 us')} and ` +
      `${p(warmIdle, 0, 'findMatchesInto', 'p50 us')} us). With keep-warm off (next table, measured first): findMatches ${idle50} us, ` +
      `${verdict(idle50 <= 10)}, findMatchesInto ${idleInto50} us, ${verdict(idleInto50 <= 10)} ` +
      `(in-thread ${p(idle, 0, 'findMatches (async', 'p50 us')} and ${p(idle, 0, 'findMatchesInto', 'p50 us')} us, ` +
      `${FLOOR_PAGES} random page reads ${p(idle, '-', `host: ${FLOOR_PAGES}`, 'p50 us')} us). ` +
      `What it costs: with a lookup every 10 ms (2 s per side, ${opts.quick ? '1 round' : '3 rounds'}, sides alternating), the process used ` +
      `${cost.on} % of a core with 2 shards and keep-warm, ${cost.off} % with it off.\n\n${table(warmIdle)}`,
    `**Idle lookups with keep-warm off** (\`keepWarmMs: 0\`), measured as above right before them, while no indexer that primes ` +
      `existed: what a lookup after idle time costs on this host when nothing keeps the core and caches warm.\n\n${table(idle)}`,
    `**Allocation**: 100,000 \`findMatchesInto\` in a row into one reused result, after a GC and 20,000 unmeasured calls (V8 compiles the loop meanwhile), 3 rounds after an unmeasured one: ` +
      'growth of the young generation (where a call\'s garbage is allocated) and of the whole JS heap, and GC runs during them. ' +
      'The baseline row is the same loop calling an empty function, what the measurement grows by itself; the control row ' +
      'makes one small object per call, what the measure sees of real garbage. The whole heap also grows by what V8 ' +
      'compiles meanwhile (old generation: code and its metadata, not garbage of the calls; probes with --trace-opt saw ' +
      'growth of 0.1-0.4 MB in exactly the rounds where TurboFan finished a compilation, the young generation unchanged), ' +
      'which is why the verdict reads the young generation. Target: ~0 bytes, read as no more than the baseline: ' +
      `${allocVerdict(heap)}.\n\n${table(heap)}`,
  );

  // 2. Lookups while the shards ingest at full speed, into an indexer warmed by one pass of the
  // same workload (warm-up.ts: threads that ran before, as a router's do), on every side alike.
  // One row repeats the 2-shard run on fresh threads, whose code compiles during the run; one
  // runs the shards at a lower thread priority (shardNice): on this 2-core VM three busy
  // threads share two cores, and a lookup that waits for a shard's lock whose holder was
  // descheduled waits for a core to come back.
  const busy: Row[] = [];
  const convEvents = conv.ops.flatMap((o) => (o.kind === 'event' ? [o.event] : []));
  const convWorkers = [...new Set(convEvents.map((e) => e.workerId))];
  const started = async (shards: number, readYourWrites: boolean, shardNice: number, warm: boolean): Promise<ShardedIndexer> => {
    const ix = await ShardedIndexer.create({ shards, blockSize: 64, readYourWrites, shardNice });
    if (warm) await warmUp(ix, convEvents, seqs);
    return ix;
  };
  const row = (shards: number, readYourWrites: boolean, shardNice: number, warm: boolean, runs: IngestRun[]): Row => {
    const ms = runs.reduce((t, r) => t + r.ms, 0);
    return {
      shards, readYourWrites, shardNice, threads: warm ? 'warmed' : 'fresh', rounds: runs.length,
      'ingest+lookups ms per round': runs.map((r) => Math.round(r.ms)).join(' / '),
      'event block-ops/s': Math.round((conv.eventBlocks * runs.length) / (ms / 1000)),
      ...stats(concatLatencies(runs.map((r) => r.lat))),
    };
  };
  // The judged pair (shards 0 and 2, readYourWrites false) runs INGEST_ROUNDS rounds, the sides
  // alternating, each round on the indexer emptied again (every worker removed, as after the
  // warm-up), each row pooling its rounds: one run per side took 0.5-0.8 s and gave a ratio of
  // 1.3x and 2.08x in two full runs of similar builds; paired rounds of one probe, 1.6-2.4x.
  const judged = [await started(0, false, 0, true), await started(2, false, 0, true)];
  const judgedRuns: IngestRun[][] = [[], []];
  for (let round = 0; round < INGEST_ROUNDS; round++) {
    for (let k = 0; k < judged.length; k++) {
      await quiesce(300);
      judgedRuns[k]!.push(await ingestWithLookups(judged[k]!, conv.ops, seqs.length, result));
      await removeAll(judged[k]!, convWorkers);
    }
  }
  for (const ix of judged) await ix.close();
  busy.push(row(0, false, 0, true, judgedRuns[0]!), row(2, false, 0, true, judgedRuns[1]!));
  // The other rows: one run each.
  const configs: Array<[number, boolean, number, boolean]> = [
    [1, false, 0, true], [1, true, 0, true], [2, true, 0, true], [2, false, 10, true], [2, false, 0, false],
  ];
  for (const [shards, readYourWrites, shardNice, warm] of configs) {
    const ix = await started(shards, readYourWrites, shardNice, warm);
    await quiesce(300);
    busy.push(row(shards, readYourWrites, shardNice, warm, [await ingestWithLookups(ix, conv.ops, seqs.length, result)]));
    await ix.close();
  }
  rows.push(...busy.map((r) => ({ suite: 'lookup-while-ingesting', ...r })));
  const b = (shards: number, ryw: boolean, key: string, nice = 0, threads = 'warmed'): number =>
    busy.find((r) => r['shards'] === shards && r['readYourWrites'] === ryw && r['shardNice'] === nice && r['threads'] === threads)?.[key] as number;
  const busyP99 = b(2, false, 'p99 us');
  const busyRatio = r2(b(2, false, 'event block-ops/s') / b(0, false, 'event block-ops/s'));
  const roundRatios = judgedRuns[0]!.map((r, k) => r2(r.ms / judgedRuns[1]![k]!.ms));
  sections.push(
    `**Lookups while the shards ingest at full speed**: the ${conv.name} workload replayed unpaced into an empty index ` +
      '(events through `applyEvent`, waiting for `drained()` under backpressure), every lookup a timed `findMatchesInto`; ' +
      'time through the final `flush()`. The judged pair (shards 0 and 2, readYourWrites false) runs ' +
      `${INGEST_ROUNDS} rounds, the sides alternating, each round into its indexer emptied again, each row pooling its rounds; ` +
      'the other rows run once. Each indexer is first warmed by one pass of the same workload, after which every ' +
      'worker is removed (bench/warm-up.ts: its threads have run before, as a router\'s have; the same on every side); ' +
      'the "fresh" row is the 2-shard run on new threads, whose code V8 compiles during the run. With `readYourWrites: true` a lookup first waits until the shards applied every ' +
      'event before it. Targets (2 shards, readYourWrites false): lookup p99 <= 100 us: ' +
      `${busyP99} us -> **${verdict(busyP99 <= 100)}**; ingestion >= 1.5x shards: 0: ${busyRatio}x -> ` +
      `**${verdict(busyRatio >= 1.5)}** (pooled over ${INGEST_ROUNDS} rounds, the sides alternating; round by round ` +
      `${roundRatios.join(' / ')}x). With \`shardNice: 10\`: p99 ${b(2, false, 'p99 us', 10)} us, ingestion ` +
      `${r2(b(2, false, 'event block-ops/s', 10) / b(0, false, 'event block-ops/s'))}x. On fresh threads: p99 ` +
      `${b(2, false, 'p99 us', 0, 'fresh')} us, ingestion ` +
      `${r2(b(2, false, 'event block-ops/s', 0, 'fresh') / b(0, false, 'event block-ops/s'))}x.\n\n${table(busy)}`,
  );

  // 3. The synthetic workload's no-match and short-match lookups, in-thread.
  const synPath = workloadPath(opts.shared, 'synthetic');
  if (synPath !== null) {
    const syn = await loadWorkload(synPath, 'synthetic', opts.quick ? 10_000 : Infinity);
    const ix = await loaded(syn, 0);
    const none: BigUint64Array[] = [];
    const short: BigUint64Array[] = [];
    // Classified by what they match in the final tree, the one measured (by the replay's
    // expectations, 518 of 2,777 "no match" lookups matched blocks stored after them).
    for (const op of syn.ops) {
      if (op.kind !== 'match') continue;
      const k = ix.findMatchesInto(op.seq, result);
      let best = 0;
      for (let i = 0; i < k; i++) best = Math.max(best, result.scores[i]!);
      if (best === 0) none.push(op.seq);
      else if (best <= 4) short.push(op.seq);
    }
    const synRows: Row[] = [];
    for (const [what, set] of [['no match', none], ['short match (1-4 blocks)', short]] as const) {
      if (set.length === 0) continue;
      await quiesce(300);
      synRows.push({ set: what, 'distinct lookups': set.length, ...stats(timeSync(set, opts.quick ? 20_000 : 100_000, (s) => ix.findMatchesInto(s, result))) });
    }
    await ix.close();
    rows.push(...synRows.map((r) => ({ suite: 'lookup-synthetic-short', ...r })));
    const worst = Math.max(...synRows.map((r) => r['p50 us'] as number));
    sections.push(
      `**Short lookups, in-thread** (\`shards: 0\`, \`findMatchesInto\`) on the final ${syn.name} tree: its lookups that ` +
        `match nothing there and those whose best score there is 1-4 blocks. Target: p50 <= 0.5 us: ${worst} us -> **${verdict(worst <= 0.5)}**.` +
        `\n\n${table(synRows)}`,
    );
  }
  rows.push(...tokens.rows.map((r) => ({ suite: 'lookup-tokens-no-match', ...r })));
  sections.push(tokens.markdown);
  return { title: 'Lookups on the calling thread', markdown: sections.join('\n\n'), rows };
}
