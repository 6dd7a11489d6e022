/**
 * In-flight requests per (worker, DP rank), as Dynamo's `ActiveSequences` keeps them
 * (docs/routing.md): a request holds its prompt's blocks (sequence hashes), reference-counted
 * per (worker, rank) so a block shared by two requests in flight counts once; its prefill
 * tokens count until `markPrefillCompleted` (the first token) or `free`. These feed the
 * selector's loads: active prefill tokens, decode blocks (active blocks plus the blocks a new
 * request would add) and the request count.
 *
 * Requests older than `ttlMs` (300 s, Dynamo's default) expire: a router that misses a `free`
 * (a client gone, a crash between route and free) would otherwise overcount the worker's load
 * forever. As in Dynamo the check runs during `addRequest`, at most every `ttlMs / 10`
 * (Dynamo: every 30 s), so it costs nothing per request; `expireDue()` runs that throttled
 * check for a caller about to read loads, `expire()` runs it unthrottled.
 *
 * Every change is reported to `onEvent` as an `ActiveSequenceEvent` (sequence-event.ts) for
 * router replicas; `applyEvent` applies a replica's event without reporting it again.
 * Routine inconsistencies (a duplicate id, freeing an unknown id) are counted, not thrown.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { showValue } from '../protocol/show-value.js';
import { MAX_TOKEN_COUNT, type ActiveSequenceEvent } from './sequence-event.js';

export interface ActiveSequencesOptions {
  /** Tokens per block: a request's prefill defaults to its blocks times this. */
  blockSize: number;
  /** Requests older than this (ms of `now`) expire. Default 300,000. */
  ttlMs?: number;
  /** Clock in ms; default `performance.now()`. Must not go backwards. */
  now?: () => number;
  /** u64 id of this router replica, stamped on its events. Default 0. */
  routerId?: bigint;
  /** Receives every change made through this object (not those applied from replicas). */
  onEvent?: ((event: ActiveSequenceEvent) => void) | null;
}

export interface AddRequestOptions {
  dpRank?: number;
  /** Expected output length, carried in the replica event (not priced: Dynamo prices it only with agent hints). */
  expectedOutputTokens?: number | null;
  /** Prefill tokens net of the cache hit (default: every block's tokens). */
  prefillTokens?: number | null;
  /** Whether the prefill tokens count in the load (default true). */
  trackPrefillTokens?: boolean;
  loraName?: string | null;
}

/** A (worker, rank)'s load. */
export interface SequenceLoad {
  activePrefillTokens: number;
  /** Distinct prompt blocks held by its requests in flight. */
  activeBlocks: number;
  activeRequests: number;
}

/** Counters since construction. */
export interface ActiveSequencesStats {
  added: number;
  freed: number;
  expired: number;
  /** `addRequest` with an id already in flight (ignored, as Dynamo does). */
  duplicates: number;
  /** `free` / `markPrefillCompleted` / replica events naming no request in flight. */
  unknown: number;
}

interface Slot {
  prefillTokens: number;
  requests: number;
  /** Sequence hash -> requests in flight holding it. */
  readonly blocks: Map<bigint, number>;
}

interface Request {
  readonly slotKey: bigint;
  readonly workerId: bigint;
  readonly dpRank: number;
  readonly hashes: BigUint64Array;
  /** Tokens still counted as prefill (0 once completed or untracked). */
  prefill: number;
  readonly startedAt: number;
  readonly loraName: string | null;
}

const IDLE: SequenceLoad = Object.freeze({ activePrefillTokens: 0, activeBlocks: 0, activeRequests: 0 });
const U64_MAX = 0xffff_ffff_ffff_ffffn;

