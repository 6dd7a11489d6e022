/**
 * Approximate mode (Dynamo's `--no-kv-events` indexer and its predicted-TTL side index, see
 * docs/routing.md): for engines that publish no KV events, every routing decision is taken as
 * the chosen worker now caching the prompt. `recordDecision` applies a synthetic Stored event
 * from the root (the prompt's local hashes, the router's sequence hashes as the external ones)
 * to the target index and (re)arms a TTL per (worker, block); expired blocks leave the index
 * through synthetic single-block Removed events. When more than `maxBlocks` (worker, block)
 * entries are armed the index is pruned to `pruneTargetRatio` of it, earliest expiry first and,
 * among equal expiries, deepest block first (a prompt's blocks share one expiry: its tail goes
 * before its prefix, so what remains is still a prefix).
 *
 * Timers live in a Map (the truth) and a lazy min-heap: re-arming pushes a new heap entry and
 * leaves the old one stale, skipped when popped; the heap is rebuilt from the Map when it holds
 * more than 50 entries per live timer (Dynamo's bound), so a hot prefix re-armed on every
 * request does not grow it without limit.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import type { RouterEvent, StoredBlock } from '../protocol/types.js';

/** Where the synthetic events go: a RadixTree or a ShardedIndexer. */
export interface ApproxTarget {
  applyEvent(event: RouterEvent): unknown;
}

export interface ApproxIndexOptions {
  /** How long a routed block stays, ms of `now`. Default 120,000 (Dynamo). */
  ttlMs?: number;
  /** Armed (worker, block) entries above which the index is pruned. Default 2^20 (Dynamo). */
  maxBlocks?: number;
  /** Fraction of `maxBlocks` a prune leaves. Default 0.8 (Dynamo). */
  pruneTargetRatio?: number;
  /** Clock in ms; default `performance.now()`. */
  now?: () => number;
}

/** Counters since construction. */
export interface ApproxIndexStats {
  /** Routing decisions recorded. */
  decisions: number;
  /** Blocks removed because their TTL passed. */
  expired: number;
  /** Blocks removed by size pruning. */
  pruned: number;
}

interface Timer {
  expiry: number;
  readonly pos: number;
}

const HEAP_SLACK = 50;

export class ApproxIndex {
  readonly #target: ApproxTarget;
  readonly #ttlMs: number;
  readonly #maxBlocks: number;
  readonly #pruneTo: number;
  readonly #now: () => number;
  /** worker id -> sequence hash -> its timer. */
  readonly #timers = new Map<bigint, Map<bigint, Timer>>();
  #live = 0;
  // The heap, in parallel arrays: expiry, block position, worker, hash.
  #hExp: number[] = [];
  #hPos: number[] = [];
  #hWorker: bigint[] = [];
  #hHash: bigint[] = [];
  #eventId = 0n;
  readonly #stats: ApproxIndexStats = { decisions: 0, expired: 0, pruned: 0 };

  constructor(target: ApproxTarget, options: ApproxIndexOptions = {}) {
    const bad = (m: string): never => {
      throw new KvIndexError(ErrorCode.InvalidOption, m);
    };
    const ttl = options.ttlMs ?? 120_000;
    if (!(typeof ttl === 'number' && ttl > 0 && Number.isFinite(ttl))) bad(`ttlMs: expected a finite number > 0, got ${String(ttl)}`);
    const max = options.maxBlocks ?? 2 ** 20;
    if (!(Number.isInteger(max) && max >= 1)) bad(`maxBlocks: expected a positive integer, got ${String(max)}`);
    const ratio = options.pruneTargetRatio ?? 0.8;
    if (!(typeof ratio === 'number' && ratio >= 0 && ratio < 1)) bad(`pruneTargetRatio: expected a number in [0, 1), got ${String(ratio)}`);
    this.#target = target;
    this.#ttlMs = ttl;
    this.#maxBlocks = max;
    this.#pruneTo = Math.floor(max * ratio);
    this.#now = options.now ?? (() => performance.now());
  }

  /** Armed (worker, block) entries. */
  get size(): number {
    return this.#live;
  }

