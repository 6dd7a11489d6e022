/**
 * A fleet workload: N engines, each with a KV cache of B blocks, filled by requests drawn from a
 * Mooncake trace's prefix structure until every engine is full (issue 40: 1,000 engines x
 * 16,384 blocks = 16.4M (engine, block) pairs). Deterministic by seed.
 *
 * Why not replay the trace as it is: the conversation trace holds 182,790 distinct 512-token
 * blocks (1.5M 64-token blocks), a tenth of what a 1,000-engine fleet holds. So the trace is a
 * template of one user population, and the fleet serves many populations ("copies") at once:
 * - Shared system prompts stay shared: trace ids used by at least `sharedFraction` of the
 *   requests (the conversation trace: id 0, in every request) hash the same in every copy, so
 *   every engine that serves a request holds them. Usage counts only fall along a prefix (an id
 *   is in every request its children are in), so the shared ids are a subtree at the top.
 * - Everything else is salted by the copy: each copy has its own sessions, and a session's
 *   turns extend each other exactly as in the trace (multi-turn prefix sharing).
 * - `streams` copies run side by side, each walking the trace from its own seeded rotation; the
 *   next request comes from a stream picked by the seeded generator. A stream that has walked
 *   the whole trace starts over as a new copy.
 *
 * Blocks: each trace id becomes `subBlocks` blocks (the last id of a request only as far as
 * `input_length` reaches, as in the cluster simulation); a request longer than B blocks stores
 * its first B. A block's tokens hash (LocalBlockHash) is XXH3-64 (seed 1337) of its identity,
 * 4 words (trace id, copy or 0 when shared, sub-block, seed): no tokens are materialised (the
 * cluster simulation spends ~15 ns per token on them, 64 per block). The block hash is Dynamo's
 * chained sequence hash of those (block-hash.ts), the same on every engine.
 *
 * Routing is session-affine (a simple prefix-affine router): a request goes to the engine that
 * served its session (the copy's first id past the shared prompt) before; a new session goes to
 * the next engine, round robin, that is not full yet. Each engine's cache is a `WorkerCache`:
 * leaf-first LRU eviction, prefix-closed, so an engine's score for a lookup is exactly its
 * cached-prefix length. Engines that fill first keep serving their sessions and evict; the
 * run ends when the last engine is full.
 *
 * Output goes through a `FleetSink` (fleet-writer.ts writes the replay workload format), one
 * request at a time: nothing but the caches is held, so 16.4M pairs stream out. Memory: about
 * 100 bytes per pair in the caches (WorkerCache's arrays, a 2x open-addressing table and the
 * LRU heap), 1.6 GB for the default fleet.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { computeBlockHashes, computeSequenceHashes } from '../hash/block-hash.js';
import { deriveWorkerIds } from './cluster-sim.js';
import type { TraceRequest } from './mooncake.js';
import { splitmix64, TRACE_BLOCK_TOKENS } from './synthetic-tokens.js';
import { WorkerCache } from './worker-cache.js';
import { showValue } from '../protocol/show-value.js';

export interface FleetWorkloadOptions {
  /** Engines (default 1,000; 1..65,536). */
  engines?: number;
  /** KV capacity of each engine, in blocks (default 16,384). */
  blocksPerEngine?: number;
  /** Blocks per 512-token trace block (default 8: 64-token blocks; 1..512). */
  subBlocks?: number;
  /** u64 seed (default 1): worker ids, rotations, the order of streams, the hashes. */
  seed?: bigint;
  /** Trace ids used by at least this fraction of requests are shared system prompts (default 0.01). */
  sharedFraction?: number;
  /** Copies served side by side (default 8). */
  streams?: number;
}

/** Resolved options. */
export interface FleetWorkloadConfig {
  engines: number;
  blocksPerEngine: number;
  subBlocks: number;
  seed: bigint;
  sharedFraction: number;
  streams: number;
  workerIds: bigint[];
}

