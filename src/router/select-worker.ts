/**
 * Worker selection with Dynamo's 2026 cost (its `DefaultWorkerSelector`; the formula, defaults
 * and sources are in docs/routing.md):
 *
 *   cost = prefillLoadScale * max(rawPrefillBlocks - overlapCredit, 0) + decodeBlocks
 *          + decodeActiveRequestWeight * activeRequests - overlapBonus * deviceOverlap
 *   rawPrefillBlocks = activePrefillTokens / blockSize + requestTokens / blockSize
 *   overlapCredit    = credit * decay * deviceOverlap + hostWeight * hostOverlap
 *                      + diskWeight * diskOverlap
 *   decay            = 1 / (1 + creditDecay * ((activePrefillTokens - min over candidates)
 *                      / blockSize) / requestBlocks)
 *
 * Temperature 0 takes the minimum cost, ties broken uniformly at random (reservoir sampling: one
 * draw per tied candidate after the first); temperature T > 0 samples from
 * p_i ∝ exp(-(cost_i - min) / ((max - min) * T)), uniform when every cost is equal. Blocks are
 * floats, as in Dynamo (a 100-token prompt at block size 64 is 1.5625 prompt blocks).
 *
 * Overlap is keyed by worker id, as the indexer scores it: every DP rank of a worker gets the
 * worker's overlap. Loads are per candidate (per worker and rank).
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import type { RandomSource } from './random.js';
import { showValue } from '../protocol/show-value.js';

/** One worker (and data-parallel rank) a request may go to. */
export interface WorkerCandidate {
  /** u64 worker id. */
  workerId: bigint;
  /** Data-parallel rank (u32); 0 without DP. */
  dpRank: number;
}

/** A candidate's in-flight load (ActiveSequences.load gives it for tracked requests). */
export interface CandidateLoad {
  /** Prompt tokens of its requests not yet past prefill (each counted net of its overlap). */
  activePrefillTokens: number;
  /** Blocks it would hold for decode with this request: its active blocks + the request's new ones. */
  decodeBlocks: number;
  /** Requests in flight on it. */
  activeRequests: number;
}

/** Per-worker overlap in blocks: device-resident (the indexer's scores), host and disk tiers. */
export interface TieredOverlap {
  device: ReadonlyMap<bigint, number>;
  host?: ReadonlyMap<bigint, number> | null;
  disk?: ReadonlyMap<bigint, number> | null;
}

/** The knobs a single request may override (Dynamo's per-request router config override). */
export interface RouteOverrides {
  overlapScoreCredit?: number;
  prefillLoadScale?: number;
  temperature?: number;
}

/**
 * Costs in predicted milliseconds to the request's first token instead of Dynamo's blocks (not
 * Dynamo's; kvindex's `kv-time` preset): an engine profile the operator measures once per model
 * and GPU. For candidate i, with `P` the prefill tokens ahead of and including this request
 * (its queued prefill plus the prompt's uncached tokens, as Dynamo's prefill term counts them)
 * and `B` the blocks its requests in flight hold with this one (the decode term), `busy` when it
 * has a request in flight:
 *
 *   cost = P / prefillTokensPerMs + ceil(P / tokenBudget) * (busy ? decodeStepMs + decodeMsPerBlock * B : 0)
 *          + decodeActiveRequestWeight * activeRequests - overlapBonus * deviceOverlap
 *
 * The second term is the decode work mixed into every step the prefill takes: a 100k-token
 * prompt takes 13 steps of 8,192 tokens, each slowed by the engine's decoders, while a
 * 2k-token prompt takes one, so the decode load weighs in proportion to the prompt's steps
 * (Dynamo adds it once, as blocks, whatever the prompt). `overlapBonus` is in ms per cached block.
 */
export interface TimeCost {
  /** Prefill speed of an engine, tokens per ms (a full step's tokens over its time). */
  prefillTokensPerMs: number;
  /** Tokens per engine step (vLLM's max_num_batched_tokens). */
  tokenBudget: number;
  /** Decode part of a step when the engine decodes anything, ms. */
  decodeStepMs: number;
  /** Decode ms per step per block held by the engine's requests in flight. */
  decodeMsPerBlock: number;
}

