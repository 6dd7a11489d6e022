/**
 * The routing decision as a library call: an indexer (a `ShardedIndexer` with any shard count,
 * or a `RadixTree`), the in-flight bookkeeping (`ActiveSequences`) and Dynamo's selector
 * (`selectWorker`). `route(tokens)` hashes the prompt, looks it up, prices every candidate,
 * picks one and records the request as active there; the caller reports the first token
 * (`markPrefillCompleted`) and the end (`free`).
 *
 * Two optional indexes fed by the decisions themselves (approx-index.ts):
 * - `approximate: true`, for engines that publish no KV events: every decision stores the
 *   prompt for the chosen worker in the indexer with a TTL (120 s);
 * - `predictedTtlMs`, beside real events: a second, in-thread tree holds each decision's blocks
 *   for a few seconds and its scores merge with the indexer's per worker by the maximum, so
 *   sibling requests that arrive before the engine's Stored event are not scattered; the event
 *   index never receives router-computed hashes.
 *
 * Everything runs synchronously on the calling thread (`findMatchesInto`); with shard threads
 * and `readYourWrites` a lookup first waits until the shards applied the events sent before it.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { computeBlockHashes, computeSequenceHashes, type BlockHashOptions } from '../hash/block-hash.js';
import type { RouterEvent } from '../protocol/types.js';
import { createMatchResult, type MatchResult } from '../tree/match-result.js';
import { RadixTree } from '../tree/radix-tree.js';
import { ActiveSequences } from './active-sequences.js';
import { ApproxIndex } from './approx-index.js';
import { showValue } from '../protocol/show-value.js';
import { MAX_TOKEN_COUNT, type ActiveSequenceEvent } from './sequence-event.js';
import {
  checkCandidate,
  resolveSelectorConfig,
  selectResolved,
  type CandidateLoad,
  type ResolvedSelectorConfig,
  type RouteOverrides,
  type SelectorConfig,
  type WorkerCandidate,
} from './select-worker.js';

/** What the router needs from an indexer (`ShardedIndexer` and `RadixTree` both qualify). */
export interface RouterIndex {
  findMatchesInto(hashes: BigUint64Array, result: MatchResult, earlyExit?: boolean): number;
  applyEvent(event: RouterEvent): unknown;
}

export interface KvRouterOptions extends Omit<SelectorConfig, 'blockSize'> {
  indexer: RouterIndex;
  /** Tokens per block; must be the indexer's and the engines'. */
  blockSize: number;
  /** The candidate workers (and ranks); `route` may pass its own. */
  workers?: readonly WorkerCandidate[];
  /** Feed decisions into the indexer with a TTL (engines without KV events). Default false. */
  approximate?: boolean;
  /** Approximate mode: TTL of a routed block, ms (default 120,000). */
  approximateTtlMs?: number;
  /** Approximate mode: (worker, block) entries before pruning (default 2^20). */
  approximateMaxBlocks?: number;
  /** Predicted-TTL side index, ms (Dynamo's `router_predicted_ttl_secs`; ~5,000 suggested). Off by default. */
  predictedTtlMs?: number | null;
  /** TTL of a request in flight, ms (default 300,000). */
  sequenceTtlMs?: number;
  /** Clock in ms for every TTL (default `performance.now()`). */
  now?: () => number;
  /** u64 id of this router replica, stamped on its sequence events. */
  routerId?: bigint;
  /** Receives this router's `ActiveSequenceEvent`s, for its replicas. */
  onSequenceEvent?: ((event: ActiveSequenceEvent) => void) | null;
  /**
   * An engine's prefill speed, tokens per ms, or null (default: Dynamo's accounting). When set,
   * a candidate's queued prefill is what remains of it after the engine worked at this speed
   * since it was routed (a virtual queue per candidate), never more than the tokens of its
   * requests still before their first token: a prompt nearly done counts as nearly done.
   */
  prefillTokensPerMs?: number | null;
}

export interface RouteOptions extends BlockHashOptions {
  /** The request's id (default: generated, `kvr-<n>`). */
  requestId?: string;
  /** Candidates for this request only. */
  candidates?: readonly WorkerCandidate[];
  overrides?: RouteOverrides | null;
  expectedOutputTokens?: number | null;
}

