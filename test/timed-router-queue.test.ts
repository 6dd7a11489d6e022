/**
 * The timed replay's router-side queue with late binding (`routerQueue`, issue 39's fourth
 * round): held requests are dispatched only while some engine's queued prefill, as the
 * policy's router counts it, is under the threshold, and the engine is chosen at dispatch.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import type { TraceRequest } from '../src/trace/mooncake.js';
import { runTimedSim } from '../src/trace/timed-sim.js';

/** A request of `ids` 512-token trace blocks, `at` ms. */
function req(line: number, at: number, ids: number[], outputLength = 4): TraceRequest {
  return { timestamp: at, inputLength: ids.length * 512, outputLength, hashIds: BigUint64Array.from(ids.map(BigInt)), line };
}
const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);
// Eight distinct 4,096-token prompts at once, then two later ones.
const burst = [...range(0, 8).map((i) => req(i + 1, 0, range(1000 * (i + 1), 8))), req(9, 50, range(20_000, 2)), req(10, 900, range(30_000, 2))];

describe('routerQueue', () => {
  it('changes nothing when no engine ever queues as much as the threshold', () => {
    const plain = runTimedSim(burst, { policy: 'kv', seed: 3n });
    const queued = runTimedSim(burst, { policy: 'kv', seed: 3n, routerQueue: { thresholdTokens: 1e9 } });
    expect(Array.from(queued.requests.worker)).toEqual(Array.from(plain.requests.worker));
    expect(Array.from(queued.requests.firstTokenMs)).toEqual(Array.from(plain.requests.firstTokenMs));
  });

  it('holds a burst at the router until an engine it counts as empty exists, then binds it there', () => {
    // Threshold 1 token with restrict: an engine takes a request only when the router counts
    // nothing queued on it. The first four spread over the four engines at 0; the other four
    // wait at the router (not in an engine queue) until a first token or the virtual queue
    // (48.5 tokens/ms: 4,096 tokens drain in ~85 ms) frees an engine.
    const r = runTimedSim(burst, { policy: 'kv', seed: 3n, routerQueue: { thresholdTokens: 1, restrict: true } });
    const q = r.requests;
    expect(new Set(Array.from(q.worker.subarray(0, 4))).size).toBe(4);
    for (let i = 0; i < 4; i++) expect(q.admittedMs[i]).toBe(0);
    for (let i = 4; i < 8; i++) expect(q.admittedMs[i]!).toBeGreaterThan(50);
    // Every request completes, and TTFT still counts from the arrival at the router.
    for (let i = 0; i < burst.length; i++) expect(Number.isFinite(q.finishMs[i]!)).toBe(true);
    expect(q.arrivalMs[4]).toBe(0);
  });

  it('is deterministic', () => {
    const a = runTimedSim(burst, { policy: 'kv', seed: 5n, routerQueue: { thresholdTokens: 4096 } });
    const b = runTimedSim(burst, { policy: 'kv', seed: 5n, routerQueue: { thresholdTokens: 4096 } });
    expect(Array.from(a.requests.firstTokenMs)).toEqual(Array.from(b.requests.firstTokenMs));
  });

  it('refuses a policy without a queued-prefill view and a bad threshold, with typed errors', () => {
    for (const bad of [
      () => runTimedSim(burst, { policy: 'round-robin', routerQueue: { thresholdTokens: 4096 } }),
      () => runTimedSim(burst, { policy: 'kv', routerQueue: { thresholdTokens: -1 } }),
      () => runTimedSim(burst, { policy: 'kv', routerQueue: { thresholdTokens: 8, tickMs: 0 } }),
    ]) {
      let err: unknown;
      try {
        bad();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(KvIndexError);
      expect((err as KvIndexError).code).toBe(ErrorCode.InvalidOption);
    }
  });
});
