/**
 * The timed replay's reference tools of issue 39: the `oracle` policy (reads the engines' true
 * state, routes each request where its own first token is predicted soonest) against choices
 * computed by hand from the `dynamo-mocker` step times, and `burstOrder`.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import type { TraceRequest } from '../src/trace/mooncake.js';
import { runTimedSim } from '../src/trace/timed-sim.js';

/** A request of `ids` 512-token trace blocks (ids from `from`), `at` ms. */
function req(line: number, at: number, ids: number[], outputLength = 1): TraceRequest {
  return { timestamp: at, inputLength: ids.length * 512, outputLength, hashIds: BigUint64Array.from(ids.map(BigInt)), line };
}
const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

describe('oracle reference policy', () => {
  it('takes the step under way, the queue, the cache and its own prefill into account (hand-computed)', () => {
    // prefillMs(P) = 4.209989e-7 P^2 + 0.01518344 P + 16.50142: 8,192 tokens 169.1 ms,
    // 4,608 95.4, 4,096 85.8, 1,024 32.5, 512 24.4.
    const doc = range(1, 24); // 12,288 tokens
    const trace = [
      req(1, 0, doc), // r0 -> X (both idle: a seeded tie); prefills 0-169.1, 169.1-254.9, stores doc
      // r1 at 100: X is 69.1 ms from the end of its first step with 4,096 tokens left:
      // 69.1 + prefill(4,096 + 1,024 = 5,120: 105.3) = 174.4 on X, against 32.5 on idle Y -> Y.
      req(2, 100, range(1000, 2)),
      // r2 at 400: doc cached on X: prefill(512) = 24.4 on X, against 169.1 + 95.4 = 264.5 on Y -> X.
      req(3, 400, [...doc, 2000]),
      // r3 at 400, behind r2: X's step (r2's last 512 tokens) ends at 424.4: 24.4 + 24.4 = 48.8
      // on X, against 264.5 on Y -> X, the busy engine.
      req(4, 400, [...doc, 2001]),
      // r4 at 400: 8,192 new tokens: 24.4 + prefill(512 queued (r3, net of the cache) + 8,192 in
      // two steps: 169.1 + 24.4) = 217.9 on X, against 169.1 on Y -> Y.
      req(5, 400, range(3000, 16)),
      // r5 at 410: X's step ends at 424.4 with r3's 512 queued: 14.4 + prefill(1,536: 40.8) = 55.2;
      // Y's step (r4's 8,192) ends at 569.1: 159.1 + 32.5 = 191.6 -> X. Without the wait for the
      // step under way it would be 40.8 against 32.5 -> Y.
      req(6, 410, range(4000, 2)),
    ];
    for (const seed of [1n, 2n, 3n]) {
      const w = Array.from(runTimedSim(trace, { policy: 'oracle', workers: 2, seed }).requests.worker);
      const x = w[0]!;
      const y = 1 - x;
      expect(w).toEqual([x, y, x, x, y, x]);
    }
  });

  it('is not a routing policy of --policy all, but is accepted by name', async () => {
    const { POLICY_NAMES, isPolicyName } = await import('../src/trace/policies/policy.js');
    expect(POLICY_NAMES as readonly string[]).not.toContain('oracle');
    expect(isPolicyName('oracle')).toBe(true);
  });
});

describe('burstOrder', () => {
  // Four requests sharing one timestamp; round-robin gives engines 0, 1, 2, 3 in dispatch order.
  const burst = [req(1, 0, range(1, 1)), req(2, 0, range(100, 4)), req(3, 0, range(200, 2)), req(4, 0, range(300, 8)), req(5, 10, range(400, 1))];

  it('arrival (the default) dispatches in the trace order', () => {
    expect(Array.from(runTimedSim(burst, { policy: 'round-robin' }).requests.worker)).toEqual([0, 1, 2, 3, 0]);
    expect(Array.from(runTimedSim(burst, { policy: 'round-robin', burstOrder: 'arrival' }).requests.worker)).toEqual([0, 1, 2, 3, 0]);
  });

  it('longest-first dispatches a burst longest prompt first, and never moves a later arrival ahead', () => {
    const r = runTimedSim(burst, { policy: 'round-robin', burstOrder: 'longest-first' });
    // 4,096 tokens -> 0, 2,048 -> 1, 1,024 -> 2, 512 -> 3; the request 10 ms later stays last.
    expect(Array.from(r.requests.worker)).toEqual([3, 1, 2, 0, 0]);
    expect(r.requests.arrivalMs[4]).toBe(10);
  });

  it('refuses an unknown order with a typed error', () => {
    let err: unknown;
    try {
      runTimedSim(burst, { policy: 'kv', burstOrder: 'shortest-first' as 'arrival' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KvIndexError);
    expect((err as KvIndexError).code).toBe(ErrorCode.InvalidOption);
  });
});
