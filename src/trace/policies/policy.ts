/**
 * What a routing policy of the timed replay (timed-sim.ts) sees and does. A policy sees only
 * what a router sees: the index fed by the engines' KV events (late, as a real router gets
 * them), its own record of the requests it routed (first token seen, end seen), and, for
 * policies whose router scrapes engine metrics (llm-d), the last scrape. Never the engines'
 * queues or caches themselves.
 */
import type { TimeCost } from '../../router/select-worker.js';
import type { RadixTree } from '../../tree/radix-tree.js';
import type { EngineBacklog } from '../engine-model.js';
import type { EngineParams } from '../engine-params.js';

/** The routing policies `kvindex replay --policy` compares (`--policy all`). */
export const POLICY_NAMES = ['kv', 'dynamo', 'kv-time', 'round-robin', 'random', 'least-loaded', 'sglang', 'llm-d'] as const;
/**
 * Reference policies, by name only (never in `all`): `oracle` reads the engines' true state,
 * which no router sees (policies/oracle.ts), to measure what information would be worth.
 */
export const REFERENCE_POLICY_NAMES = ['oracle'] as const;
/** A policy's name. */
export type PolicyName = (typeof POLICY_NAMES)[number] | (typeof REFERENCE_POLICY_NAMES)[number];

/** Whether `name` is a policy name (a routing policy or a reference). */
export function isPolicyName(name: string): name is PolicyName {
  return (POLICY_NAMES as readonly string[]).includes(name) || (REFERENCE_POLICY_NAMES as readonly string[]).includes(name);
}

/** A request as the router receives it. */
export interface PolicyRequest {
  /** Unique id of the request. */
  id: string;
  /** Block hashes of its prompt (full blocks), as the router computes them. */
  local: BigUint64Array;
  /** Prompt length, tokens. */
  tokens: number;
  /** Output length the client asked for (the trace's), tokens. */
  outputTokens: number;
}

/** An engine's metrics as a router scrapes them (vLLM's /metrics gauges). */
export interface ScrapedMetrics {
  /** Requests waiting for admission (vllm:num_requests_waiting). */
  waiting: number;
  /** Requests running (vllm:num_requests_running). */
  running: number;
  /** Share of the KV pool in use, 0..1 (vllm:kv_cache_usage_perc). */
  kvUsage: number;
}

/** What a policy is built from. */
export interface PolicyContext {
  /** The router's index, fed by the engines' KV events after the event delay. */
  index: RadixTree;
  /** Worker ids, by engine index. */
  workerIds: readonly bigint[];
  /** Tokens per block. */
  blockSize: number;
  /** Seed of the policy's random draws. */
  seed: number;
  /** Simulated time, ms. */
  now: () => number;
  /**
   * The engines' prefill speed, tokens per ms, as an operator profiles it (a full-budget
   * prefill step's tokens over its time): what a router may be configured with.
   */
  prefillTokensPerMs: number;
  /** The engines' profile for a cost in predicted ms (`engineProfile`: what an operator measures). */
  profile: TimeCost;
  /** The last scrape of engine `w`'s metrics. */
  metrics: (w: number) => ScrapedMetrics;
  /** The engines' true state: read by the `oracle` reference policy only, never by a router. */
  oracle: OracleView;
}

/** What the `oracle` reference policy reads of the engines (policies/oracle.ts). */
export interface OracleView {
  /** The engines' parameters. */
  params: EngineParams;
  /** KV pool per engine, blocks. */
  kvBlocks: number;
  /** Engine `w`'s backlog now. */
  backlog: (w: number) => EngineBacklog;
  /** Leading blocks of a prompt (sequence hashes as (lo, hi) words, `blocks` of them) in engine `w`'s cache now. */
  cachedBlocks: (w: number, seq: Uint32Array, blocks: number) => number;
}

/** A routing policy: picks an engine per request and hears the request's first token and end. */
export interface RoutingPolicy {
  /**
   * The engine index for `request`, among `allowed` engine indexes when given (a router-side
   * queue's dispatch: timed-sim.ts `routerQueue`; only policies with `queuedPrefill` get it).
   */
  choose(request: PolicyRequest, allowed?: readonly number[]): number;
  /**
   * Prefill tokens the policy's router counts as queued on engine `w` now (its own in-flight
   * view, never the engine's): what a router-side queue dispatches on. Null for policies
   * without such a view.
   */
  readonly queuedPrefill: ((w: number) => number) | null;
  /** The request's first token reached the router. */
  firstToken(id: string): void;
  /** The request's last token reached the router. */
  finished(id: string): void;
}
