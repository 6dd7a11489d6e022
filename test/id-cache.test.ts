/**
 * The bigint id cache of the Map-returning lookups through shards: a collision replaces an
 * entry, so more ids than the table holds must still each come back exact.
 */
import { describe, expect, it } from 'vitest';
import { IdCache } from '../src/shard/main/id-cache.js';

const words = (id: bigint): [number, number] => [Number(id & 0xffff_ffffn), Number(id >> 32n)];

describe('IdCache', () => {
  it('returns the exact id for every (lo, hi), more ids than entries, twice over', () => {
    const cache = new IdCache();
    const ids = Array.from({ length: 10_000 }, (_, i) => 0xfedc_ba98_0000_0000n + BigInt(i) * 0x1_0000_0001n);
    ids.push(0n, 0xffff_ffff_ffff_ffffn, 0x8000_0000n, 0x1_0000_0000n);
    for (let round = 0; round < 2; round++) {
      for (const id of ids) expect(cache.get(...words(id))).toBe(id);
    }
  });

  it('gives back the same bigint while its entry stays', () => {
    const cache = new IdCache();
    const a = cache.get(7, 9);
    expect(cache.get(7, 9)).toBe(a);
    expect(a).toBe((9n << 32n) | 7n);
  });
});
