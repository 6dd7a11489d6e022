/**
 * Parameters of a simulated engine (engine-model.ts): its scheduler limits and the time one
 * batching step takes, as named parameter sets with their sources, overridable field by field
 * (`--engine-param name=value`, or a JSON file of the same fields).
 *
 * Step time, in ms of simulated time, for a step that prefills `P` tokens and has `D` ready
 * requests (requests that sample a token at its end):
 *
 *   stepMs = (P > 0 ? prefillA * P^2 + prefillB * P + prefillC : 0)
 *          + (D > 0 ? max(decodeMinMs, decodeA * u^2 + decodeB * u + decodeC) : 0)
 *
 * This is how Dynamo's mocker times one forward pass of its vLLM scheduler: the prefill time of
 * the pass's new tokens, then the decode time, one after the other (ai-dynamo/dynamo
 * lib/mocker/src/scheduler/vllm/core.rs, `execute_pass_internal`: decode starts at
 * now + prefill, the pass ends at decode start + decode; the older lib/mocker/src/scheduler.rs
 * awaits `simulate_prefill` then `simulate_decode`). So a mixed step costs the sum; it is the
 * mocker's model, not a choice of this one. Which requests are ready and what `u` is:
 * - `firstTokenDecode` 1 (the mocker): a request whose prefill completes in the step is ready
 *   too (the mocker samples its first token in the pass's decode phase), so a step that
 *   completes a prompt pays the decode part even with no other decoder; 0: only requests past
 *   their first token are;
 * - `decodeKvActive` 1 (the mocker): `u` is the share of the KV pool held by the running
 *   requests (the mocker's `num_active_blocks * block_size / (num_gpu_blocks * block_size)`:
 *   prompts from admission, generated tokens, a shared cached block once; not the output room
 *   this engine reserves ahead); 0: the decoders' contexts (prompt plus generated tokens) over
 *   the pool.
 * Set `dynamo-mocker-decoders` keeps both at 0: this model before it was checked against the
 * mocker's source (docs/replay-timed.md, "The mixed step").
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import type { TimeCost } from '../router/select-worker.js';
import { showValue } from '../protocol/show-value.js';

/** Everything the engine model needs; every field is a finite number. */
export interface EngineParams {
  /** Tokens a step may schedule (prefill chunks plus one per decoding request). */
  tokenBudget: number;
  /** Requests running at once. */
  maxRunning: number;
  /** Prefill polynomial, ms: a * P^2 + b * P + c for a step that prefills P tokens. */
  prefillA: number;
  prefillB: number;
  prefillC: number;
  /** Decode polynomial, ms, in the fraction u of the KV pool held by the decoders' contexts. */
  decodeA: number;
  decodeB: number;
  decodeC: number;
  /** Floor of a decode step, ms (two tokens never share a timestamp). */
  decodeMinMs: number;
  /** 1: a step that completes a prefill pays the decode part (the mocker); 0: only with decoders. */
  firstTokenDecode: number;
  /** 1: the decode polynomial's u is the pool share the running requests hold (the mocker); 0: the decoders' contexts. */
  decodeKvActive: number;
}

/** A named parameter set and where its numbers come from. */
export interface EngineParamSet {
  name: string;
  source: string;
  params: EngineParams;
}

/** Dynamo mocker's defaults and timing polynomials (the `dynamo-mocker` set). */
const DYNAMO_MOCKER = Object.freeze({
  tokenBudget: 8192,
  maxRunning: 256,
  prefillA: 4.209989e-7,
  prefillB: 1.518344e-2,
  prefillC: 16.50142,
  decodeA: -25.74,
  decodeB: 54.01,
  decodeC: 5.74,
  decodeMinMs: 1,
  firstTokenDecode: 1,
  decodeKvActive: 1,
});

/**
 * The named sets. `dynamo-mocker` (the default): the scheduler limits of Dynamo's mocker
 * (`MockEngineArgs`: max_num_seqs 256, max_num_batched_tokens 8,192, 16,384 blocks of 64
 * tokens; docs.nvidia.com/dynamo reference/api/python/mocker) and its default timing polynomials
 * (crate dynamo-mocker 1.0.2, src/common/perf_model.rs, `PerfModel::Polynomial`): a full
 * 8,192-token prefill step takes 169 ms (48k tokens/s), a decode step 5.7 ms on an empty pool
 * and 34 ms on a full one; a pass lasts prefill plus decode, a prompt's completing step
 * included (vllm/core.rs `execute_pass_internal` and `emit_ready_tokens`).
 * `dynamo-mocker-decoders`: the same numbers with this model's earlier step rule (decode part
 * only with decoders, u from their contexts). `small-budget`: the `dynamo-mocker` timing with
 * vLLM's 2,048-token budget of older releases, which chunks long prompts four times finer.
 */
