/**
 * Named routing costs for `KvRouter`: `dynamo`, Dynamo's `DefaultWorkerSelector` defaults (every
 * selector option at its default), and `kv`, kvindex's default, tuned on the timed replay
 * (`kvindex replay --policy`, docs/replay-timed.md). The gateway and the replay take them by
 * name; a library user spreads one into `new KvRouter({ ...ROUTING_PRESETS.kv, indexer, ... })`.
 *
 * `kv`, tuned on the first 2,000 requests of the Mooncake synthetic and conversation traces at
 * load 0.8 (4 engines with the timing of Dynamo's mocker):
 * - `prefillLoadScale: 30`: the prefill term (queued prefill plus this prompt's uncached
 *   blocks, what the first token waits for) outweighs the decode term (blocks held by running
 *   requests, which costs memory, not TTFT) 30 to 1; Dynamo weighs them 1 to 1, so a worker
 *   holding long decodes was avoided even when its prefill queue was empty. Synthetic TTFT p99
 *   1,772 -> 1,455 ms (scales 10 / 30 / 100: 1,490 / 1,455 / -; conversation 2,280 / 2,245 /
 *   2,293).
 * - `overlapBonus: 100` (3.3 prefill blocks per cached block): keeps a conversation where its
 *   prefix is cached even when the prefill term says another worker is as fast now; the next
 *   turn finds it there. Synthetic p99 1,455 -> 1,399 ms, cached tokens 9.8 % -> 13.1 % (bonus
 *   30 / 100 / 300: 1,447 / 1,399 / 1,448 ms).
 * Measured against `dynamo` on the six slices not tuned on, TTFT p99 is 4-15 % better, p90 11-27 %
 * and p50 8-63 % (docs/replay-timed.md).
 *
 * `kv-time`, a candidate kept as an option (not the default): the cost in predicted ms to the
 * first token (`timeCost`, select-worker.ts), where the decode load weighs in proportion to the
 * steps the prompt's prefill takes, plus `overlapBonus: 10` ms per cached block. It needs the
 * engines' profile (`DYNAMO_MOCKER_PROFILE` here; the replay passes its engines' own). On the
 * tuning slices its TTFT p99 was within 2 % of `kv` (synthetic 1,370 vs 1,366 ms, conversation
 * 2,170 vs 2,211; bonus 0 / 4.4 / 10 / 30 ms), on six held-out slices -0.3..+4.7 % (mean 1.1 %)
 * better, with throughput 0.3-0.6 % below `dynamo`'s on four slices of eight: not adopted
 * (BENCHMARKS.md, "Routing policies in time"). These numbers were measured with the replay
 * engine's earlier step rule (set `dynamo-mocker-decoders`); with the mocker's rule (the
 * default since docs/replay-timed.md's fourth round) `kv` gains 6.0 / 17.3 % over `dynamo` at
 * p99 on the tuning slices and 4.8-17.3 % held out, unretuned.
 */
import type { SelectorConfig, TimeCost } from './select-worker.js';

/**
 * The profile of Dynamo's mocker engines (replay's `dynamo-mocker` set, 16,384 blocks of 64
 * tokens; `engineProfile` in src/trace/engine-params.ts): 8,192 tokens per 169 ms step, a
 * 5.74 ms decode step growing 0.0025 ms per block held. Replace it with your engines' numbers.
 */
export const DYNAMO_MOCKER_PROFILE: Readonly<TimeCost> = Object.freeze({ prefillTokensPerMs: 48.43, tokenBudget: 8192, decodeStepMs: 5.74, decodeMsPerBlock: 0.0025 });

/** The selector options a preset sets (never the block size or the random source). */
export type RoutingCost = Omit<SelectorConfig, 'blockSize' | 'random'>;

/** Names of the presets, kvindex's default first. */
export const ROUTING_PRESET_NAMES = ['kv', 'dynamo', 'kv-time'] as const;
export type RoutingPresetName = (typeof ROUTING_PRESET_NAMES)[number];

/** The presets by name (frozen). */
export const ROUTING_PRESETS: Readonly<Record<RoutingPresetName, Readonly<RoutingCost>>> = Object.freeze({
  kv: Object.freeze({ prefillLoadScale: 30, overlapBonus: 100 }),
  dynamo: Object.freeze({}),
  'kv-time': Object.freeze({ timeCost: DYNAMO_MOCKER_PROFILE, overlapBonus: 10 }),
});

/** True when `name` names a preset. */
export function isRoutingPresetName(name: string): name is RoutingPresetName {
  return (ROUTING_PRESET_NAMES as readonly string[]).includes(name);
}