export class ActiveSequences {
  readonly #blockSize: number;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #routerId: bigint;
  readonly #onEvent: ((event: ActiveSequenceEvent) => void) | null;
  readonly #slots = new Map<bigint, Slot>();
  /** In insertion order, which is start order: expiry stops at the first live request. */
  readonly #requests = new Map<string, Request>();
  #nextExpiryCheck: number;
  readonly #stats: ActiveSequencesStats = { added: 0, freed: 0, expired: 0, duplicates: 0, unknown: 0 };

  constructor(options: ActiveSequencesOptions) {
    const bad = (m: string): never => {
      throw new KvIndexError(ErrorCode.InvalidOption, m);
    };
    if (!Number.isInteger(options.blockSize) || options.blockSize < 1) bad(`blockSize: expected a positive integer, got ${String(options.blockSize)}`);
    const ttl = options.ttlMs ?? 300_000;
    if (!(typeof ttl === 'number' && ttl > 0)) bad(`ttlMs: expected a number > 0, got ${String(ttl)}`);
    const routerId = options.routerId ?? 0n;
    if (typeof routerId !== 'bigint' || routerId < 0n || routerId > U64_MAX) bad('routerId: expected a u64 bigint');
    this.#blockSize = options.blockSize;
    this.#ttlMs = ttl;
    this.#now = options.now ?? (() => performance.now());
    this.#routerId = routerId;
    this.#onEvent = options.onEvent ?? null;
    this.#nextExpiryCheck = this.#now() + ttl / 10;
  }

  /** Requests in flight. */
  get size(): number {
    return this.#requests.size;
  }

  stats(): ActiveSequencesStats {
    return { ...this.#stats };
  }

  /** True if the request is in flight. */
  has(requestId: string): boolean {
    return this.#requests.has(requestId);
  }

  /**
   * Records a request routed to `workerId` (rank `options.dpRank`) holding the prompt blocks
   * `blockHashes` (sequence hashes, u64). Returns false, counting a duplicate, if the id is
   * already in flight. Throws `InvalidField` for a malformed id, worker or option.
   */
  addRequest(requestId: string, workerId: bigint, blockHashes: BigUint64Array | readonly bigint[], options: AddRequestOptions = {}): boolean {
    const hashes = blockHashes instanceof BigUint64Array ? blockHashes : toHashes(blockHashes);
    const dpRank = options.dpRank ?? 0;
    checkIds(requestId, workerId, dpRank);
    const track = options.trackPrefillTokens ?? true;
    const prefillTokens = options.prefillTokens ?? null;
    // u32, as a replica's parser reads them (sequence-event.ts): larger counts were recorded
    // here and refused by every replica, and sums of counts near 2^53 rounded until a load
    // stayed at -1 and failed every later route (found by fuzzing).
    if (prefillTokens !== null && !(Number.isInteger(prefillTokens) && prefillTokens >= 0 && prefillTokens <= MAX_TOKEN_COUNT)) {
      field(`prefillTokens: expected an integer from 0 to ${MAX_TOKEN_COUNT}, got ${showValue(prefillTokens)}`);
    }
    const out = options.expectedOutputTokens ?? null;
    if (out !== null && !(Number.isInteger(out) && out >= 0 && out <= MAX_TOKEN_COUNT)) {
      field(`expectedOutputTokens: expected an integer from 0 to ${MAX_TOKEN_COUNT}, got ${showValue(out)}`);
    }
    const now = this.#now();
    this.#maybeExpire(now);
    const lora = options.loraName ?? null;
    if (!this.#add(requestId, workerId, dpRank, hashes, track ? prefillTokens ?? hashes.length * this.#blockSize : 0, now, lora)) return false;
    this.#onEvent?.({
      requestId, workerId, dpRank, routerId: this.#routerId, loraName: lora,
      data: { type: 'add_request', blockHashes: hashes, trackPrefillTokens: track, expectedOutputTokens: out, prefillTokens },
    });
    return true;
  }