/** A routing decision, with everything it was based on. */
export interface RouteDecision {
  requestId: string;
  workerId: bigint;
  dpRank: number;
  /** The chosen worker's device overlap, in blocks (with a predicted index: the merged value). */
  overlapBlocks: number;
  requiredBlocks: number;
  candidates: readonly WorkerCandidate[];
  /** Per candidate, in order. */
  costs: Float64Array;
  overlaps: Uint32Array;
  /**
   * Time spent hashing, looking up (both indexes), selecting (loads included) and recording the
   * request (ActiveSequences, the approximate and predicted indexes), in microseconds.
   */
  hashUs: number;
  lookupUs: number;
  selectUs: number;
  recordUs: number;
}

export class KvRouter {
  readonly #index: RouterIndex;
  readonly #blockSize: number;
  readonly #config: ResolvedSelectorConfig;
  readonly #sequences: ActiveSequences;
  readonly #approx: ApproxIndex | null;
  readonly #predictedTree: RadixTree | null;
  readonly #predicted: ApproxIndex | null;
  #workers: WorkerCandidate[];
  readonly #rate: number;
  readonly #clock: () => number;
  /** Virtual prefill queue per candidate key: tokens left at `at` ms. */
  readonly #virtual = new Map<string, { left: number; at: number }>();
  readonly #result: MatchResult = createMatchResult();
  readonly #side: MatchResult = createMatchResult();
  #nextId = 0;