/** Receives the events of a fleet workload, in order. Views are valid during the call only. */
export interface FleetSink {
  /** Engine `engine` evicted `count` blocks: their block hashes as (lo, hi) words in `hashes`, leaf first. */
  removed(engine: number, eventId: number, hashes: readonly number[]): void;
  /**
   * Engine `engine` stored blocks `from .. to-1` of a request: block hashes `seq`, tokens hashes
   * `local`, parent `seq[from-1]` (none when `from` is 0).
   */
  stored(engine: number, eventId: number, seq: BigUint64Array, local: BigUint64Array, from: number, to: number): void;
}

/** Counts of a generated fleet. */
export interface FleetWorkloadStats {
  requests: number;
  /** Sessions routed (each to one engine). */
  sessions: number;
  /** Copies of the trace started. */
  copies: number;
  storedBlocks: number;
  removedBlocks: number;
  /** Leading blocks requests found on their engine. */
  hitBlocks: number;
  /** Blocks of the requests served (capped at the capacity). */
  requestBlocks: number;
  /** Engines holding `blocksPerEngine` blocks. */
  fullEngines: number;
  /** Resident (engine, block) pairs. */
  pairs: number;
}

/** A lookup of the final state: `seq` (tokens hashes) and each engine's expected score (> 0 only). */
export interface FleetLookup {
  seq: BigUint64Array;
  /** Engine index -> leading blocks of `seq` it holds. */
  expect: Map<number, number>;
}

const invalid = (message: string): never => {
  throw new KvIndexError(ErrorCode.InvalidOption, message);
};

/** Fills the defaults and checks every option; throws `KvIndexError` (`InvalidOption`) naming the bad one. */
export function resolveFleetOptions(o: FleetWorkloadOptions = {}): FleetWorkloadConfig {
  const int = (name: string, v: number, min: number, max: number): number => {
    if (!Number.isInteger(v) || v < min || v > max) invalid(`${name}: expected an integer in ${min}..${max}, got ${showValue(v)}`);
    return v;
  };
  const seed = o.seed ?? 1n;
  if (typeof seed !== 'bigint' || seed < 0n || seed >= 1n << 64n) invalid(`seed: expected a u64 bigint, got ${showValue(seed)}`);
  const fraction = o.sharedFraction ?? 0.01;
  if (!(typeof fraction === 'number' && fraction > 0 && fraction <= 1)) invalid(`sharedFraction: expected a number in (0, 1], got ${showValue(fraction)}`);
  const engines = int('engines', o.engines ?? 1000, 1, 65_536);
  return {
    engines,
    blocksPerEngine: int('blocksPerEngine', o.blocksPerEngine ?? 16_384, 1, 2 ** 24),
    subBlocks: int('subBlocks', o.subBlocks ?? 8, 1, TRACE_BLOCK_TOKENS),
    seed,
    sharedFraction: fraction,
    streams: int('streams', o.streams ?? 8, 1, 4096),
    workerIds: deriveWorkerIds(seed, engines),
  };
}

/** The trace reduced to what the generator needs: dense ids per request. */
interface Template {
  /** Request r's ids are `ids[start[r] .. start[r+1]-1]`, dense (0.. distinct-1). */
  ids: Int32Array;
  start: Int32Array;
  /** Blocks of request r (sub-blocks, last id cut by input_length), before the capacity cap. */
  blocks: Int32Array;
  /** Per dense id: 1 when it is part of a shared system prompt. */
  shared: Uint8Array;
  /** Per request: dense id of its session root (first id past the shared prompt), -1 if none. */
  session: Int32Array;
  distinct: number;
}

