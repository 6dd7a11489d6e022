/**
 * Cluster simulation: turns trace requests into the KV events a fleet of engines would publish,
 * the way Dynamo's mocker and the shared workloads' generator do (shared/workloads/README.md).
 *
 * Per request: its 512-token trace blocks are expanded into `subBlocks` blocks of `blockSize`
 * synthetic tokens each (the last trace block only as far as `input_length` reaches, partial
 * blocks dropped), all the request's tokens hashed in one `computeBlockHashes` call, and the
 * sequence hashes (the engines' external block hashes) derived with `computeSequenceHashes`.
 * The caller looks the request up in its indexer (`prepare` -> `findMatches` -> `serve`), so a
 * replay exercises the real lookup path; the simulation routes on those scores, updates the
 * chosen worker's cache model (`WorkerCache`, the ground truth) and returns its events:
 * Removed (leaf first) then Stored (root to leaf, `parent_hash` the sequence hash of the last
 * block it already held).
 *
 * Deterministic: the same trace, options and scores give the same events, byte for byte.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { computeBlockHashes, computeSequenceHashes } from '../hash/block-hash.js';
import type { RouterEvent, StoredBlock } from '../protocol/types.js';
import type { TraceRequest } from './mooncake.js';
import { RouterModel } from './router-model.js';
import { splitmix64, SyntheticTokens, TRACE_BLOCK_TOKENS } from './synthetic-tokens.js';
import { WorkerCache } from './worker-cache.js';
import { showValue } from '../protocol/show-value.js';

export interface ClusterSimOptions {
  /** Number of workers (default 4). */
  workers?: number;
  /** KV cache per worker, in blocks (default 16,384). */
  cacheBlocks?: number;
  /** Tokens per block (default 64). */
  blockSize?: number;
  /** Blocks per 512-token trace block (default and maximum: floor(512 / blockSize)). */
  subBlocks?: number;
  /** u64 seed of the tokens and worker ids (default 0). */
  seed?: bigint;
  /** Token vocabulary (default 32,000). */
  vocab?: number;
  /** Worker ids in index order (default: derived from the seed). */
  workerIds?: readonly bigint[];
  /** Prefill speed for the in-flight model, tokens/s (default 20,000). */
  prefillTokensPerSec?: number;
  /** Decode time per output token for the in-flight model, ms (default 20). */
  decodeMsPerToken?: number;
}

/** Resolved options (every field set). */
export interface ClusterSimConfig {
  workers: number;
  cacheBlocks: number;
  blockSize: number;
  subBlocks: number;
  seed: bigint;
  vocab: number;
  workerIds: bigint[];
  prefillTokensPerSec: number;
  decodeMsPerToken: number;
}

/** A request expanded into blocks, ready for a lookup. */
export interface PreparedRequest {
  request: TraceRequest;
  /** The request's tokens (full blocks): a view that the next `prepare` overwrites. */
  tokens: Uint32Array;
  /** LocalBlockHash per block: what the router looks up. */
  local: BigUint64Array;
  /** Sequence hash per block: the engines' external block hashes. */
  seq: BigUint64Array;
}

/** What serving one request did. */
export interface ServedRequest {
  /** Index of the chosen worker. */
  worker: number;
  workerId: bigint;
  /** Blocks of the request. */
  blocks: number;
  /** Leading blocks the chosen worker held (from its cache model). */
  hit: number;
  /** Best leading-block count over all workers (from the cache models). */
  oracle: number;
  /** Workers whose indexer score differed from their cache model. */
  mismatches: number;
  /** Blocks newly stored and evicted on the chosen worker. */
  stored: number;
  removed: number;
  /** The chosen worker's events: Removed (if any) then Stored (if any). */
  events: RouterEvent[];
}

const U64_MASK = (1n << 64n) - 1n;

/** Worker ids derived from a seed: distinct u64 values in [2^62, 2^63), far above 2^53. */
export function deriveWorkerIds(seed: bigint, count: number): bigint[] {
  const ids: bigint[] = [];
  const seen = new Set<bigint>();
  let x = (seed ^ 0x6b76_696e_6465_7821n) & U64_MASK; // "kvindex!"
  while (ids.length < count) {
    x = splitmix64(x);
    const id = (x & ((1n << 62n) - 1n)) | (1n << 62n);
    if (seen.has(id)) continue;
    seen.add(id);
    ids.push(id);
  }
  return ids;
}

const invalid = (message: string): never => {
  throw new KvIndexError(ErrorCode.InvalidOption, message);
};