/** Selector configuration; every field but `blockSize` has Dynamo's default. */
export interface SelectorConfig {
  /** Tokens per block (positive integer). */
  blockSize: number;
  /** Credit per device-overlap block, 0..1 (default 1; 0 ignores the indexer). */
  overlapScoreCredit?: number;
  /** Decay of the credit with the candidate's excess prefill load (default 0: off). */
  overlapCreditDecay?: number;
  /** Credit per host-tier overlap block (default 0.75). */
  hostCacheHitWeight?: number;
  /** Credit per disk-tier overlap block (default 0.25). */
  diskCacheHitWeight?: number;
  /** Weight of the prefill term (default 1). */
  prefillLoadScale?: number;
  /** Blocks of cost per active request (default 0). */
  decodeActiveRequestWeight?: number;
  /**
   * Blocks of cost taken off per device-overlap block, outside the prefill term (default 0,
   * Dynamo's cost). Not Dynamo's: it values keeping a prefix where it is cached beyond the
   * prefill it saves now (the next turn of a conversation finds it there), which the
   * prefill credit alone stops counting once the prefill term reaches 0.
   */
  overlapBonus?: number;
  /** 0 (default): minimum cost; T > 0: softmax sampling. */
  temperature?: number;
  /** Cost in predicted ms (see `TimeCost`); null (default): Dynamo's cost in blocks. */
  timeCost?: TimeCost | null;
  /** Random source for tie-breaks and sampling (default `Math.random`). */
  random?: RandomSource;
}

/** @internal `SelectorConfig` with every default filled in and checked. */
export interface ResolvedSelectorConfig {
  blockSize: number;
  overlapScoreCredit: number;
  overlapCreditDecay: number;
  hostCacheHitWeight: number;
  diskCacheHitWeight: number;
  prefillLoadScale: number;
  decodeActiveRequestWeight: number;
  overlapBonus: number;
  temperature: number;
  timeCost: TimeCost | null;
  random: RandomSource;
}

/** The request as the selector sees it. */
export interface SelectionRequest {
  /** Prompt length in tokens (isl). */
  tokens: number;
  overrides?: RouteOverrides | null;
}

/** A decision, with what it was based on (for logs). */
export interface Selection {
  workerId: bigint;
  dpRank: number;
  /** Index of the chosen candidate. */
  index: number;
  /** Device overlap of the chosen worker, in blocks. */
  overlapBlocks: number;
  /** ceil(tokens / blockSize). */
  requiredBlocks: number;
  /** Cost of every candidate, in candidate order. */
  costs: Float64Array;
  /** Device overlap of every candidate, in candidate order. */
  overlaps: Uint32Array;
}

const invalidOption = (message: string): never => {
  throw new KvIndexError(ErrorCode.InvalidOption, message);
};
const invalidField = (message: string): never => {
  throw new KvIndexError(ErrorCode.InvalidField, message);
};

/**
 * Bound of the unbounded weights and of the temperature: far beyond any useful setting, and low
 * enough that a cost, a sum of loads (token counts) times weights, stays finite. A
 * `prefill_load_scale` of 1e308 made every cost Infinity, which the decision's JSON cannot carry.
 */
export const MAX_WEIGHT = 1e6;

function nonNegative(name: string, v: number | undefined, fallback: number, max = MAX_WEIGHT): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > max) {
    invalidOption(`${name}: expected a finite number in 0..${max}, got ${showValue(v)}`);
  }
  return v;
}

/** @internal Fills Dynamo's defaults; throws `KvIndexError` `InvalidOption` naming the first bad field. */
export function resolveSelectorConfig(c: SelectorConfig): ResolvedSelectorConfig {
  if (typeof c !== 'object' || c === null) invalidOption('selector config: expected an object');
  if (!Number.isInteger(c.blockSize) || c.blockSize < 1) invalidOption(`blockSize: expected a positive integer, got ${String(c.blockSize)}`);
  if (c.random !== undefined && typeof c.random !== 'function') invalidOption('random: expected a function returning [0, 1)');
  return {
    blockSize: c.blockSize,
    overlapScoreCredit: nonNegative('overlapScoreCredit', c.overlapScoreCredit, 1, 1),
    overlapCreditDecay: nonNegative('overlapCreditDecay', c.overlapCreditDecay, 0),
    hostCacheHitWeight: nonNegative('hostCacheHitWeight', c.hostCacheHitWeight, 0.75),
    diskCacheHitWeight: nonNegative('diskCacheHitWeight', c.diskCacheHitWeight, 0.25),
    prefillLoadScale: nonNegative('prefillLoadScale', c.prefillLoadScale, 1),
    decodeActiveRequestWeight: nonNegative('decodeActiveRequestWeight', c.decodeActiveRequestWeight, 0),
    overlapBonus: nonNegative('overlapBonus', c.overlapBonus, 0),
    temperature: nonNegative('temperature', c.temperature, 0),
    timeCost: resolveTimeCost(c.timeCost),
    random: c.random ?? Math.random,
  };
}

