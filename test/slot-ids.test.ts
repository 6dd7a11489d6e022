/**
 * A shard reader's per-slot bigint ids (Map lookups through shards): an entry answers only for
 * the id words it was made from, so a slot reused by another worker is a miss, not a wrong id.
 */
import { describe, expect, it } from 'vitest';
import { SlotIds } from '../src/shard/main/slot-ids.js';

describe('SlotIds', () => {
  it('answers with the id made for a slot only while its words are the same', () => {
    const ids = new SlotIds();
    expect(ids.cached(3, 7, 9)).toBeUndefined();
    const id = ids.make(3, 7, 9);
    expect(id).toBe((9n << 32n) | 7n);
    expect(ids.cached(3, 7, 9)).toBe(id);
    expect(ids.cached(3, 8, 9)).toBeUndefined(); // another worker in the slot
    expect(ids.cached(3, 7, 10)).toBeUndefined();
    expect(ids.cached(4, 7, 9)).toBeUndefined(); // never made for that slot
    expect(ids.make(3, 0xffff_ffff, 0xffff_ffff)).toBe(0xffff_ffff_ffff_ffffn);
    expect(ids.cached(3, 7, 9)).toBeUndefined();
  });

  it('grows to slots beyond its first capacity and keeps the earlier ones', () => {
    const ids = new SlotIds();
    for (let s = 0; s < 1000; s += 7) ids.make(s, s, s + 1);
    for (let s = 0; s < 1000; s++) {
      const want = s % 7 === 0 ? (BigInt(s + 1) << 32n) | BigInt(s) : undefined;
      expect(ids.cached(s, s, s + 1)).toBe(want);
    }
    expect(ids.cached(5000, 0, 0)).toBeUndefined();
  });
});
