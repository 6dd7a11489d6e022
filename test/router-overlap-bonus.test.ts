import { describe, expect, it } from 'vitest';
import { selectWorker } from '../src/router/select-worker.js';

const A = { workerId: 1n, dpRank: 0 };
const B = { workerId: 2n, dpRank: 0 };

describe('selectWorker overlapBonus', () => {
  // A holds 4 of the prompt's 8 blocks but has 8 blocks of prefill queued: the prefill term is
  // 12 on both (A: 8 + 8 - 4, B: 0 + 8 + 4 queued), B's decode blocks are fewer.
  const loads = [
    { activePrefillTokens: 8 * 16, decodeBlocks: 20, activeRequests: 1 },
    { activePrefillTokens: 4 * 16, decodeBlocks: 10, activeRequests: 1 },
  ];
  const overlap = new Map([[1n, 4]]);

  it('is off by default: Dynamo\'s cost picks the worker with fewer decode blocks', () => {
    const s = selectWorker({ tokens: 8 * 16 }, [A, B], overlap, loads, { blockSize: 16 });
    expect(s.workerId).toBe(2n);
    expect(Array.from(s.costs)).toEqual([32, 22]);
  });

  it('takes bonus x overlap off the cost, outside the prefill term', () => {
    const s = selectWorker({ tokens: 8 * 16 }, [A, B], overlap, loads, { blockSize: 16, overlapBonus: 3 });
    expect(Array.from(s.costs)).toEqual([20, 22]);
    expect(s.workerId).toBe(1n);
  });

  it('is checked like the other weights', () => {
    expect(() => selectWorker({ tokens: 16 }, [A], overlap, [], { blockSize: 16, overlapBonus: -1 })).toThrow(/overlapBonus/);
    expect(() => selectWorker({ tokens: 16 }, [A], overlap, [], { blockSize: 16, overlapBonus: Number.NaN })).toThrow(/overlapBonus/);
  });
});