function resolveTimeCost(t: TimeCost | null | undefined): TimeCost | null {
  if (t === undefined || t === null) return null;
  if (typeof t !== 'object') return invalidOption('timeCost: expected an object or null');
  for (const k of ['prefillTokensPerMs', 'tokenBudget', 'decodeStepMs', 'decodeMsPerBlock'] as const) {
    if (t[k] === undefined) invalidOption(`timeCost.${k}: required`);
  }
  const rate = nonNegative('timeCost.prefillTokensPerMs', t.prefillTokensPerMs, 0);
  if (!(rate > 0)) invalidOption(`timeCost.prefillTokensPerMs: expected a number > 0, got ${showValue(t.prefillTokensPerMs)}`);
  if (!Number.isInteger(t.tokenBudget) || t.tokenBudget < 1 || t.tokenBudget > 2 ** 24) invalidOption(`timeCost.tokenBudget: expected an integer in 1..${2 ** 24}, got ${showValue(t.tokenBudget)}`);
  return Object.freeze({
    prefillTokensPerMs: rate,
    tokenBudget: t.tokenBudget,
    decodeStepMs: nonNegative('timeCost.decodeStepMs', t.decodeStepMs, 0),
    decodeMsPerBlock: nonNegative('timeCost.decodeMsPerBlock', t.decodeMsPerBlock, 0),
  });
}

/**
 * Picks a worker for a request (see the file comment for the cost). `loads[i]` belongs to
 * `candidates[i]` (missing: idle). `overlap` is the indexer's per-worker scores, or the tiers.
 * Throws `KvIndexError`: `NoWorkers` for no candidate, `InvalidField` for a malformed
 * candidate, load or token count, `InvalidOption` for a bad config or override.
 */
export function selectWorker(
  request: SelectionRequest,
  candidates: readonly WorkerCandidate[],
  overlap: ReadonlyMap<bigint, number> | TieredOverlap,
  loads: readonly (CandidateLoad | undefined)[],
  config: SelectorConfig,
): Selection {
  return selectResolved(request, candidates, overlap, loads, resolveSelectorConfig(config));
}

/** @internal `selectWorker` with a config already resolved (the router resolves it once). */
export function selectResolved(
  request: SelectionRequest,
  candidates: readonly WorkerCandidate[],
  overlap: ReadonlyMap<bigint, number> | TieredOverlap,
  loads: readonly (CandidateLoad | undefined)[],
  c: ResolvedSelectorConfig,
): Selection {
  if (!Array.isArray(candidates)) invalidField('candidates: expected an array');
  const n = candidates.length;
  if (n === 0) throw new KvIndexError(ErrorCode.NoWorkers, 'selectWorker: no candidate workers');
  const tokens = request.tokens;
  if (!Number.isSafeInteger(tokens) || tokens < 0) invalidField(`tokens: expected an integer >= 0, got ${String(tokens)}`);
  const o = request.overrides ?? null;
  if (o !== null && (typeof o !== 'object' || Array.isArray(o))) invalidOption('overrides: expected an object or null');
  // Named as the library and as the wire (HTTP and NATS bodies) call them.
  const credit = nonNegative('overrides.overlapScoreCredit (overlap_score_credit)', o?.overlapScoreCredit, c.overlapScoreCredit, 1);
  const scale = nonNegative('overrides.prefillLoadScale (prefill_load_scale)', o?.prefillLoadScale, c.prefillLoadScale);
  const temperature = nonNegative('overrides.temperature (router_temperature)', o?.temperature, c.temperature);
  const tiers: TieredOverlap = isTiered(overlap) ? overlap : { device: overlap };
  const bs = c.blockSize;
  const requiredBlocks = Math.ceil(tokens / bs);
  const promptBlocks = tokens / bs;

  const prefill = new Float64Array(n);
  let minPrefill = Infinity;
  for (let i = 0; i < n; i++) {
    checkCandidate(candidates[i], i);
    const p = loads[i]?.activePrefillTokens ?? 0;
    checkLoad(i, 'activePrefillTokens', p);
    prefill[i] = p;
    if (p < minPrefill) minPrefill = p;
  }

  const costs = new Float64Array(n);
  const overlaps = new Uint32Array(n);
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < n; i++) {
    const id = candidates[i]!.workerId;
    const load = loads[i];
    const decode = load?.decodeBlocks ?? 0;
    const active = load?.activeRequests ?? 0;
    checkLoad(i, 'decodeBlocks', decode);
    checkLoad(i, 'activeRequests', active);
    const device = tiers.device.get(id) ?? 0;
    overlaps[i] = device;
    const decay = c.overlapCreditDecay === 0 || requiredBlocks === 0
      ? 1
      : 1 / (1 + (c.overlapCreditDecay * ((prefill[i]! - minPrefill) / bs)) / requiredBlocks);
    const overlapCredit = credit * decay * device
      + c.hostCacheHitWeight * (tiers.host?.get(id) ?? 0)
      + c.diskCacheHitWeight * (tiers.disk?.get(id) ?? 0);
    const raw = prefill[i]! / bs + promptBlocks;
    const prefillBlocks = Math.max(raw - overlapCredit, 0);
    const t = c.timeCost;
    const cost = t === null
      ? scale * prefillBlocks + decode + c.decodeActiveRequestWeight * active - c.overlapBonus * device
      : timeCostMs(t, prefillBlocks * bs, active > 0 ? decode : 0) + c.decodeActiveRequestWeight * active - c.overlapBonus * device;
    costs[i] = cost;
    if (cost < min) min = cost;
    if (cost > max) max = cost;
  }

  const index = temperature === 0 ? minimumCost(costs, min, c.random) : softmaxSample(costs, min, max, temperature, c.random);
  const chosen = candidates[index]!;
  return { workerId: chosen.workerId, dpRank: chosen.dpRank, index, overlapBlocks: overlaps[index]!, requiredBlocks, costs, overlaps };
}

