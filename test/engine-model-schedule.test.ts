import { describe, expect, it } from 'vitest';
import { EngineModel, type EngineRequest, type StepOutcome } from '../src/trace/engine-model.js';
import { resolveEngineParams, stepMs } from '../src/trace/engine-params.js';

// Round numbers: 1 ms per prefill token, 10 ms per decode part, 100-token steps, 10-token blocks.
// The mocker's pass timing (engine-params.ts): prefill, then one decode part for every request
// that samples a token at the step's end, a prompt's first token included.
const round = { tokenBudget: 100, prefillA: 0, prefillB: 1, prefillC: 0, decodeA: 0, decodeB: 0, decodeC: 10 };
const params = resolveEngineParams('dynamo-mocker', round);

/** A request whose blocks are named by small integers (the hash words are (name, 0)). */
function request(id: number, blocks: number[], inputTokens: number, outputTokens: number): EngineRequest {
  const seq = new Uint32Array(blocks.length * 2);
  blocks.forEach((b, i) => { seq[2 * i] = b; });
  return { id, seq, blocks: blocks.length, inputTokens, outputTokens };
}

/** Runs the engine from `t` until idle; returns every step's outcome. */
function drain(e: EngineModel, t: number): StepOutcome[] {
  const steps: StepOutcome[] = [];
  for (let end = e.begin(t); end >= 0; end = e.begin(end)) steps.push(e.end());
  return steps;
}