/** Fills the defaults and checks every option; throws `KvIndexError` (`InvalidOption`) naming the bad one. */
export function resolveSimOptions(o: ClusterSimOptions = {}): ClusterSimConfig {
  const int = (name: string, v: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    if (!Number.isInteger(v) || v < min || v > max) invalid(`${name}: expected an integer in ${min}..${max}, got ${showValue(v)}`);
    return v;
  };
  const blockSize = int('blockSize', o.blockSize ?? 64, 1, TRACE_BLOCK_TOKENS);
  const maxSub = Math.floor(TRACE_BLOCK_TOKENS / blockSize);
  const seed = o.seed ?? 0n;
  if (typeof seed !== 'bigint' || seed < 0n || seed > U64_MASK) invalid(`seed: expected a u64 bigint, got ${String(seed)}`);
  const workers = int('workers', o.workerIds?.length ?? o.workers ?? 4, 1, 4096);
  if (o.workers !== undefined && o.workerIds !== undefined && o.workers !== o.workerIds.length) {
    invalid(`workers: ${o.workers} does not match the ${o.workerIds.length} workerIds`);
  }
  const workerIds = o.workerIds === undefined ? deriveWorkerIds(seed, workers) : [...o.workerIds];
  if (new Set(workerIds).size !== workerIds.length) invalid('workerIds: ids must be distinct');
  for (const id of workerIds) if (typeof id !== 'bigint' || id < 0n || id > U64_MASK) invalid(`workerIds: expected u64 bigints, got ${showValue(id)}`);
  const positive = (name: string, v: number): number => {
    if (!(Number.isFinite(v) && v > 0)) invalid(`${name}: expected a positive number, got ${showValue(v)}`);
    return v;
  };
  const decode = o.decodeMsPerToken ?? 20;
  if (!(Number.isFinite(decode) && decode >= 0)) invalid(`decodeMsPerToken: expected a number >= 0, got ${String(decode)}`);
  return {
    workers,
    cacheBlocks: int('cacheBlocks', o.cacheBlocks ?? 16_384, 1, 2 ** 28),
    blockSize,
    subBlocks: int('subBlocks', o.subBlocks ?? maxSub, 1, maxSub),
    seed,
    vocab: int('vocab', o.vocab ?? 32_000, 1, 2 ** 21),
    workerIds,
    prefillTokensPerSec: positive('prefillTokensPerSec', o.prefillTokensPerSec ?? 20_000),
    decodeMsPerToken: decode,
  };
}

/** The simulated fleet. */
export class ClusterSim {
  readonly config: ClusterSimConfig;
  private readonly caches: WorkerCache[];
  private readonly router: RouterModel;
  private readonly tokens: SyntheticTokens;
  private readonly eventIds: bigint[];
  private readonly hits: Int32Array;
  private readonly evicted: number[] = [];
  private scratch = new Uint32Array(64 * 1024);

  constructor(options: ClusterSimOptions = {}) {
    this.config = resolveSimOptions(options);
    const c = this.config;
    this.caches = Array.from({ length: c.workers }, () => new WorkerCache(c.cacheBlocks));
    this.router = new RouterModel({
      workers: c.workers,
      prefillTokensPerSec: c.prefillTokensPerSec,
      decodeMsPerToken: c.decodeMsPerToken,
    });
    this.tokens = new SyntheticTokens(c.seed, c.vocab);
    this.eventIds = c.workerIds.map(() => 0n);
    this.hits = new Int32Array(c.workers);
  }

  /** Blocks a request expands to (its tokens, full blocks only). */
  blockCount(request: TraceRequest): number {
    const ids = request.hashIds.length;
    if (ids === 0) return 0;
    const { subBlocks } = this.config;
    const last = Math.min(TRACE_BLOCK_TOKENS, Math.max(0, request.inputLength - TRACE_BLOCK_TOKENS * (ids - 1)));
    return (ids - 1) * subBlocks + Math.floor((subBlocks * last) / TRACE_BLOCK_TOKENS);
  }

  /** Expands a request into blocks and hashes them (one batched hashing call). */
  prepare(request: TraceRequest): PreparedRequest {
    const { blockSize, subBlocks } = this.config;
    const n = this.blockCount(request);
    const total = n * blockSize;
    if (this.scratch.length < total) this.scratch = new Uint32Array(Math.max(total, this.scratch.length * 2));
    const tokens = this.scratch;
    const ids = new Uint32Array(request.hashIds.buffer, request.hashIds.byteOffset, request.hashIds.length * 2);
    let pos = 0;
    for (let i = 0, left = n; left > 0; i++) {
      const blocks = Math.min(subBlocks, left);
      this.tokens.fill(ids[2 * i]!, ids[2 * i + 1]!, 0, blocks * blockSize, tokens, pos);
      pos += blocks * blockSize;
      left -= blocks;
    }
    const local = computeBlockHashes(tokens.subarray(0, total), blockSize);
    return { request, tokens: tokens.subarray(0, total), local, seq: computeSequenceHashes(local) };
  }

