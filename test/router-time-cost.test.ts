/**
 * The `kv-time` preset's cost in predicted ms (`timeCost`): the decode load of a candidate weighs
 * in proportion to the steps the prompt's prefill takes, so a short prompt goes to an engine that
 * only decodes rather than queue behind another prompt's prefill, where Dynamo's cost in blocks
 * counts every held block as much as a queued one.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import { ROUTING_PRESETS } from '../src/router/presets.js';
import { seededRandom } from '../src/router/random.js';
import { selectWorker, type CandidateLoad, type SelectorConfig } from '../src/router/select-worker.js';

const BS = 64;
const A = { workerId: 0xa1n, dpRank: 0 };
const B = { workerId: 0xb2n, dpRank: 0 };
// A decodes requests holding 5,000 blocks, nothing queued; B prefills a 1,000-token prompt.
const loads = (tokens: number): CandidateLoad[] => [
  { activePrefillTokens: 0, decodeBlocks: 5000 + tokens / BS, activeRequests: 20 },
  { activePrefillTokens: 1000, decodeBlocks: 16 + tokens / BS, activeRequests: 1 },
];
const pick = (preset: 'dynamo' | 'kv-time', tokens: number): number => {
  const config: SelectorConfig = { ...ROUTING_PRESETS[preset], blockSize: BS, random: seededRandom(3) };
  return selectWorker({ tokens }, [A, B], new Map(), loads(tokens), config).index;
};

describe('timeCost (kv-time)', () => {
  it('a 1,000-token prompt: kv-time takes the decoding engine A (one slower step), dynamo queues it behind B', () => {
    expect(pick('kv-time', 1000)).toBe(0);
    expect(pick('dynamo', 1000)).toBe(1);
  });

  it('a 100k-token prompt: 13 steps each slowed by A\'s decoders outweigh B\'s 1,000 queued tokens', () => {
    expect(pick('kv-time', 100_000)).toBe(1);
  });

  it('costs are the predicted ms: prefill at the profiled speed plus the decode of each step', () => {
    const t = { prefillTokensPerMs: 10, tokenBudget: 1000, decodeStepMs: 5, decodeMsPerBlock: 0.01 };
    const s = selectWorker({ tokens: 2500 }, [A, B], new Map(), [
      { activePrefillTokens: 0, decodeBlocks: 100, activeRequests: 2 },
      { activePrefillTokens: 500, decodeBlocks: 0, activeRequests: 0 },
    ], { blockSize: BS, timeCost: t });
    expect(s.costs[0]).toBeCloseTo(250 + 3 * (5 + 1), 9); // 2,500 tokens in 3 steps, each with 100 blocks of decode
    expect(s.costs[1]).toBeCloseTo(300, 9); // 3,000 tokens, no request in flight: no decode
  });

  it('refuses a profile with a missing or non-positive speed', () => {
    const bad = (timeCost: unknown): unknown => {
      try {
        selectWorker({ tokens: 10 }, [A], new Map(), [], { blockSize: BS, timeCost: timeCost as never });
        return null;
      } catch (e) {
        return e instanceof KvIndexError ? e.code : e;
      }
    };
    expect(bad({ tokenBudget: 8192, decodeStepMs: 1, decodeMsPerBlock: 0 })).toBe(ErrorCode.InvalidOption);
    expect(bad({ prefillTokensPerMs: 0, tokenBudget: 8192, decodeStepMs: 1, decodeMsPerBlock: 0 })).toBe(ErrorCode.InvalidOption);
    expect(bad(null)).toBeNull();
  });
});