describe('EngineModel schedules', () => {
  it('one request: 25 ms of prefill and a 10 ms decode part give the first token, then one 10 ms step per token', () => {
    const e = new EngineModel(params, { kvBlocks: 100, blockSize: 10 });
    e.enqueue(request(1, [11, 12], 25, 3));
    const steps = drain(e, 0);
    expect(steps.map((s) => s.endMs)).toEqual([35, 45, 55]);
    expect(steps[0]!.firstTokens).toEqual([1]);
    expect(steps[0]!.stored.map((s) => s.from)).toEqual([0]);
    expect(steps[2]!.finished).toEqual([1]);
    expect(e.kv.cached).toBe(2); // its two full blocks stay cached, unpinned
    expect(e.kv.busy).toBe(0);
  });

  it('two sharing a prefix: the second prefills only its uncached tokens and stores nothing new', () => {
    const e = new EngineModel(params, { kvBlocks: 100, blockSize: 10 });
    e.enqueue(request(1, [11, 12], 25, 1));
    expect(drain(e, 0).map((s) => s.endMs)).toEqual([35]);
    e.enqueue(request(2, [11, 12, 13], 35, 1));
    const steps = drain(e, 100);
    // 2 blocks (20 tokens) cached: 15 tokens to prefill (+ 10 ms for its first token), one new
    // block stored from index 2.
    expect(steps.map((s) => s.endMs)).toEqual([125]);
    expect(steps[0]!.stored.map((s) => s.from)).toEqual([2]);
    expect(e.timing.get(2)!.cachedTokens).toBe(20);
    e.enqueue(request(3, [11, 12], 20, 1));
    // Fully cached: the last token is recomputed for its logits, 1 ms, and sampled, 10 ms.
    expect(drain(e, 200).map((s) => s.endMs)).toEqual([211]);
  });

  it('a full pool: the second request waits for the first to end, then evicts its leaf', () => {
    const e = new EngineModel(params, { kvBlocks: 5, blockSize: 10 });
    e.enqueue(request(1, [11, 12, 13], 30, 10)); // 4 blocks reserved: 3 prompt + 1 output
    e.enqueue(request(2, [21, 22], 20, 1)); // 3 blocks reserved: does not fit beside the first
    const first = e.begin(0);
    expect(first).toBe(40);
    expect(e.running).toBe(1);
    expect(e.waiting).toBe(1);
    e.end();
    const steps = drain(e, 40);
    // 9 decode steps of 10 ms end the first at 130; the second is admitted then, prefills 20
    // and samples its first token: 160.
    const second = steps.find((s) => s.firstTokens.includes(2))!;
    expect(second.endMs).toBe(160);
    expect(e.timing.get(2)!.admittedMs).toBe(130);
    // 3 cached + 3 reserved > 5: one block evicted, the first request's leaf (13).
    expect(e.kv.match(new Uint32Array([11, 0, 12, 0, 13, 0]), 3)).toBe(2);
  });

  it('a request the pool cannot hold is rejected, and the next one runs', () => {
    const e = new EngineModel(params, { kvBlocks: 3, blockSize: 10 });
    e.enqueue(request(1, [11, 12, 13, 14], 40, 1));
    e.enqueue(request(2, [21], 10, 1));
    expect(e.begin(0)).toBe(20);
    expect(e.rejected).toEqual([1]);
    expect(e.end().firstTokens).toEqual([2]);
  });

  it('chunked prefill: 250 tokens over 100-token steps take steps of 100, 100 and 50 + 10 ms', () => {
    const e = new EngineModel(params, { kvBlocks: 100, blockSize: 10 });
    e.enqueue(request(1, [1, 2, 3, 4, 5], 250, 1));
    const steps = drain(e, 0);
    expect(steps.map((s) => s.prefillTokens)).toEqual([100, 100, 50]);
    // Only the chunk that completes the prompt samples a token (the decode part).
    expect(steps.map((s) => s.endMs)).toEqual([100, 200, 260]);
    expect(steps[2]!.firstTokens).toEqual([1]);
    expect(steps[0]!.firstTokens).toEqual([]); // no token before the prompt is done
  });

  it('a decode step and a prefill chunk share one step, and the step costs the sum (the mocker)', () => {
    const e = new EngineModel(params, { kvBlocks: 100, blockSize: 10 });
    e.enqueue(request(1, [1], 10, 3));
    expect(e.begin(0)).toBe(20);
    e.end();
    e.enqueue(request(2, [2, 3], 20, 1));
    // Request 2 prefills 20 tokens (20 ms), then one decode part (10 ms) samples request 1's
    // next token and request 2's first: not one per request, not the larger of the two.
    expect(e.begin(20)).toBe(50);
    const out = e.end();
    expect(out.decoders).toBe(1);
    expect(out.prefillTokens).toBe(20);
    expect(out.firstTokens).toEqual([2]);
  });

  it('dynamo-mocker-decoders, the earlier rule: no decode part for a first token alone', () => {
    const e = new EngineModel(resolveEngineParams('dynamo-mocker-decoders', round), { kvBlocks: 100, blockSize: 10 });
    e.enqueue(request(1, [11, 12], 25, 3));
    expect(drain(e, 0).map((s) => s.endMs)).toEqual([25, 35, 45]);
    e.enqueue(request(2, [21], 10, 2));
    e.enqueue(request(3, [31, 32, 33], 250, 1));
    // 2: 10 tokens; 3: a 90-token chunk: 100 ms, no decoder yet. Then 2 decodes (one token of
    // the budget) beside 3's next 99 tokens: 109; then 3's last 61 tokens alone: 61 (its first
    // token adds nothing).
    expect(drain(e, 100).map((s) => s.endMs)).toEqual([200, 309, 370]);
  });

  it('u is the pool share the running requests hold (the mocker), or the decoders\' contexts (decoders set)', () => {
    // Decode part = 100 * u ms (floor 1): u counts a prompt still prefilling under the mocker's rule.
    const slope = { ...round, decodeC: 0, decodeB: 100 };
    const run = (set: string): number[] => {
      const e = new EngineModel(resolveEngineParams(set, slope), { kvBlocks: 100, blockSize: 10 });
      e.enqueue(request(1, [1], 10, 2)); // 1 block of prompt, 2 output tokens: 2 blocks reserved
      e.enqueue(request(2, [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21], 200, 1));
      return drain(e, 0).map((s) => s.endMs);
    };
    // Mocker: step 1 prefills 10 + 90 tokens, request 1's first token: u = (1 + 20) / 100 blocks
    // (2's whole prompt from admission; the output room reserved ahead not counted): 100 + 21.
    // Step 2: 1 decodes (its 11 tokens: 2 blocks), 2 prefills 99: 121 + 99 + 22 = 242. Step 3:
    // 2's last 11 tokens and its first token, 1 done: 242 + 11 + 20 = 273.
    expect(run('dynamo-mocker')).toEqual([121, 242, 273]);
    // Decoders set: step 1 has no decoder (0 ms of decode); step 2: 1's context, 11 tokens of
    // 1,000: 1.1 ms; step 3: no decoder.
    const old = run('dynamo-mocker-decoders');
    expect(old[0]).toBe(100);
    expect(old[1]).toBeCloseTo(200.1, 9);
    expect(old[2]).toBeCloseTo(211.1, 9);
  });

  it('the default step time is the mocker polynomial: 8,192 prefill tokens take 169 ms', () => {
    const p = resolveEngineParams();
    expect(stepMs(p, 8192, 0, 0)).toBeCloseTo(4.209989e-7 * 8192 ** 2 + 1.518344e-2 * 8192 + 16.50142, 9);
    expect(Math.round(stepMs(p, 8192, 0, 0))).toBe(169);
    expect(stepMs(p, 0, 1, 0)).toBeCloseTo(5.74, 9);
    expect(() => resolveEngineParams('nope')).toThrow(/unknown set/);
    expect(() => resolveEngineParams('dynamo-mocker', { tokenBudget: 0 })).toThrow(/tokenBudget/);
    expect(() => resolveEngineParams('dynamo-mocker', { bogus: 1 })).toThrow(/unknown field/);
    expect(() => resolveEngineParams('dynamo-mocker', { firstTokenDecode: 2 })).toThrow(/firstTokenDecode/);
    expect(resolveEngineParams().firstTokenDecode).toBe(1);
    expect(resolveEngineParams().decodeKvActive).toBe(1);
  });
});