/** Predicted ms to the first token: `tokens` of prefill in budget-sized steps, each with the decode of `blocks` (0: none). */
function timeCostMs(t: TimeCost, tokens: number, blocks: number): number {
  const steps = Math.max(1, Math.ceil(tokens / t.tokenBudget));
  return tokens / t.prefillTokensPerMs + (blocks > 0 ? steps * (t.decodeStepMs + t.decodeMsPerBlock * blocks) : 0);
}

/** @internal Throws `InvalidField` unless `c` is a { u64 bigint workerId, u32 dpRank }. */
export function checkCandidate(c: unknown, i: number): asserts c is WorkerCandidate {
  const cand = c as WorkerCandidate;
  if (typeof c !== 'object' || c === null || typeof cand.workerId !== 'bigint' || cand.workerId < 0n || cand.workerId > 0xffff_ffff_ffff_ffffn) {
    invalidField(`candidates[${i}].workerId: expected a u64 bigint`);
  }
  if (!Number.isInteger(cand.dpRank) || cand.dpRank < 0 || cand.dpRank > 0xffff_ffff) invalidField(`candidates[${i}].dpRank: expected a u32, got ${String(cand.dpRank)}`);
}

function isTiered(o: ReadonlyMap<bigint, number> | TieredOverlap): o is TieredOverlap {
  return typeof (o as { get?: unknown }).get !== 'function';
}

function checkLoad(i: number, field: string, v: number): void {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) invalidField(`loads[${i}].${field}: expected a finite number >= 0, got ${showValue(v)}`);
}

/** The minimum, ties uniformly: the k-th tie replaces the pick with probability 1/k. */
function minimumCost(costs: Float64Array, min: number, random: RandomSource): number {
  let pick = -1;
  let ties = 0;
  for (let i = 0; i < costs.length; i++) {
    if (costs[i] !== min) continue;
    ties++;
    if (ties === 1 || random() * ties < 1) pick = i;
  }
  return pick;
}

/** A draw from p_i ∝ exp(-(c_i - min) / ((max - min) T)), by cumulative sum; last on rounding. */
function softmaxSample(costs: Float64Array, min: number, max: number, t: number, random: RandomSource): number {
  const n = costs.length;
  const range = max - min;
  if (range === 0) return Math.min(n - 1, Math.floor(random() * n));
  const w = new Float64Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    w[i] = Math.exp(-(costs[i]! - min) / (range * t));
    sum += w[i]!;
  }
  let r = random() * sum;
  for (let i = 0; i < n; i++) {
    r -= w[i]!;
    if (r < 0) return i;
  }
  return n - 1;
}