  /** Drops the request's prefill tokens from its worker's load (call at the first token). False if unknown. */
  markPrefillCompleted(requestId: string): boolean {
    const r = this.#requests.get(requestId);
    if (r === undefined) {
      this.#stats.unknown++;
      return false;
    }
    this.#completePrefill(r);
    this.#emit(r, requestId, { type: 'mark_prefill_completed' });
    return true;
  }

  /** Ends the request: drops its prefill tokens and releases its blocks. False if unknown. */
  free(requestId: string): boolean {
    const r = this.#requests.get(requestId);
    if (r === undefined) {
      this.#stats.unknown++;
      return false;
    }
    this.#release(requestId, r);
    this.#stats.freed++;
    this.#emit(r, requestId, { type: 'free' });
    return true;
  }

  /** Frees every request older than the TTL now; returns how many. */
  expire(): number {
    return this.#expireAt(this.#now());
  }

  /**
   * The throttled check `addRequest` runs (at most every TTL / 10), for a caller about to read
   * loads: a router prices candidates before it adds, so after a long idle its first decision
   * read the loads of requests past their TTL (found by fuzzing). Returns how many it freed.
   */
  expireDue(): number {
    const before = this.#stats.expired;
    this.#maybeExpire(this.#now());
    return this.#stats.expired - before;
  }

  /** The load of (worker, rank); idle if nothing is in flight there. */
  load(workerId: bigint, dpRank = 0): SequenceLoad {
    const s = this.#slots.get(slotKey(workerId, dpRank));
    if (s === undefined) return IDLE;
    return { activePrefillTokens: s.prefillTokens, activeBlocks: s.blocks.size, activeRequests: s.requests };
  }

  /** How many of `hashes` (sequence hashes) are not held by a request in flight on (worker, rank). */
  newBlocks(workerId: bigint, dpRank: number, hashes: BigUint64Array): number {
    const s = this.#slots.get(slotKey(workerId, dpRank));
    if (s === undefined) return hashes.length;
    let fresh = 0;
    for (let i = 0; i < hashes.length; i++) if (!s.blocks.has(hashes[i]!)) fresh++;
    return fresh;
  }