export const ENGINE_PARAM_SETS: readonly EngineParamSet[] = [
  {
    name: 'dynamo-mocker',
    source: 'Dynamo mocker defaults: MockEngineArgs (max_num_seqs 256, max_num_batched_tokens 8192), PerfModel::Polynomial (dynamo-mocker 1.0.2, src/common/perf_model.rs) and its pass timing (lib/mocker/src/scheduler/vllm/core.rs: prefill then decode, every ready request, u = active blocks / pool)',
    params: DYNAMO_MOCKER,
  },
  {
    name: 'dynamo-mocker-decoders',
    source: 'dynamo-mocker as kvindex read it before checking the mocker source: the decode part only with decoders, u from the decoders\' contexts',
    params: { ...DYNAMO_MOCKER, firstTokenDecode: 0, decodeKvActive: 0 },
  },
  {
    name: 'small-budget',
    source: 'dynamo-mocker timing with a 2,048-token step budget (vLLM max_num_batched_tokens of its V0 chunked-prefill default)',
    params: { ...DYNAMO_MOCKER, tokenBudget: 2048 },
  },
];

/** The default set's name. */
export const DEFAULT_ENGINE_PARAMS = 'dynamo-mocker';

const invalid = (message: string): never => {
  throw new KvIndexError(ErrorCode.InvalidOption, message);
};

const FIELDS = Object.keys(ENGINE_PARAM_SETS[0]!.params) as Array<keyof EngineParams>;

/**
 * The parameters of set `name` with `overrides` applied (unknown fields, non-numbers and
 * out-of-range values throw `KvIndexError` `InvalidOption` naming the field).
 */
export function resolveEngineParams(name: string = DEFAULT_ENGINE_PARAMS, overrides: Readonly<Record<string, unknown>> = {}): EngineParams {
  const set = ENGINE_PARAM_SETS.find((s) => s.name === name);
  if (set === undefined) return invalid(`engine params: unknown set '${name}' (known: ${ENGINE_PARAM_SETS.map((s) => s.name).join(', ')})`);
  const p: EngineParams = { ...set.params };
  for (const [key, value] of Object.entries(overrides)) {
    if (!(FIELDS as string[]).includes(key)) invalid(`engine params: unknown field '${key}' (known: ${FIELDS.join(', ')})`);
    if (typeof value !== 'number' || !Number.isFinite(value)) invalid(`engine params: ${key}: expected a finite number, got ${showValue(value)}`);
    p[key as keyof EngineParams] = value as number;
  }
  const int = (k: 'tokenBudget' | 'maxRunning'): void => {
    if (!Number.isInteger(p[k]) || p[k] < 1 || p[k] > 2 ** 24) invalid(`engine params: ${k}: expected an integer in 1..${2 ** 24}, got ${showValue(p[k])}`);
  };
  int('tokenBudget');
  int('maxRunning');
  for (const k of ['firstTokenDecode', 'decodeKvActive'] as const) {
    if (p[k] !== 0 && p[k] !== 1) invalid(`engine params: ${k}: expected 0 or 1, got ${showValue(p[k])}`);
  }
  if (p.decodeMinMs <= 0) invalid(`engine params: decodeMinMs: expected a number > 0, got ${showValue(p.decodeMinMs)}`);
  // A step must take time, or the event loop would never advance: both polynomials must stay
  // positive over their whole domain (P in 1..budget, u in 0..1).
  if (prefillMs(p, 1) <= 0 || prefillMs(p, p.tokenBudget) <= 0) invalid('engine params: the prefill polynomial must be positive for 1..tokenBudget tokens');
  return p;
}

/** Time of the prefill part of a step of `tokens` new tokens, ms (0 for none). */
export function prefillMs(p: EngineParams, tokens: number): number {
  if (tokens <= 0) return 0;
  return p.prefillA * tokens * tokens + p.prefillB * tokens + p.prefillC;
}

/** Time of the decode part of a step with `decoders` ready requests and pool share `kvFraction` (its u), ms (0 without any). */
export function decodeMs(p: EngineParams, decoders: number, kvFraction: number): number {
  if (decoders <= 0) return 0;
  const u = Math.min(1, Math.max(0, kvFraction));
  return Math.max(p.decodeMinMs, p.decodeA * u * u + p.decodeB * u + p.decodeC);
}

/** A step's time, ms, with `decoders` ready requests and u = `kvFraction` (see the file comment). */
export function stepMs(p: EngineParams, prefillTokens: number, decoders: number, kvFraction: number): number {
  return prefillMs(p, prefillTokens) + decodeMs(p, decoders, kvFraction);
}

/**
 * The engine profile a router's `timeCost` (select-worker.ts) takes, as an operator would
 * measure it on these engines: the prefill speed of a full-budget step, the budget, the decode
 * step on an empty pool and its growth per block held, the secant of the decode polynomial over
 * the first half of a `kvBlocks` pool (where a fleet at load 0.8 runs). `dynamo-mocker` with
 * 16,384 blocks: 48.5 tokens/ms, 8,192, 5.74 ms, 0.0025 ms per block.
 */
export function engineProfile(p: EngineParams, kvBlocks: number): TimeCost {
  const empty = decodeMs(p, 1, 0);
  return {
    prefillTokensPerMs: p.tokenBudget / prefillMs(p, p.tokenBudget),
    tokenBudget: p.tokenBudget,
    decodeStepMs: empty,
    decodeMsPerBlock: Math.max(0, (decodeMs(p, 1, 0.5) - empty) / (0.5 * kvBlocks)),
  };
}
