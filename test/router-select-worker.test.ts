/**
 * selectWorker: Dynamo's 2026 cost with golden values worked by hand from the formula
 * (docs/routing.md), the selection rules (minimum with uniform ties; softmax frequencies over
 * many seeded draws), per-request overrides and the typed errors.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import { seededRandom } from '../src/router/random.js';
import { formatRouteDecision } from '../src/router/decision-json.js';
import type { RouteDecision } from '../src/router/kv-router.js';
import { MAX_WEIGHT, selectWorker, type CandidateLoad, type WorkerCandidate } from '../src/router/select-worker.js';

const W1 = 0x4000_0000_0000_0001n; // above 2^53: ids never pass through a number
const W2 = 0x4000_0000_0000_0002n;
const W3 = 0xffff_ffff_ffff_fffen;
const cands = (...ids: bigint[]): WorkerCandidate[] => ids.map((workerId) => ({ workerId, dpRank: 0 }));
const load = (activePrefillTokens: number, decodeBlocks: number, activeRequests = 0): CandidateLoad => ({ activePrefillTokens, decodeBlocks, activeRequests });
const costsOf = (s: { costs: Float64Array }): number[] => [...s.costs];

function errorOf(f: () => unknown): KvIndexError {
  try {
    f();
  } catch (err) {
    if (err instanceof KvIndexError) return err;
    throw err;
  }
  throw new Error('expected a KvIndexError');
}

describe('selectWorker: cost golden values', () => {
  it('idle workers: the overlap credit is the only difference (4 prompt blocks, overlap 3 vs 0)', () => {
    const s = selectWorker({ tokens: 64 }, cands(W1, W2), new Map([[W1, 3]]), [], { blockSize: 16 });
    expect(costsOf(s)).toEqual([1, 4]);
    expect(s.workerId).toBe(W1);
    expect(s.overlapBlocks).toBe(3);
    expect(s.requiredBlocks).toBe(4);
    expect([...s.overlaps]).toEqual([3, 0]);
  });

  it('load outweighs a full hit: prefill 4 + 4 - 4 + decode 10 = 14 against 4 + 2 = 6', () => {
    const s = selectWorker({ tokens: 64 }, cands(W1, W2), new Map([[W1, 4]]), [load(64, 10), load(0, 2)], { blockSize: 16 });
    expect(costsOf(s)).toEqual([14, 6]);
    expect(s.workerId).toBe(W2);
    expect(s.overlapBlocks).toBe(0);
  });

  it('partial blocks count as fractions, required blocks round up (100 tokens at block size 64)', () => {
    const s = selectWorker({ tokens: 100 }, cands(W1), new Map([[W1, 1]]), [], { blockSize: 64 });
    expect(s.costs[0]).toBeCloseTo(0.5625, 12);
    expect(s.requiredBlocks).toBe(2);
  });

  it('credit decay: a busier worker loses part of its credit, enough to flip the decision at decay 10', () => {
    // 160 tokens = 10 blocks; W1: 3 blocks of prefill in flight, overlap 8; W2 idle, no overlap.
    const args = [{ tokens: 160 }, cands(W1, W2), new Map([[W1, 8]]), [load(48, 0), load(0, 0)]] as const;
    const off = selectWorker(...args, { blockSize: 16 });
    expect(costsOf(off)).toEqual([5, 10]);
    expect(off.workerId).toBe(W1);
    // decay = 1 / (1 + 10 * 3 / 10) = 0.25: credit 2, cost 13 - 2 = 11.
    const on = selectWorker(...args, { blockSize: 16, overlapCreditDecay: 10 });
    expect(costsOf(on)).toEqual([11, 10]);
    expect(on.workerId).toBe(W2);
  });

  it('host and disk tiers credit 0.75 and 0.25 per block by default', () => {
    const overlap = { device: new Map([[W1, 2]]), host: new Map([[W2, 4]]), disk: new Map([[W3, 8]]) };
    const s = selectWorker({ tokens: 128 }, cands(W1, W2, W3), overlap, [], { blockSize: 16 });
    expect(costsOf(s)).toEqual([6, 5, 6]);
    expect(s.workerId).toBe(W2);
    expect(s.overlapBlocks).toBe(0); // the reported overlap is the device tier's
  });

  it('the prefill term never goes negative (host credit larger than the prompt)', () => {
    const s = selectWorker({ tokens: 64 }, cands(W1), { device: new Map(), host: new Map([[W1, 10]]) }, [load(0, 3)], { blockSize: 16 });
    expect(costsOf(s)).toEqual([3]);
  });

  it('active-request weight and prefill scale, and per-request overrides of scale and credit', () => {
    const config = { blockSize: 16, prefillLoadScale: 2, decodeActiveRequestWeight: 2 };
    const args = [cands(W1, W2), new Map([[W1, 4]]), [load(0, 0, 3), load(0, 0, 0)]] as const;
    const base = selectWorker({ tokens: 64 }, ...args, config);
    expect(costsOf(base)).toEqual([6, 8]);
    expect(base.workerId).toBe(W1);
    const scale1 = selectWorker({ tokens: 64, overrides: { prefillLoadScale: 1 } }, ...args, config);
    expect(costsOf(scale1)).toEqual([6, 4]);
    expect(scale1.workerId).toBe(W2);
    const noCredit = selectWorker({ tokens: 64, overrides: { overlapScoreCredit: 0 } }, ...args, config);
    expect(costsOf(noCredit)).toEqual([14, 8]);
    expect(noCredit.workerId).toBe(W2);
  });

  it("every DP rank of a worker gets the worker's overlap; loads stay per rank", () => {
    const c: WorkerCandidate[] = [{ workerId: W1, dpRank: 0 }, { workerId: W1, dpRank: 1 }, { workerId: W2, dpRank: 0 }];
    const s = selectWorker({ tokens: 64 }, c, new Map([[W1, 4]]), [load(0, 5), load(0, 1), load(0, 0)], { blockSize: 16 });
    expect(costsOf(s)).toEqual([5, 1, 4]);
    expect(s.workerId).toBe(W1);
    expect(s.dpRank).toBe(1);
  });
});

describe("selectWorker: Dynamo's selector cases (costs as loads, no prompt)", () => {
  const logits = (values: number[]): CandidateLoad[] => values.map((v) => load(0, v));

  it('a single candidate is chosen at every temperature', () => {
    for (const temperature of [0, 0.1, 1, 10]) {
      const s = selectWorker({ tokens: 0 }, cands(42n), new Map(), logits([0.5]), { blockSize: 16, temperature });
      expect(s.workerId).toBe(42n);
    }
  });

  it('temperature 0 picks the lowest of 5, 3, 7, 3.5', () => {
    const s = selectWorker({ tokens: 0 }, cands(1n, 2n, 3n, 4n), new Map(), logits([5, 3, 7, 3.5]), { blockSize: 16, random: seededRandom(1) });
    expect(s.workerId).toBe(2n);
  });

  it('temperature 0 with two minima picks only among them', () => {
    const random = seededRandom(7);
    const seen = new Set<bigint>();
    for (let i = 0; i < 200; i++) {
      seen.add(selectWorker({ tokens: 0 }, cands(1n, 2n, 3n), new Map(), logits([2, 1, 1]), { blockSize: 16, random }).workerId);
    }
    expect([...seen].sort()).toEqual([2n, 3n]);
  });
});

describe('selectWorker: sampling frequencies (seeded, 100,000 draws)', () => {
  const N = 100_000;
  // 5 standard deviations of a frequency around p over N draws: at most 0.0079 here.
  const bound = (p: number): number => 5 * Math.sqrt((p * (1 - p)) / N);

  function frequencies(values: number[], temperature: number, seed: number): number[] {
    const random = seededRandom(seed);
    const counts = new Array<number>(values.length).fill(0);
    const c = cands(...values.map((_, i) => BigInt(i + 1)));
    const l = values.map((v) => load(0, v));
    for (let i = 0; i < N; i++) counts[selectWorker({ tokens: 0 }, c, new Map(), l, { blockSize: 16, temperature, random }).index]!++;
    return counts.map((k) => k / N);
  }

  it('temperature 0: four tied minima are chosen uniformly, the next-best never', () => {
    const f = frequencies([3, 3, 3, 3, 3.001], 0, 11);
    for (let i = 0; i < 4; i++) expect(Math.abs(f[i]! - 0.25)).toBeLessThan(bound(0.25));
    expect(f[4]).toBe(0);
  });

  it('temperature 1: p ∝ exp(-(c - min) / (max - min)) for costs 0, 1, 2', () => {
    const w = [1, Math.exp(-0.5), Math.exp(-1)];
    const sum = w[0]! + w[1]! + w[2]!;
    const f = frequencies([0, 1, 2], 1, 12);
    for (let i = 0; i < 3; i++) expect(Math.abs(f[i]! - w[i]! / sum)).toBeLessThan(bound(w[i]! / sum));
  });

  it('temperature 0.1 concentrates on the minimum: exp(-5) relative weight for the middle cost', () => {
    const w = [1, Math.exp(-5), Math.exp(-10)];
    const sum = w[0]! + w[1]! + w[2]!;
    const f = frequencies([10, 11, 12], 0.1, 13);
    for (let i = 0; i < 3; i++) expect(Math.abs(f[i]! - w[i]! / sum)).toBeLessThan(bound(w[i]! / sum) + 1e-4);
  });

  it('temperature > 0 with all costs equal is uniform', () => {
    const f = frequencies([2, 2, 2], 0.5, 14);
    for (const x of f) expect(Math.abs(x - 1 / 3)).toBeLessThan(bound(1 / 3));
  });

  it('the same seed gives the same decisions; another seed does not', () => {
    const run = (seed: number): number[] => {
      const random = seededRandom(seed);
      const l = [load(0, 1), load(0, 2), load(0, 3), load(0, 1)];
      return Array.from({ length: 64 }, () => selectWorker({ tokens: 0 }, cands(1n, 2n, 3n, 4n), new Map(), l, { blockSize: 16, temperature: 2, random }).index);
    };
    expect(run(5)).toEqual(run(5));
    expect(run(5)).not.toEqual(run(6));
  });
});

describe('selectWorker: hostile input', () => {
  it('no candidates: KVX_NO_WORKERS', () => {
    expect(errorOf(() => selectWorker({ tokens: 16 }, [], new Map(), [], { blockSize: 16 })).code).toBe(ErrorCode.NoWorkers);
  });

  it('bad config and overrides: KVX_INVALID_OPTION naming the field', () => {
    const e1 = errorOf(() => selectWorker({ tokens: 16 }, cands(W1), new Map(), [], { blockSize: 0 }));
    expect(e1.code).toBe(ErrorCode.InvalidOption);
    expect(e1.message).toMatch(/blockSize/);
    const e2 = errorOf(() => selectWorker({ tokens: 16 }, cands(W1), new Map(), [], { blockSize: 16, overlapScoreCredit: 1.5 }));
    expect(e2.message).toMatch(/overlapScoreCredit/);
    const e3 = errorOf(() => selectWorker({ tokens: 16, overrides: { temperature: -1 } }, cands(W1), new Map(), [], { blockSize: 16 }));
    expect(e3.code).toBe(ErrorCode.InvalidOption);
    expect(e3.message).toMatch(/temperature/);
    expect(errorOf(() => selectWorker({ tokens: 16 }, cands(W1), new Map(), [], { blockSize: 16, temperature: NaN })).code).toBe(ErrorCode.InvalidOption);
    // Weights beyond MAX_WEIGHT: a prefill_load_scale of 1e308 made every cost Infinity.
    const e4 = errorOf(() => selectWorker({ tokens: 16, overrides: { prefillLoadScale: 1e308 } }, cands(W1), new Map(), [], { blockSize: 16 }));
    expect(e4.code).toBe(ErrorCode.InvalidOption);
    expect(e4.message).toMatch(/prefillLoadScale/);
    expect(errorOf(() => selectWorker({ tokens: 16 }, cands(W1), new Map(), [], { blockSize: 16, decodeActiveRequestWeight: MAX_WEIGHT * 2 })).code).toBe(ErrorCode.InvalidOption);
    expect(selectWorker({ tokens: 16, overrides: { prefillLoadScale: MAX_WEIGHT } }, cands(W1), new Map(), [], { blockSize: 16 }).workerId).toBe(W1);
  });

  it('a decision with costs that are not finite is still valid JSON', () => {
    const d: RouteDecision = {
      requestId: 'r', workerId: 18446744073709551615n, dpRank: 0, overlapBlocks: 0, requiredBlocks: 1,
      candidates: [{ workerId: 18446744073709551615n, dpRank: 0 }, { workerId: 2n, dpRank: 1 }, { workerId: 3n, dpRank: 0 }],
      costs: Float64Array.of(Infinity, -Infinity, NaN), overlaps: Uint32Array.of(0, 0, 0), elapsedUs: 0,
    } as unknown as RouteDecision;
    const parsed = JSON.parse(formatRouteDecision(d)) as { costs: unknown[]; worker_id: string };
    expect(parsed.costs).toEqual([Number.MAX_VALUE, -Number.MAX_VALUE, null]);
    expect(parsed.worker_id).toBe('18446744073709551615');
  });

  it('bad candidates, loads and token counts: KVX_INVALID_FIELD', () => {
    const bad = [{ workerId: 1 as unknown as bigint, dpRank: 0 }];
    expect(errorOf(() => selectWorker({ tokens: 16 }, bad, new Map(), [], { blockSize: 16 })).code).toBe(ErrorCode.InvalidField);
    expect(errorOf(() => selectWorker({ tokens: 16 }, [{ workerId: 1n << 64n, dpRank: 0 }], new Map(), [], { blockSize: 16 })).code).toBe(ErrorCode.InvalidField);
    expect(errorOf(() => selectWorker({ tokens: 16 }, [{ workerId: 1n, dpRank: -1 }], new Map(), [], { blockSize: 16 })).code).toBe(ErrorCode.InvalidField);
    expect(errorOf(() => selectWorker({ tokens: 16 }, cands(W1), new Map(), [load(-1, 0)], { blockSize: 16 })).code).toBe(ErrorCode.InvalidField);
    expect(errorOf(() => selectWorker({ tokens: 16 }, cands(W1), new Map(), [load(0, Infinity)], { blockSize: 16 })).code).toBe(ErrorCode.InvalidField);
    expect(errorOf(() => selectWorker({ tokens: 1.5 }, cands(W1), new Map(), [], { blockSize: 16 })).code).toBe(ErrorCode.InvalidField);
  });
});