  /**
   * `newBlocks` for a prompt's sequence hashes (`computeSequenceHashes`), in O(log n) map
   * lookups: a sequence hash names its whole prefix, and every request holds its prompt's
   * whole prefix, so the blocks of `seq` held on (worker, rank) are a prefix of it and a binary
   * search finds its end. (The linear `newBlocks` measured 20 us p50 and 210 us p99 per
   * routing decision on the conversation slice with 4 workers; see bench/route.bench.ts.)
   */
  newSequenceBlocks(workerId: bigint, dpRank: number, seq: BigUint64Array): number {
    const s = this.#slots.get(slotKey(workerId, dpRank));
    if (s === undefined) return seq.length;
    let lo = 0; // seq[0..lo) held
    let hi = seq.length; // seq[hi..) not held
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (s.blocks.has(seq[mid]!)) lo = mid + 1;
      else hi = mid;
    }
    return seq.length - lo;
  }

  /**
   * Applies a replica's event (its `routerId` is not checked here: skip your own before).
   * Returns false, counted, for an add of an id in flight or a free/mark of an unknown id.
   */
  applyEvent(e: ActiveSequenceEvent): boolean {
    const d = e.data;
    if (d.type === 'add_request') {
      checkIds(e.requestId, e.workerId, e.dpRank);
      const prefill = d.trackPrefillTokens ? d.prefillTokens ?? d.blockHashes.length * this.#blockSize : 0;
      const now = this.#now();
      // A replica's adds run the check too: a router that only applies its replicas' events
      // (no route of its own) kept their requests, and their load, forever (found by fuzzing).
      this.#maybeExpire(now);
      return this.#add(e.requestId, e.workerId, e.dpRank, d.blockHashes, prefill, now, e.loraName);
    }
    const r = this.#requests.get(e.requestId);
    if (r === undefined) {
      this.#stats.unknown++;
      return false;
    }
    if (d.type === 'free') {
      this.#release(e.requestId, r);
      this.#stats.freed++;
    } else {
      this.#completePrefill(r);
    }
    return true;
  }

  #add(id: string, workerId: bigint, dpRank: number, hashes: BigUint64Array, prefill: number, now: number, lora: string | null): boolean {
    if (this.#requests.has(id)) {
      this.#stats.duplicates++;
      return false;
    }
    const key = slotKey(workerId, dpRank);
    let s = this.#slots.get(key);
    if (s === undefined) {
      s = { prefillTokens: 0, requests: 0, blocks: new Map() };
      this.#slots.set(key, s);
    }
    s.requests++;
    s.prefillTokens += prefill;
    const blocks = s.blocks;
    for (let i = 0; i < hashes.length; i++) {
      const h = hashes[i]!;
      blocks.set(h, (blocks.get(h) ?? 0) + 1);
    }
    this.#requests.set(id, { slotKey: key, workerId, dpRank, hashes, prefill, startedAt: now, loraName: lora });
    this.#stats.added++;
    return true;
  }

  #completePrefill(r: Request): void {
    if (r.prefill === 0) return;
    this.#slots.get(r.slotKey)!.prefillTokens -= r.prefill;
    r.prefill = 0;
  }

  #release(id: string, r: Request): void {
    this.#completePrefill(r);
    const s = this.#slots.get(r.slotKey)!;
    const blocks = s.blocks;
    for (let i = 0; i < r.hashes.length; i++) {
      const h = r.hashes[i]!;
      const n = blocks.get(h)!;
      if (n <= 1) blocks.delete(h);
      else blocks.set(h, n - 1);
    }
    // An idle slot goes: hostile or departed worker ids must not accumulate.
    if (--s.requests === 0) this.#slots.delete(r.slotKey);
    this.#requests.delete(id);
  }

  /** The expiry check, at most every TTL / 10 (Dynamo: every 30 s). */
  #maybeExpire(now: number): void {
    if (now < this.#nextExpiryCheck) return;
    this.#nextExpiryCheck = now + this.#ttlMs / 10;
    this.#expireAt(now);
  }

  #expireAt(now: number): number {
    let n = 0;
    for (const [id, r] of this.#requests) {
      if (now - r.startedAt < this.#ttlMs) break;
      this.#release(id, r);
      n++;
    }
    this.#stats.expired += n;
    return n;
  }

  #emit(r: Request, requestId: string, data: { type: 'free' } | { type: 'mark_prefill_completed' }): void {
    this.#onEvent?.({ requestId, workerId: r.workerId, dpRank: r.dpRank, routerId: this.#routerId, loraName: r.loraName, data });
  }
}

/** (worker, rank) as one map key: the u64 id above the u32 rank, never through a number. */
function slotKey(workerId: bigint, dpRank: number): bigint {
  return (workerId << 32n) | BigInt(dpRank >>> 0);
}

function field(message: string): never {
  throw new KvIndexError(ErrorCode.InvalidField, message);
}

function checkIds(requestId: string, workerId: bigint, dpRank: number): void {
  if (typeof requestId !== 'string') field('requestId: expected a string');
  if (typeof workerId !== 'bigint' || workerId < 0n || workerId > U64_MAX) field(`workerId: expected a u64 bigint, got ${String(workerId)}`);
  if (!Number.isInteger(dpRank) || dpRank < 0 || dpRank > 0xffff_ffff) field(`dpRank: expected a u32, got ${String(dpRank)}`);
}

function toHashes(list: readonly bigint[]): BigUint64Array {
  const out = new BigUint64Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const h = list[i];
    if (typeof h !== 'bigint' || h < 0n || h > U64_MAX) field(`blockHashes[${i}]: expected a u64 bigint`);
    out[i] = h as bigint;
  }
  return out;
}
