/**
 * The matches of a Map-returning lookup through shards, gathered shard by shard on the calling
 * thread (tree-reader.ts `lookupScores`) and turned into the Map only after every shard's lock
 * was released: an allocation, and the collection it may start, never stalls a shard's writer.
 *
 * Each match is its worker's id as a bigint (`keys`) and its score (`vals`). A worker visited by
 * the walk takes its id from its shard's slot cache (slot-ids.ts) under the lock; a slot the cache
 * cannot answer for is listed as pending, with the id words read under the lock, and its bigint
 * is made after the release. Workers listed in bulk (a prompt held by many: member-sets.ts) are
 * copied as id words (`bulk`) and take their ids from `IdCache`.
 *
 * Against the previous gathering (every shard's matches written as id words into one scratch
 * result, then every id taken from `IdCache`): the 2-shard Map lookup on hot data, conversation
 * tree, 0.64 -> 0.47-0.49 us (mean of 300k, both builds in the same host phase, 2-core dev VM).
 * Under the lock it only stores references and numbers; its arrays grow there only when a
 * lookup lists more workers than any before.
 */
import type { OverlapScores } from '../../protocol/types.js';
import { MatchResult } from '../../tree/match-result.js';
import { IdCache } from './id-cache.js';

export class ScoreList {
  /** Matching workers' ids, at 0..count-1 (undefined only while pending). */
  keys: Array<bigint | undefined> = new Array<bigint | undefined>(64).fill(undefined);
  /** Their scores. */
  vals = new Int32Array(64);
  count = 0;
  /** Pending ids: their index in `keys`, shard slot and id words. */
  pendAt = new Int32Array(8);
  pendSlot = new Int32Array(8);
  pendLo = new Uint32Array(8);
  pendHi = new Uint32Array(8);
  pending = 0;
  /** The bulk listing of a walk, as id words and scores. */
  readonly bulk = new MatchResult(64);
  /** Bulk members' ids. */
  readonly ids = new IdCache();

  /** Starts a lookup. */
  clear(): void {
    this.count = 0;
  }

  /** Makes room for `n` entries (keeping those listed). */
  ensure(n: number): void {
    if (n <= this.vals.length) return;
    const cap = Math.max(n, this.vals.length * 2);
    const vals = new Int32Array(cap);
    vals.set(this.vals.subarray(0, this.count));
    this.vals = vals;
    while (this.keys.length < cap) this.keys.push(undefined);
  }

  /** Lists a pending id for entry `at`. */
  pend(at: number, slot: number, lo: number, hi: number): void {
    const p = this.pending;
    if (p === this.pendAt.length) {
      const grow = <T extends Int32Array | Uint32Array>(a: T, b: T): T => {
        b.set(a);
        return b;
      };
      this.pendAt = grow(this.pendAt, new Int32Array(2 * p));
      this.pendSlot = grow(this.pendSlot, new Int32Array(2 * p));
      this.pendLo = grow(this.pendLo, new Uint32Array(2 * p));
      this.pendHi = grow(this.pendHi, new Uint32Array(2 * p));
    }
    this.pendAt[p] = at;
    this.pendSlot[p] = slot;
    this.pendLo[p] = lo;
    this.pendHi[p] = hi;
    this.pending = p + 1;
    this.keys[at] = undefined;
  }

  /** Appends the `n` entries of the bulk listing, ids from the cache. */
  appendBulk(n: number): void {
    this.ensure(this.count + n);
    const idw = this.bulk.idWords;
    const sc = this.bulk.scores;
    const keys = this.keys;
    const vals = this.vals;
    let at = this.count;
    for (let i = 0; i < n; i++, at++) {
      keys[at] = this.ids.get(idw[2 * i]!, idw[2 * i + 1]!);
      vals[at] = sc[i]!;
    }
    this.count = at;
  }

  /** The lookup's result (every key resolved). */
  toScores(): OverlapScores {
    const scores = new Map<bigint, number>();
    const keys = this.keys;
    const vals = this.vals;
    for (let i = 0; i < this.count; i++) scores.set(keys[i]!, vals[i]!);
    return { scores, frequencies: [] };
  }
}