function buildTemplate(requests: readonly TraceRequest[], subBlocks: number, fraction: number): Template {
  const dense = new Map<bigint, number>();
  let total = 0;
  for (const r of requests) total += r.hashIds.length;
  const ids = new Int32Array(total);
  const start = new Int32Array(requests.length + 1);
  const blocks = new Int32Array(requests.length);
  let k = 0;
  requests.forEach((r, i) => {
    start[i] = k;
    for (const h of r.hashIds) {
      let d = dense.get(h);
      if (d === undefined) dense.set(h, (d = dense.size));
      ids[k++] = d;
    }
    const n = r.hashIds.length;
    const last = n === 0 ? 0 : Math.min(TRACE_BLOCK_TOKENS, Math.max(0, r.inputLength - TRACE_BLOCK_TOKENS * (n - 1)));
    blocks[i] = n === 0 ? 0 : (n - 1) * subBlocks + Math.floor((subBlocks * last) / TRACE_BLOCK_TOKENS);
  });
  start[requests.length] = k;
  // Usage per id counts requests (an id appears once per request: the ids form a prefix tree).
  const uses = new Int32Array(dense.size);
  for (let j = 0; j < total; j++) uses[ids[j]!]!++;
  const threshold = Math.max(2, Math.ceil(fraction * requests.length));
  const shared = new Uint8Array(dense.size);
  for (let d = 0; d < dense.size; d++) shared[d] = uses[d]! >= threshold ? 1 : 0;
  const session = new Int32Array(requests.length).fill(-1);
  for (let i = 0; i < requests.length; i++) {
    for (let j = start[i]!; j < start[i + 1]!; j++) {
      if (shared[ids[j]!] === 0) {
        session[i] = ids[j]!;
        break;
      }
    }
  }
  return { ids, start, blocks, shared, session, distinct: dense.size };
}

/** A small seeded generator (splitmix64 on halves would do; this needs only u32 draws). */
class Rng {
  private s: number;
  constructor(seed: bigint) {
    this.s = Number(splitmix64(seed) & 0xffff_ffffn) | 0;
  }
  /** An integer in 0..n-1 (mulberry32). */
  below(n: number): number {
    let t = (this.s = (this.s + 0x6d2b79f5) | 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  }
}

/** A request drawn and hashed, ready to look up or serve. */
interface Drawn {
  session: number;
  local: BigUint64Array;
  seq: BigUint64Array;
}

/** The generator. Drive it with `step` until it returns false, then read `lookups`. */
export class FleetWorkload {
  readonly config: FleetWorkloadConfig;
  readonly stats: FleetWorkloadStats;
  private readonly t: Template;
  private readonly caches: WorkerCache[];
  private readonly full: Uint8Array;
  private readonly eventIds: Int32Array;
  private readonly rng: Rng;
  private readonly streamCopy: Int32Array;
  private readonly streamAt: Int32Array;
  private readonly streamLeft: Int32Array;
  /** Session key (copy * distinct + root id) -> engine. */
  private readonly sessions = new Map<number, number>();
  private nextCopy = 0;
  private cursor = 0;
  private readonly seedWord: number;
  private tokens = new Uint32Array(4 * 1024);
  private readonly evicted: number[] = [];

  /** Throws `KvIndexError` (`InvalidOption`) on a bad option or a trace with no blocks. */
  constructor(requests: readonly TraceRequest[], options: FleetWorkloadOptions = {}) {
    this.config = resolveFleetOptions(options);
    const c = this.config;
    this.t = buildTemplate(requests, c.subBlocks, c.sharedFraction);
    let any = false;
    for (const b of this.t.blocks) if (b > 0) any = true;
    if (!any) invalid('trace: no request has a full block');
    this.caches = Array.from({ length: c.engines }, () => new WorkerCache(c.blocksPerEngine));
    this.full = new Uint8Array(c.engines);
    this.eventIds = new Int32Array(c.engines);
    this.rng = new Rng(c.seed);
    this.seedWord = Number(splitmix64(c.seed ^ 0x666c_6565_74n) & 0xffff_ffffn);
    this.streamCopy = new Int32Array(c.streams);
    this.streamAt = new Int32Array(c.streams);
    this.streamLeft = new Int32Array(c.streams);
    this.stats = { requests: 0, sessions: 0, copies: 0, storedBlocks: 0, removedBlocks: 0, hitBlocks: 0, requestBlocks: 0, fullEngines: 0, pairs: 0 };
    for (let s = 0; s < c.streams; s++) this.newCopy(s);
  }

  /** Whether every engine is full. */
  get done(): boolean {
    return this.stats.fullEngines === this.config.engines;
  }

  /** The cache model of engine `e` (read it, do not mutate it). */
  cache(e: number): WorkerCache {
    return this.caches[e] ?? invalid(`engine index ${e} out of range 0..${this.config.engines - 1}`);
  }