  /**
   * The workers (indices) whose score in `scores` (worker id -> leading blocks held) differs
   * from their cache model for this request: the check `serve` counts as `mismatches`, asked
   * on its own (before `serve`, which changes the chosen worker's cache).
   */
  differing(prepared: PreparedRequest, scores: ReadonlyMap<bigint, number>): number[] {
    const { seq } = prepared;
    const words = new Uint32Array(seq.buffer, seq.byteOffset, seq.length * 2);
    const ids = this.config.workerIds;
    const out: number[] = [];
    for (let w = 0; w < ids.length; w++) {
      if (this.caches[w]!.match(words, seq.length) !== (scores.get(ids[w]!) ?? 0)) out.push(w);
    }
    return out;
  }

  /**
   * Routes a prepared request on the indexer's `scores` (worker id -> leading blocks held),
   * updates the chosen worker's cache and returns its events. Also compares every worker's
   * score with its cache model (`mismatches`). With `chosen` (a worker index, e.g. a
   * `KvRouter`'s decision) the request goes there and the built-in routing model is bypassed.
   */
  serve(prepared: PreparedRequest, scores: ReadonlyMap<bigint, number>, chosen?: number): ServedRequest {
    if (chosen !== undefined && !(Number.isInteger(chosen) && chosen >= 0 && chosen < this.config.workers)) {
      invalid(`chosen: expected a worker index in 0..${this.config.workers - 1}, got ${String(chosen)}`);
    }
    const c = this.config;
    const { request, seq, local } = prepared;
    const n = seq.length;
    const words = new Uint32Array(seq.buffer, seq.byteOffset, n * 2);
    const ids = c.workerIds;
    let mismatches = 0;
    let oracle = 0;
    for (let w = 0; w < c.workers; w++) {
      const s = scores.get(ids[w]!) ?? 0;
      this.hits[w] = s;
      const m = this.caches[w]!.match(words, n);
      if (m !== s) mismatches++;
      if (m > oracle) oracle = m;
    }
    let w: number;
    if (chosen === undefined) {
      this.router.advance(request.timestamp);
      w = this.router.choose(n, this.hits);
    } else {
      w = chosen;
    }
    const cache = this.caches[w]!;
    const hit = cache.match(words, n); // re-run so the cache remembers this request's slots
    const stored = Math.min(n, c.cacheBlocks);
    const evicted = this.evicted;
    evicted.length = 0;
    cache.serve(words, hit, stored, evicted); // hit <= stored: a cache never holds more than C
    if (chosen === undefined) this.router.start(w, request.timestamp, n, (n - hit) * c.blockSize, request.outputLength);

    const workerId = ids[w]!;
    const events: RouterEvent[] = [];
    if (evicted.length > 0) {
      const blockHashes: bigint[] = [];
      for (let i = 0; i < evicted.length; i += 2) blockHashes.push((BigInt(evicted[i + 1]!) << 32n) | BigInt(evicted[i]!));
      events.push({ workerId, event: { eventId: this.nextEventId(w), data: { type: 'removed', blockHashes } } });
    }
    const fresh = stored - hit;
    if (fresh > 0) {
      const blocks: StoredBlock[] = [];
      for (let i = hit; i < stored; i++) blocks.push({ blockHash: seq[i]!, tokensHash: local[i]! });
      const parentHash = hit > 0 ? seq[hit - 1]! : null;
      events.push({ workerId, event: { eventId: this.nextEventId(w), data: { type: 'stored', parentHash, blocks } } });
    }
    return { worker: w, workerId, blocks: n, hit, oracle, mismatches, stored: fresh, removed: evicted.length / 2, events };
  }

  /** The cache model of worker `w` (read it, do not mutate it). */
  cache(w: number): WorkerCache {
    const cache = this.caches[w];
    if (cache === undefined) return invalid(`worker index ${w} out of range 0..${this.config.workers - 1}`);
    return cache;
  }

  private nextEventId(w: number): bigint {
    const id = this.eventIds[w]!;
    this.eventIds[w] = id + 1n;
    return id;
  }
}
