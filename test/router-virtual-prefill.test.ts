/**
 * KvRouter's `prefillTokensPerMs`: each candidate's queued prefill drains at the engine's speed
 * from the moment it was routed (a virtual queue), capped by Dynamo's accounting (the tokens of
 * its requests still before their first token).
 */
import { describe, expect, it } from 'vitest';
import { KvRouter } from '../src/router/kv-router.js';
import { seededRandom } from '../src/router/random.js';
import { RadixTree } from '../src/tree/radix-tree.js';

const BS = 4;
const A = 0xa000_0000_0000_0001n;
const B = 0xb000_0000_0000_0002n;
const workers = [{ workerId: A, dpRank: 0 }, { workerId: B, dpRank: 0 }];
const tokens = (base: number, n: number): Uint32Array => Uint32Array.from({ length: n }, (_, i) => base + i);

function router(clock: { t: number }, prefillTokensPerMs?: number): KvRouter {
  return new KvRouter({
    indexer: new RadixTree(), blockSize: BS, workers, random: seededRandom(1), now: () => clock.t,
    ...(prefillTokensPerMs === undefined ? {} : { prefillTokensPerMs }),
  });
}

describe('KvRouter prefillTokensPerMs', () => {
  it('without it, a routed prompt loads its worker in full until its first token', () => {
    const clock = { t: 0 };
    const r = router(clock);
    const first = r.route(tokens(0, 400), { candidates: [workers[0]!] });
    expect(first.workerId).toBe(A);
    clock.t = 1000;
    const d = r.route(tokens(5000, 40));
    // A: 400 queued + 40 tokens = 110 blocks of prefill plus 10 decode blocks... B is idle.
    expect(d.costs[0]).toBeGreaterThan(d.costs[1]! + 99);
    expect(d.workerId).toBe(B);
  });

  it('with it, the queued prompt drains at that speed: after 40 ms at 10 tokens/ms nothing is left', () => {
    const clock = { t: 0 };
    const r = router(clock, 10);
    r.route(tokens(0, 400), { candidates: [workers[0]!] });
    clock.t = 20; // half drained: 200 tokens = 50 blocks left
    const half = r.route(tokens(5000, 40), { requestId: 'half', candidates: [workers[0]!, workers[1]!] });
    const idle = half.costs[1]!;
    expect(half.costs[0]! - idle).toBeCloseTo(50 + 100, 9); // 50 queued prefill blocks + A's 100 decode blocks
    r.free('half');
    clock.t = 40;
    const drained = r.route(tokens(9000, 40), { requestId: 'drained' });
    expect(drained.costs[0]! - drained.costs[1]!).toBeCloseTo(100, 9); // only A's decode blocks remain
  });

  it('never counts more than the requests before their first token', () => {
    const clock = { t: 0 };
    const r = router(clock, 0.001); // far slower than the engine really is
    r.route(tokens(0, 400), { requestId: 'big', candidates: [workers[0]!] });
    r.markPrefillCompleted('big');
    const d = r.route(tokens(5000, 40));
    expect(d.costs[0]! - d.costs[1]!).toBeCloseTo(100, 9); // its prefill is done: decode blocks only
  });

  it('refuses a negative or non-finite speed', () => {
    expect(() => router({ t: 0 }, -1)).toThrow(/prefillTokensPerMs/);
    expect(() => router({ t: 0 }, Number.POSITIVE_INFINITY)).toThrow(/prefillTokensPerMs/);
  });
});