  /**
   * Serves the next request and writes its events to `sink`; false once every engine is full
   * (then nothing is served).
   */
  step(sink: FleetSink): boolean {
    if (this.done) return false;
    const d = this.draw();
    const n = d.seq.length;
    if (n === 0) return true;
    const c = this.config;
    let engine = d.session < 0 ? -1 : (this.sessions.get(d.session) ?? -1);
    if (engine < 0) {
      engine = this.nextEngine();
      if (d.session >= 0) this.sessions.set(d.session, engine);
      this.stats.sessions++;
    }
    const cache = this.caches[engine]!;
    const words = new Uint32Array(d.seq.buffer, d.seq.byteOffset, n * 2);
    const hit = cache.match(words, n);
    const stored = Math.min(n, c.blocksPerEngine);
    const evicted = this.evicted;
    evicted.length = 0;
    cache.serve(words, hit, stored, evicted);
    const st = this.stats;
    st.requests++;
    st.hitBlocks += hit;
    st.requestBlocks += stored;
    if (evicted.length > 0) {
      sink.removed(engine, this.eventIds[engine]!++, evicted);
      st.removedBlocks += evicted.length / 2;
      st.pairs -= evicted.length / 2;
    }
    if (stored > hit) {
      sink.stored(engine, this.eventIds[engine]!++, d.seq, d.local, hit, stored);
      st.storedBlocks += stored - hit;
      st.pairs += stored - hit;
    }
    if (this.full[engine] === 0 && cache.size === c.blocksPerEngine) {
      this.full[engine] = 1;
      st.fullEngines++;
    }
    return true;
  }

  /**
   * The next `count` requests the fleet would see, looked up on the final state (not served):
   * each with every engine's score. Call after the run; each lookup costs a probe of every engine.
   */
  lookups(count: number, visit: (lookup: FleetLookup) => void): void {
    for (let i = 0; i < count; i++) {
      const d = this.draw();
      const n = Math.min(d.seq.length, this.config.blocksPerEngine);
      if (n === 0) {
        i--;
        continue;
      }
      const words = new Uint32Array(d.seq.buffer, d.seq.byteOffset, n * 2);
      const expect = new Map<number, number>();
      for (let e = 0; e < this.caches.length; e++) {
        const m = this.caches[e]!.match(words, n);
        if (m > 0) expect.set(e, m);
      }
      visit({ seq: d.local.subarray(0, n), expect });
    }
  }

  /** The next request of a seeded stream, hashed. */
  private draw(): Drawn {
    const t = this.t;
    const s = this.rng.below(this.config.streams);
    if (this.streamLeft[s] === 0) this.newCopy(s);
    const r = this.streamAt[s]!;
    const copy = this.streamCopy[s]!;
    this.streamAt[s] = r + 1 === t.blocks.length ? 0 : r + 1;
    this.streamLeft[s]!--;
    const n = t.blocks[r]!;
    const sub = this.config.subBlocks;
    if (this.tokens.length < 4 * n) this.tokens = new Uint32Array(Math.max(4 * n, 2 * this.tokens.length));
    const tokens = this.tokens;
    for (let b = 0; b < n; b++) {
      const id = t.ids[t.start[r]! + Math.floor(b / sub)]!;
      tokens[4 * b] = id;
      tokens[4 * b + 1] = t.shared[id] === 1 ? 0 : copy + 1;
      tokens[4 * b + 2] = b % sub;
      tokens[4 * b + 3] = this.seedWord;
    }
    const local = computeBlockHashes(tokens.subarray(0, 4 * n), 4);
    const root = t.session[r]!;
    return { session: root < 0 ? -1 : copy * t.distinct + root, local, seq: computeSequenceHashes(local) };
  }

  /** Stream `s` starts a new copy of the trace at a seeded rotation. */
  private newCopy(s: number): void {
    const requests = this.t.blocks.length;
    this.streamCopy[s] = this.nextCopy++;
    this.streamAt[s] = this.rng.below(requests);
    this.streamLeft[s] = requests;
    this.stats.copies++;
  }

  /** The next engine, round robin, that is not full (the caller knows one exists). */
  private nextEngine(): number {
    const n = this.config.engines;
    for (let i = 0; i < n; i++) {
      const e = this.cursor;
      this.cursor = e + 1 === n ? 0 : e + 1;
      if (this.full[e] === 0) return e;
    }
    return this.cursor;
  }
}
