/**
 * Worker ids as bigints, keyed by their (lo, hi) words, for the workers a Map-returning lookup
 * through shards lists in bulk (a prompt held by many: large member sets hold id words, not slots;
 * score-list.ts): each takes its id from here instead of a new bigint per worker per lookup.
 * Converting made the 2-shard `findMatchesSync` ~0.1 us slower per lookup on the conversation
 * tree when every match went through here (mean 0.98 against 0.84-0.90 us with cached ids, in
 * a probe). Direct-mapped: an entry a colliding id replaces is made again when next asked for,
 * so a fleet larger than the table costs bigints, never a wrong id.
 */
import { u64FromHalves } from '../../protocol/u64-text.js';

const SIZE = 4096;

export class IdCache {
  private readonly lo = new Uint32Array(SIZE);
  private readonly hi = new Uint32Array(SIZE);
  private readonly ids: Array<bigint | undefined> = new Array<bigint | undefined>(SIZE).fill(undefined);

  /** The id whose words are (lo, hi), as a bigint. */
  get(lo: number, hi: number): bigint {
    const i = (Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b) >>> 16) & (SIZE - 1);
    const id = this.ids[i];
    if (id !== undefined && this.lo[i] === lo && this.hi[i] === hi) return id;
    const made = u64FromHalves(hi, lo);
    this.ids[i] = made;
    this.lo[i] = lo;
    this.hi[i] = hi;
    return made;
  }
}
