import { describe, expect, it, beforeAll } from 'vitest';
import { readTraceFile, type TraceRequest } from '../src/trace/mooncake.js';
import { runTimedSim, engineCapacity, type TimedResult } from '../src/trace/timed-sim.js';
import { POLICY_NAMES } from '../src/trace/policies/policy.js';
import { resolveEngineParams } from '../src/trace/engine-params.js';

let trace: TraceRequest[] = [];
beforeAll(async () => {
  trace = (await readTraceFile('data/conversation_trace_head.jsonl', 150)).requests;
});

function cachedFraction(r: TimedResult): number {
  let cached = 0;
  let input = 0;
  r.requests.cachedTokens.forEach((c, i) => {
    if (!Number.isNaN(c)) {
      cached += c;
      input += r.inputTokens[i]!;
    }
  });
  return cached / input;
}

describe('timed replay', () => {
  it('is deterministic: the same seed gives the same times, twice', () => {
    const a = runTimedSim(trace, { policy: 'kv', load: 0.8, seed: 7n });
    const b = runTimedSim(trace, { policy: 'kv', load: 0.8, seed: 7n });
    expect(Array.from(b.requests.firstTokenMs)).toEqual(Array.from(a.requests.firstTokenMs));
    expect(Array.from(b.requests.worker)).toEqual(Array.from(a.requests.worker));
    const c = runTimedSim(trace, { policy: 'random', load: 0.8, seed: 7n });
    const d = runTimedSim(trace, { policy: 'random', load: 0.8, seed: 8n });
    expect(Array.from(d.requests.worker)).not.toEqual(Array.from(c.requests.worker));
  });

  it.each(POLICY_NAMES)('%s serves every request of a small trace, in order of its events', (policy) => {
    const r = runTimedSim(trace, { policy, load: 0.8 });
    const n = trace.length;
    for (let i = 0; i < n; i++) {
      const q = r.requests;
      expect(q.worker[i]).toBeGreaterThanOrEqual(0);
      expect(q.worker[i]).toBeLessThan(4);
      expect(q.admittedMs[i]!).toBeGreaterThanOrEqual(q.arrivalMs[i]!);
      expect(q.firstTokenMs[i]!).toBeGreaterThan(q.admittedMs[i]!);
      expect(q.finishMs[i]!).toBeGreaterThanOrEqual(q.firstTokenMs[i]!);
      expect(q.cachedTokens[i]!).toBeLessThan(r.inputTokens[i]!);
    }
    expect(r.rejected).toBe(0);
    expect(r.events).toBeGreaterThan(0);
    if (policy === 'round-robin') expect(Array.from(r.requests.worker.subarray(0, 8))).toEqual([0, 1, 2, 3, 0, 1, 2, 3]);
  });

  it('cache-aware policies follow shared prefixes that blind ones scatter', () => {
    // 48 requests, 2 s apart: 4 documents of 8 trace blocks, each asked 12 times with a new question.
    const shared: TraceRequest[] = [];
    for (let i = 0; i < 48; i++) {
      const doc = i % 4;
      const ids = [...Array.from({ length: 8 }, (_, k) => BigInt(doc * 100 + k)), BigInt(10_000 + i)];
      shared.push({ timestamp: i * 2000, inputLength: 9 * 512, outputLength: 20, hashIds: BigUint64Array.from(ids), line: i + 1 });
    }
    const blind = cachedFraction(runTimedSim(shared, { policy: 'random' }));
    for (const policy of ['kv', 'dynamo', 'sglang', 'llm-d'] as const) {
      // Every request after its document's first (on its engine) finds 8 of its 9 blocks.
      expect(cachedFraction(runTimedSim(shared, { policy }))).toBeGreaterThan(Math.max(blind, 0.7));
    }
  });

  it('the router learns of stored blocks only through delivered events: a delay past the run hides every prefix', () => {
    const seen = runTimedSim(trace, { policy: 'sglang', load: 0.8, eventDelayMs: 0 });
    const blind = runTimedSim(trace, { policy: 'sglang', load: 0.8, eventDelayMs: 1e12 });
    expect(seen.events).toBeGreaterThan(0);
    // Without matches SGLang's policy falls back to the smallest tree: it never follows a prefix.
    expect(cachedFraction(blind)).toBeLessThan(cachedFraction(seen));
  });

  it('--load rescales arrivals: half the load spreads the same requests over twice the time', () => {
    const full = runTimedSim(trace, { policy: 'round-robin', load: 1 });
    const half = runTimedSim(trace, { policy: 'round-robin', load: 0.5 });
    const n = trace.length - 1;
    expect(half.requests.arrivalMs[n]! / full.requests.arrivalMs[n]!).toBeCloseTo(2, 9);
    const cap = engineCapacity([{ id: 0, seq: new Uint32Array(0), blocks: 0, inputTokens: 8192, outputTokens: 1 }], resolveEngineParams(), 16384, 64);
    // One step: the 8,192-token prefill, then the decode part that samples its first token, at
    // u = its 128 blocks of the 16,384-block pool (the mocker's pass, engine-params.ts).
    const u = 128 / 16384;
    expect(cap.makespanMs).toBeCloseTo(4.209989e-7 * 8192 ** 2 + 1.518344e-2 * 8192 + 16.50142 + (-25.74 * u * u + 54.01 * u + 5.74), 6);
  });

  it('--speed divides the trace timestamps', () => {
    const r = runTimedSim(trace, { policy: 'random', speed: 4 });
    const n = trace.length - 1;
    expect(r.requests.arrivalMs[n]).toBeCloseTo((trace[n]!.timestamp - trace[0]!.timestamp) / 4, 9);
  });
});