  stats(): ApproxIndexStats {
    return { ...this.#stats };
  }

  /**
   * Records that `workerId` now caches the prompt: `local[i]` / `seq[i]` are block i's local and
   * sequence hashes. Expires what is due first, prunes after.
   */
  recordDecision(workerId: bigint, local: BigUint64Array, seq: BigUint64Array): void {
    const now = this.#now();
    this.expire(now);
    const n = Math.min(local.length, seq.length);
    this.#stats.decisions++;
    if (n === 0) return;
    const blocks: StoredBlock[] = new Array(n);
    for (let i = 0; i < n; i++) blocks[i] = { blockHash: seq[i]!, tokensHash: local[i]! };
    this.#target.applyEvent({ workerId, event: { eventId: this.#eventId++, data: { type: 'stored', parentHash: null, blocks } } });
    let timers = this.#timers.get(workerId);
    if (timers === undefined) {
      timers = new Map();
      this.#timers.set(workerId, timers);
    }
    const expiry = now + this.#ttlMs;
    for (let i = 0; i < n; i++) {
      const h = seq[i]!;
      const t = timers.get(h);
      if (t === undefined) {
        timers.set(h, { expiry, pos: i });
        this.#live++;
      } else {
        t.expiry = expiry;
      }
      this.#push(expiry, i, workerId, h);
    }
    if (this.#live > this.#maxBlocks) this.#stats.pruned += this.#popWhile(Infinity, this.#pruneTo);
    if (this.#hExp.length > HEAP_SLACK * Math.max(this.#live, 1024)) this.#rebuild();
  }

  /** Removes every block whose TTL passed by `now` (default: the clock); returns how many. */
  expire(now = this.#now()): number {
    const n = this.#popWhile(now, 0);
    this.#stats.expired += n;
    return n;
  }

  /**
   * Removes a worker's routed blocks from the target (one synthetic Removed event, deepest
   * first, so each removal frees a leaf) and forgets their timers. Timers
   * alone were forgotten before: the blocks then stayed in the index for good, outside the
   * size budget, and gave a re-added worker overlap from decisions long expired (found by
   * fuzzing). Returns how many blocks it removed.
   */
  removeWorker(workerId: bigint): number {
    const timers = this.#timers.get(workerId);
    if (timers === undefined) return 0;
    this.#live -= timers.size;
    this.#timers.delete(workerId);
    const blocks = [...timers].sort((a, b) => b[1].pos - a[1].pos).map(([h]) => h);
    this.#target.applyEvent({ workerId, event: { eventId: this.#eventId++, data: { type: 'removed', blockHashes: blocks } } });
    return blocks.length;
  }

  /** Pops live timers expiring at or before `until` while more than `floor` are live. */
  #popWhile(until: number, floor: number): number {
    let removed = 0;
    while (this.#hExp.length > 0 && this.#live > floor && this.#hExp[0]! <= until) {
      const exp = this.#hExp[0]!;
      const w = this.#hWorker[0]!;
      const h = this.#hHash[0]!;
      this.#pop();
      const timers = this.#timers.get(w);
      const t = timers?.get(h);
      if (t === undefined || t.expiry !== exp) continue; // stale: re-armed or gone
      timers!.delete(h);
      if (timers!.size === 0) this.#timers.delete(w);
      this.#live--;
      removed++;
      this.#target.applyEvent({ workerId: w, event: { eventId: this.#eventId++, data: { type: 'removed', blockHashes: [h] } } });
    }
    return removed;
  }

  /** Heap order: earlier expiry first; on equal expiry the deeper block first. */
  #before(a: number, b: number): boolean {
    const ea = this.#hExp[a]!;
    const eb = this.#hExp[b]!;
    return ea < eb || (ea === eb && this.#hPos[a]! > this.#hPos[b]!);
  }

  #push(exp: number, pos: number, w: bigint, h: bigint): void {
    this.#hExp.push(exp);
    this.#hPos.push(pos);
    this.#hWorker.push(w);
    this.#hHash.push(h);
    let i = this.#hExp.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.#before(i, p)) break;
      this.#swap(i, p);
      i = p;
    }
  }

  #pop(): void {
    const last = this.#hExp.length - 1;
    this.#swap(0, last);
    this.#hExp.pop();
    this.#hPos.pop();
    this.#hWorker.pop();
    this.#hHash.pop();
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= last) break;
      const c = l + 1 < last && this.#before(l + 1, l) ? l + 1 : l;
      if (!this.#before(c, i)) break;
      this.#swap(c, i);
      i = c;
    }
  }

  #swap(a: number, b: number): void {
    const e = this.#hExp[a]!;
    this.#hExp[a] = this.#hExp[b]!;
    this.#hExp[b] = e;
    const p = this.#hPos[a]!;
    this.#hPos[a] = this.#hPos[b]!;
    this.#hPos[b] = p;
    const w = this.#hWorker[a]!;
    this.#hWorker[a] = this.#hWorker[b]!;
    this.#hWorker[b] = w;
    const h = this.#hHash[a]!;
    this.#hHash[a] = this.#hHash[b]!;
    this.#hHash[b] = h;
  }

  #rebuild(): void {
    this.#hExp = [];
    this.#hPos = [];
    this.#hWorker = [];
    this.#hHash = [];
    for (const [w, timers] of this.#timers) for (const [h, t] of timers) this.#push(t.expiry, t.pos, w, h);
  }
}
