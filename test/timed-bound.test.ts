/**
 * The TTFT lower bound (timed-bound.ts): a request alone on an idle engine, a prefix another
 * request stored before it arrived, a prefix still being computed, and the bound never above
 * any policy's simulated TTFT.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { resolveEngineParams, prefillMs } from '../src/trace/engine-params.js';
import { readTraceFile, type TraceRequest } from '../src/trace/mooncake.js';
import { alonePrefillMs, ttftLowerBounds } from '../src/trace/timed-bound.js';
import { runTimedSim } from '../src/trace/timed-sim.js';

const p = resolveEngineParams();
const chain = (from: number, n: number): BigUint64Array => BigUint64Array.from({ length: n }, (_, i) => BigInt(from + i));

let trace: TraceRequest[] = [];
beforeAll(async () => {
  trace = (await readTraceFile('data/conversation_trace_head.jsonl', 150)).requests;
});

describe('TTFT lower bound', () => {
  it('a prompt alone: full-budget steps (two of 8,192 tokens for 16,384), within 1 % of the cheapest split', () => {
    expect(alonePrefillMs(p, 16_384)).toBeLessThanOrEqual(2 * prefillMs(p, 8192));
    expect(alonePrefillMs(p, 16_384)).toBeGreaterThan(0.99 * 2 * prefillMs(p, 8192));
    expect(alonePrefillMs(p, 100)).toBeCloseTo(prefillMs(p, 100), 9);
  });

  it('a prefix stored before the request arrives is free; one not stored yet is waited for or computed', () => {
    // Request 0: 64 blocks of 64 tokens. Request 1 shares 63 of them (a new last block).
    const seq = [chain(0, 64), BigUint64Array.from([...chain(0, 63), 999n])];
    const first = alonePrefillMs(p, 4096);
    const late = ttftLowerBounds(seq, [4096, 4096], [0, first + 1000], p, 64);
    expect(late[0]).toBeCloseTo(first, 9);
    expect(late[1]).toBeCloseTo(prefillMs(p, 64), 9); // only the last block
    // Arriving together, each could at best use the other's prefix after one step of it (the
    // bound does not know which the router serves first), then compute the rest.
    const together = ttftLowerBounds(seq, [4096, 4096], [0, 0], p, 64);
    expect(together[0]).toBeCloseTo(prefillMs(p, 1) + prefillMs(p, 64), 9);
    expect(together[1]).toBeCloseTo(together[0]! + prefillMs(p, 64), 9);
    // A later request holding the prefix counts from its arrival plus one step, never earlier.
    const after = ttftLowerBounds([seq[1]!, seq[0]!], [4096, 4096], [0, 10], p, 64);
    expect(after[0]).toBeCloseTo(Math.min(first, 10 + prefillMs(p, 1) + prefillMs(p, 64)), 9);
  });

  it('is never above the simulated TTFT of any request, under any policy', () => {
    const head = trace.slice(0, 80);
    for (const policy of ['kv', 'round-robin'] as const) {
      const r = runTimedSim(head, { policy, load: 0.8 });
      const q = r.requests;
      let tight = 0;
      for (let i = 0; i < head.length; i++) {
        const ttft = q.firstTokenMs[i]! - q.arrivalMs[i]!;
        expect(q.ttftBoundMs[i]!).toBeGreaterThan(0);
        expect(q.ttftBoundMs[i]!).toBeLessThanOrEqual(ttft + 1e-9);
        if (q.ttftBoundMs[i]! > 0.9 * ttft) tight++;
      }
      expect(tight).toBeGreaterThan(head.length / 20); // not vacuous: often within 10 %
    }
  });
});
