/**
 * Parameters of a simulated engine (engine-model.ts): its scheduler limits and the time one
 * batching step takes, as named parameter sets with their sources, overridable field by field
 * (`--engine-param name=value`, or a JSON file of the same fields).
 *
 * Step time, in ms of simulated time, for a step that prefills `P` tokens and decodes one
 * token for each of `D` running requests whose contexts hold `K` tokens in total:
 *
 *   stepMs = (P > 0 ? prefillA * P^2 + prefillB * P + prefillC : 0)
 *          + (D > 0 ? max(decodeMinMs, decodeA * u^2 + decodeB * u + decodeC) : 0)
 *   u      = K / (kvBlocks * blockSize)        (the share of the KV pool the decoders read)
 *
 * The two polynomials are Dynamo's mocker defaults (`PerfModel::Polynomial`: prefill time
 * quadratic in the step's new tokens, decode time quadratic in the active KV fraction); a step
 * with both adds them (a mixed step is slower than either alone; the mocker times the two
 * phases separately, so the sum is this model's choice, not Dynamo's).
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
});

/**
 * The named sets. `dynamo-mocker` (the default): the scheduler limits of Dynamo's mocker
 * (`MockEngineArgs`: max_num_seqs 256, max_num_batched_tokens 8,192, 16,384 blocks of 64
 * tokens; docs.nvidia.com/dynamo reference/api/python/mocker) and its default timing polynomials
 * (crate dynamo-mocker 1.0.2, src/common/perf_model.rs, `PerfModel::Polynomial`): a full
 * 8,192-token prefill step takes 169 ms (48k tokens/s), a decode step 5.7 ms on an empty pool
 * and 34 ms on a full one. `small-budget`: the same timing with vLLM's 2,048-token budget of
 * older releases, which chunks long prompts four times finer.
 */
export const ENGINE_PARAM_SETS: readonly EngineParamSet[] = [
  {
    name: 'dynamo-mocker',
    source: 'Dynamo mocker defaults: MockEngineArgs (max_num_seqs 256, max_num_batched_tokens 8192) and PerfModel::Polynomial (dynamo-mocker 1.0.2, src/common/perf_model.rs)',
    params: DYNAMO_MOCKER,
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

/** Time of the decode part of a step whose decoders hold `kvFraction` of the pool, ms (0 without decoders). */
export function decodeMs(p: EngineParams, decoders: number, kvFraction: number): number {
  if (decoders <= 0) return 0;
  const u = Math.min(1, Math.max(0, kvFraction));
  return Math.max(p.decodeMinMs, p.decodeA * u * u + p.decodeB * u + p.decodeC);
}

/** A step's time, ms (see the file comment). */
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