  constructor(options: KvRouterOptions) {
    if (typeof options !== 'object' || options === null || typeof options.indexer?.findMatchesInto !== 'function') {
      throw new KvIndexError(ErrorCode.InvalidOption, 'indexer: expected a ShardedIndexer or RadixTree');
    }
    const { indexer, workers, approximate, approximateTtlMs, approximateMaxBlocks, predictedTtlMs, sequenceTtlMs, now, routerId, onSequenceEvent, prefillTokensPerMs, ...selector } = options;
    const rate = prefillTokensPerMs ?? 0;
    if (typeof rate !== 'number' || !Number.isFinite(rate) || rate < 0) throw new KvIndexError(ErrorCode.InvalidOption, `prefillTokensPerMs: expected a finite number >= 0 or null, got ${showValue(rate)}`);
    this.#rate = rate;
    this.#config = resolveSelectorConfig({ ...selector, blockSize: options.blockSize });
    this.#index = indexer;
    this.#blockSize = options.blockSize;
    const clock = now ?? (() => performance.now());
    this.#clock = clock;
    this.#sequences = new ActiveSequences({
      blockSize: options.blockSize,
      now: clock,
      ...(sequenceTtlMs === undefined ? {} : { ttlMs: sequenceTtlMs }),
      ...(routerId === undefined ? {} : { routerId }),
      onEvent: onSequenceEvent ?? null,
    });
    this.#approx = approximate === true
      ? new ApproxIndex(indexer, {
        now: clock,
        ...(approximateTtlMs === undefined ? {} : { ttlMs: approximateTtlMs }),
        ...(approximateMaxBlocks === undefined ? {} : { maxBlocks: approximateMaxBlocks }),
      })
      : null;
    if (predictedTtlMs !== undefined && predictedTtlMs !== null) {
      if (approximate === true) throw new KvIndexError(ErrorCode.InvalidOption, 'predictedTtlMs: not with approximate (the index already holds the decisions)');
      this.#predictedTree = new RadixTree();
      this.#predicted = new ApproxIndex(this.#predictedTree, { now: clock, ttlMs: predictedTtlMs });
    } else {
      this.#predictedTree = null;
      this.#predicted = null;
    }
    this.#workers = [];
    for (const w of workers ?? []) this.addWorker(w.workerId, w.dpRank);
  }

  /** The in-flight bookkeeping (loads; `applyEvent` for a replica's events). */
  get sequences(): ActiveSequences {
    return this.#sequences;
  }

  /** The configured candidates. */
  get workers(): readonly WorkerCandidate[] {
    return this.#workers;
  }

  /** Adds a candidate (worker, rank); no-op if present. */
  addWorker(workerId: bigint, dpRank = 0): void {
    if (typeof workerId !== 'bigint' || workerId < 0n || workerId > 0xffff_ffff_ffff_ffffn) throw new KvIndexError(ErrorCode.InvalidField, 'workerId: expected a u64 bigint');
    if (!Number.isInteger(dpRank) || dpRank < 0 || dpRank > 0xffff_ffff) throw new KvIndexError(ErrorCode.InvalidField, `dpRank: expected a u32, got ${String(dpRank)}`);
    if (this.#workers.some((w) => w.workerId === workerId && w.dpRank === dpRank)) return;
    this.#workers = [...this.#workers, { workerId, dpRank }];
  }

  /** Removes every rank of the worker from the candidates and forgets its predicted blocks. */
  removeWorker(workerId: bigint): void {
    this.#workers = this.#workers.filter((w) => w.workerId !== workerId);
    this.#approx?.removeWorker(workerId);
    if (this.#predicted !== null) {
      this.#predicted.removeWorker(workerId);
      this.#predictedTree!.removeWorker(workerId);
    }
  }

  /**
   * Routes a prompt: hashes `tokens` (full blocks), looks them up, selects a candidate and
   * records the request as active on it. Throws `KvIndexError`: `NoWorkers` without candidates,
   * `DuplicateRequest` for an id in flight, `InvalidField` / `InvalidOption` for bad input.
   */
  route(tokens: Uint32Array | readonly number[], options: RouteOptions = {}): RouteDecision {
    const t0 = performance.now();
    const local = computeBlockHashes(tokens, this.#blockSize, options);
    return this.#decide(local, tokens.length, options, t0);
  }

  /**
   * `route` for a caller that hashed the prompt already: `local` are its blocks' hashes
   * (`computeBlockHashes` with this router's block size and the request's identity options) and
   * `tokenCount` its length in tokens (at least `local.length * blockSize`).
   */
  routeBlocks(local: BigUint64Array, tokenCount: number, options: RouteOptions = {}): RouteDecision {
    if (!(local instanceof BigUint64Array)) throw new KvIndexError(ErrorCode.InvalidField, 'local: expected a BigUint64Array');
    // At most a u32, as replicas read token counts (sequence-event.ts): 2^53-1 was taken, and
    // its prefill left the worker's load at -1 once marked, failing every later route (fuzzing).
    if (!Number.isInteger(tokenCount) || tokenCount < local.length * this.#blockSize || tokenCount > MAX_TOKEN_COUNT) {
      throw new KvIndexError(ErrorCode.InvalidField, `tokenCount: expected an integer from ${local.length * this.#blockSize} to ${MAX_TOKEN_COUNT}, got ${showValue(tokenCount)}`);
    }
    return this.#decide(local, tokenCount, options, performance.now());
  }

  /**
   * A generated request id that is not in flight: a client may have sent `kvr-0` itself, and a
   * request that sent no id was then refused as a duplicate (found by fuzzing).
   */
  #freshId(): string {
    let id = `kvr-${this.#nextId++}`;
    while (this.#sequences.has(id)) id = `kvr-${this.#nextId++}`;
    return id;
  }

  #decide(local: BigUint64Array, tokenCount: number, options: RouteOptions, t0: number): RouteDecision {
    const requestId = options.requestId ?? this.#freshId();
    if (typeof requestId !== 'string') throw new KvIndexError(ErrorCode.InvalidField, 'requestId: expected a string');
    if (this.#sequences.has(requestId)) throw new KvIndexError(ErrorCode.DuplicateRequest, `requestId ${JSON.stringify(requestId)} is already in flight`);
    const candidates = options.candidates ?? this.#workers;
    if (!Array.isArray(candidates)) throw new KvIndexError(ErrorCode.InvalidField, 'candidates: expected an array');
    for (let i = 0; i < candidates.length; i++) checkCandidate(candidates[i], i);
    if (candidates.length === 0) throw new KvIndexError(ErrorCode.NoWorkers, 'route: no candidate workers');

    const seq = computeSequenceHashes(local);
    const t1 = performance.now();
    this.#approx?.expire();
    const overlap = new Map<bigint, number>();
    const r = this.#result;
    const n = this.#index.findMatchesInto(local, r);
    for (let i = 0; i < n; i++) overlap.set(r.workerIds[i]!, r.scores[i]!);
    if (this.#predicted !== null) {
      this.#predicted.expire();
      const s = this.#side;
      const m = this.#predictedTree!.findMatchesInto(local, s);
      for (let i = 0; i < m; i++) {
        const id = s.workerIds[i]!;
        if (s.scores[i]! > (overlap.get(id) ?? 0)) overlap.set(id, s.scores[i]!);
      }
    }
    const t2 = performance.now();

    this.#sequences.expireDue(); // before the loads are read, not only at the add
    const loads: CandidateLoad[] = new Array(candidates.length);
    for (let i = 0; i < candidates.length; i++) {
      const c = candidates[i]!;
      const l = this.#sequences.load(c.workerId, c.dpRank);
      loads[i] = {
        activePrefillTokens: this.#rate > 0 ? Math.min(l.activePrefillTokens, this.#virtualLeft(c.workerId, c.dpRank)) : l.activePrefillTokens,
        decodeBlocks: l.activeBlocks + this.#sequences.newSequenceBlocks(c.workerId, c.dpRank, seq),
        activeRequests: l.activeRequests,
      };
    }
    const s = selectResolved({ tokens: tokenCount, overrides: options.overrides ?? null }, candidates, overlap, loads, this.#config);
    const t3 = performance.now();

    const prefillTokens = Math.max(0, tokenCount - s.overlapBlocks * this.#blockSize);
    if (this.#rate > 0) {
      const key = `${s.workerId}:${s.dpRank}`;
      this.#virtual.set(key, { left: this.#virtualLeft(s.workerId, s.dpRank) + prefillTokens, at: this.#clock() });
    }
    this.#sequences.addRequest(requestId, s.workerId, seq, {
      dpRank: s.dpRank,
      prefillTokens,
      expectedOutputTokens: options.expectedOutputTokens ?? null,
      loraName: options.loraName ?? null,
    });
    this.#approx?.recordDecision(s.workerId, local, seq);
    this.#predicted?.recordDecision(s.workerId, local, seq);
    const t4 = performance.now();
    return {
      requestId,
      workerId: s.workerId,
      dpRank: s.dpRank,
      overlapBlocks: s.overlapBlocks,
      requiredBlocks: s.requiredBlocks,
      candidates,
      costs: s.costs,
      overlaps: s.overlaps,
      hashUs: (t1 - t0) * 1000,
      lookupUs: (t2 - t1) * 1000,
      selectUs: (t3 - t2) * 1000,
      recordUs: (t4 - t3) * 1000,
    };
  }

  /** Tokens left in a candidate's virtual prefill queue now. */
  #virtualLeft(workerId: bigint, dpRank: number): number {
    const v = this.#virtual.get(`${workerId}:${dpRank}`);
    if (v === undefined) return 0;
    return Math.max(0, v.left - this.#rate * (this.#clock() - v.at));
  }

  /**
   * The prefill tokens this router counts as queued on (worker, rank) now: what its selector
   * reads as the candidate's prefill load (with `prefillTokensPerMs`, the virtual queue drained
   * at that speed, never above Dynamo's count of prompts before their first token). A router
   * that holds requests (a router-side queue) reads it to decide when to dispatch.
   */
  queuedPrefillTokens(workerId: bigint, dpRank = 0): number {
    this.#sequences.expireDue();
    const active = this.#sequences.load(workerId, dpRank).activePrefillTokens;
    return this.#rate > 0 ? Math.min(active, this.#virtualLeft(workerId, dpRank)) : active;
  }

  /** The request's first token arrived: its prefill no longer loads the worker. False if unknown. */
  markPrefillCompleted(requestId: string): boolean {
    return this.#sequences.markPrefillCompleted(requestId);
  }

  /** The request ended: releases its blocks and load. False if unknown. */
  free(requestId: string): boolean {
    return this.#sequences.free(requestId);
  }
}
