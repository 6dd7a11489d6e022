/**
 * Member sets: the workers of a node held by two or more, in one contiguous array per node
 * (node-store.ts keeps a node's single worker inline). They replaced a linked record of 36 bytes
 * per (worker, node) pair (node, worker, hash, next, previous, count and fingerprint) plus, past
 * 64 workers, a second array of the members' ids: at 4,096 workers storing one 48-block prompt
 * those were 65 of the 79 bytes a pair cost (docs/layout.md, "Memory").
 *
 * Per set (`SET_WORDS` words of `sets`, shared: lookups read them): its worker count, the XOR of
 * its workers' slot keys (the 64-bit fingerprint walk.ts compares), the offset of its members in
 * the pool, and the offset of their id words in `mIds` (or NONE); private: its capacity and node.
 * Per member (a pool position): its worker slot (shared: lookups visit it), its external block
 * hash (8, private: the worker's lookup reads it back) and its set (4, private: the key the pair
 * index reads back). The id words (8 per member, shared) are kept only for sets of at least
 * `MEMBERS_FROM` workers, where a lookup copies them into its result in bulk (walk.ts `emit`):
 * at 4,096 workers that copy is what made a lookup ~2 us instead of ~50.
 *
 * A member's position is its pair reference (`~position`, node-store.ts), held by its worker's
 * lookup (worker-table.ts) and the pair index (pair-index.ts). Positions move: on removal the
 * set's last member takes the leaving one's place, and a set that outgrows its range moves to a
 * larger one (capacity 2, then 1.5x; grown in place when the positions after it are free). The
 * owner's `moved` hook repoints the worker's lookup; the pair index is repointed here. A set
 * that falls to one worker is dissolved: the node stores that worker inline again.
 */
import type { ArrayStore } from './array-store.js';
import { LOCAL_STORE } from './array-store.js';
import { PairIndex } from './pair-index.js';
import { RangePool } from './range-pool.js';

/** Words per set record: count, fingerprint low, high, member offset, id offset. */
export const SET_WORDS = 5;
/** Workers a set needs before it keeps its members' id words (for bulk copies). */
export const MEMBERS_FROM = 64;
/** Workers under which a set drops its id words (the gap avoids churn around the threshold). */
export const MEMBERS_UNDER = 32;
const NONE = -1;
const L = LOCAL_STORE;
/**
 * Growth of the pool arrays: 1.25x, as the node arrays (node-store.ts). With 1.5x the pool's
 * unused tail was up to a third of it on top of each set's own growth slack.
 */
const GROW = 1.25;

/** What the sets read of the node store: each slot's fingerprint key and id halves. */
export interface SetSource {
  keyLo: Uint32Array;
  keyHi: Uint32Array;
  slotLo: Uint32Array;
  slotHi: Uint32Array;
}

/** Called for each member whose position changed: its slot, its external hash, its old and new positions. */
export type MoveHook = (slot: number, lo: number, hi: number, from: number, to: number) => void;

export class MemberSets {
  /** Per set, `SET_WORDS` words (see above). Read by lookups. */
  sets: Int32Array;
  /** Per pool position: the member's worker slot, NONE when free. Read by lookups. */
  mSlot: Int32Array;
  /** Id words of the members of large sets, 2 per position of the id pool. Read by lookups. */
  mIds: Uint32Array;
  /** Per pool position: the member's external hash halves (private). */
  mLo: Uint32Array;
  mHi: Uint32Array;
  /** Per pool position: the member's set, NONE when free (private: the pair index's key). */
  mSet: Int32Array;
  private setNode: Int32Array;
  private setCap: Int32Array;
  private setTop = 0;
  private readonly freeSets: number[] = [];
  liveSets = 0;
  liveMembers = 0;
  /** (set, slot) -> position: membership in O(1). */
  readonly index: PairIndex;
  private readonly pool: RangePool;
  private readonly idPool: RangePool;
  /** Repoints a moved member's entry in its worker's lookup (set by the tree). */
  moved: MoveHook = () => {};

  constructor(private readonly store: ArrayStore, private readonly src: SetSource) {
    const sets = 16;
    const pool = 64;
    this.sets = store.int32(sets * SET_WORDS, 0);
    this.setNode = L.int32(sets, NONE);
    this.setCap = L.int32(sets, 0);
    this.mSlot = store.int32(pool, NONE);
    this.mLo = L.uint32(pool);
    this.mHi = L.uint32(pool);
    this.mSet = L.int32(pool, NONE);
    this.mIds = store.uint32(2 * MEMBERS_FROM);
    this.index = new PairIndex(this);
    this.pool = new RangePool((atLeast) => this.growPool(atLeast));
    this.idPool = new RangePool((atLeast) => {
      if (2 * atLeast > this.mIds.length) this.mIds = this.store.growUint32(this.mIds, 2 * Math.max(atLeast, Math.ceil(this.mIds.length * GROW / 2)));
    });
  }

  /** Bytes of the typed arrays (capacities). */
  get bytes(): number {
    const b = this.bytesBy;
    return b.records + b.pool + b.ids + b.index;
  }

  /**
   * Bytes by structure: set records (20 shared + 8 private per set), pool (16 per position:
   * slot, hash, set), id words of large sets, pair index.
   */
  get bytesBy(): { records: number; pool: number; ids: number; index: number } {
    return {
      records: this.sets.length * 4 + this.setNode.length * 8,
      pool: this.mSlot.length * 16,
      ids: this.mIds.length * 4,
      index: this.index.bytes,
    };
  }

  /** Pool positions handed out (live members, free ranges and growth slack of live sets). */
  get poolUsed(): number {
    return this.pool.top - this.pool.freePositions;
  }

  /** The node of set `set`. */
  nodeOfSet(set: number): number {
    return this.setNode[set]!;
  }

  /** The node of the member at `pos`. */
  nodeOf(pos: number): number {
    return this.setNode[this.mSet[pos]!]!;
  }

  /** Worker count of `set`. */
  count(set: number): number {
    return this.sets[set * SET_WORDS]!;
  }

  /** Where the members of `set` start in the pool. */
  offset(set: number): number {
    return this.sets[set * SET_WORDS + 3]!;
  }

  /** An empty set for `node` (its node word is the caller's to switch once members are in). */
  create(node: number): number {
    let set = this.freeSets.pop();
    if (set === undefined) {
      set = this.setTop++;
      if (set * SET_WORDS >= this.sets.length) {
        const cap = Math.ceil(this.setNode.length * 1.5);
        this.sets = this.store.growInt32(this.sets, cap * SET_WORDS, 0);
        this.setNode = L.growInt32(this.setNode, cap, NONE);
        this.setCap = L.growInt32(this.setCap, cap, 0);
      }
    }
    const off = this.pool.alloc(2);
    this.setNode[set] = node;
    this.setCap[set] = 2;
    const r = set * SET_WORDS;
    const s = this.sets;
    s[r] = 0;
    s[r + 1] = 0;
    s[r + 2] = 0;
    s[r + 3] = off;
    s[r + 4] = NONE;
    this.liveSets++;
    return set;
  }

  /**
   * Adds worker `slot` with external hash (lo, hi) to `set` (not a member yet); returns its
   * position. `hole`: the pair index's `hole` after a `find(set, slot)` that missed, or -1.
   */
  append(set: number, slot: number, lo: number, hi: number, hole = -1): number {
    const r = set * SET_WORDS;
    const cnt = this.sets[r]!;
    if (cnt === this.setCap[set]) this.growSet(set, cnt);
    const s = this.sets;
    const pos = s[r + 3]! + cnt;
    this.mSlot[pos] = slot;
    this.mLo[pos] = lo;
    this.mHi[pos] = hi;
    this.mSet[pos] = set;
    this.index.insert(pos, hole);
    const ids = s[r + 4]!;
    if (ids >= 0) {
      this.mIds[2 * (ids + cnt)] = this.src.slotLo[slot]!;
      this.mIds[2 * (ids + cnt) + 1] = this.src.slotHi[slot]!;
    }
    s[r + 1] = s[r + 1]! ^ this.src.keyLo[slot]!;
    s[r + 2] = s[r + 2]! ^ this.src.keyHi[slot]!;
    s[r] = cnt + 1;
    this.liveMembers++;
    if (ids < 0 && cnt + 1 >= MEMBERS_FROM) this.buildIds(set);
    return pos;
  }

  /**
   * Takes the member at `pos` out of its set (the set's last member takes its place); returns
   * the set's new count. A set left with one member is the caller's to `dissolve`.
   */
  remove(pos: number): number {
    const mSlot = this.mSlot;
    const set = this.mSet[pos]!;
    const r = set * SET_WORDS;
    const s = this.sets;
    const cnt = s[r]!;
    const off = s[r + 3]!;
    const ids = s[r + 4]!;
    const last = off + cnt - 1;
    const slot = mSlot[pos]!;
    this.index.remove(pos);
    if (pos !== last) {
      mSlot[pos] = mSlot[last]!;
      this.mLo[pos] = this.mLo[last]!;
      this.mHi[pos] = this.mHi[last]!;
      this.index.move(last, pos);
      if (ids >= 0) {
        const m = this.mIds;
        const to = 2 * (ids + pos - off);
        const from = 2 * (ids + cnt - 1);
        m[to] = m[from]!;
        m[to + 1] = m[from + 1]!;
      }
      this.moved(mSlot[pos]!, this.mLo[pos]! | 0, this.mHi[pos]! | 0, last, pos);
    }
    mSlot[last] = NONE;
    this.mSet[last] = NONE;
    s[r + 1] = s[r + 1]! ^ this.src.keyLo[slot]!;
    s[r + 2] = s[r + 2]! ^ this.src.keyHi[slot]!;
    s[r] = cnt - 1;
    this.liveMembers--;
    if (ids >= 0 && cnt - 1 < MEMBERS_UNDER) {
      this.idPool.free(ids, this.setCap[set]!);
      s[r + 4] = NONE;
    }
    return cnt - 1;
  }

  /** Frees `set` and its remaining members (their worker lookups are the caller's). */
  dissolve(set: number): void {
    const r = set * SET_WORDS;
    const s = this.sets;
    const cnt = s[r]!;
    const off = s[r + 3]!;
    for (let i = 0; i < cnt; i++) {
      this.index.remove(off + i);
      this.mSlot[off + i] = NONE;
      this.mSet[off + i] = NONE;
    }
    this.liveMembers -= cnt;
    this.pool.free(off, this.setCap[set]!);
    if (s[r + 4]! >= 0) this.idPool.free(s[r + 4]!, this.setCap[set]!);
    s[r] = 0;
    s[r + 1] = 0;
    s[r + 2] = 0;
    s[r + 3] = NONE;
    s[r + 4] = NONE;
    this.setNode[set] = NONE;
    this.setCap[set] = 0;
    this.freeSets.push(set);
    this.liveSets--;
  }

  /** Room for one more member of a full set of `cnt`: in place if the positions after it are free. */
  private growSet(set: number, cnt: number): void {
    const r = set * SET_WORDS;
    const cap = this.setCap[set]!;
    const next = Math.max(cap + 1, Math.ceil(cap * 1.5));
    const off = this.sets[r + 3]!;
    if (!this.pool.extend(off + cap, next - cap)) {
      const to = this.pool.alloc(next); // may grow the pool's arrays: read them after
      const { mSlot, mLo, mHi, mSet } = this;
      mSlot.copyWithin(to, off, off + cnt);
      mLo.copyWithin(to, off, off + cnt);
      mHi.copyWithin(to, off, off + cnt);
      mSet.copyWithin(to, off, off + cnt);
      this.sets[r + 3] = to;
      for (let i = 0; i < cnt; i++) {
        this.index.move(off + i, to + i);
        this.moved(mSlot[to + i]!, mLo[to + i]! | 0, mHi[to + i]! | 0, off + i, to + i);
      }
      mSlot.fill(NONE, off, off + cap);
      mSet.fill(NONE, off, off + cap);
      this.pool.free(off, cap);
    }
    const ids = this.sets[r + 4]!;
    if (ids >= 0 && !this.idPool.extend(ids + cap, next - cap)) {
      const to = this.idPool.alloc(next);
      this.mIds.copyWithin(2 * to, 2 * ids, 2 * (ids + cnt));
      this.idPool.free(ids, cap);
      this.sets[r + 4] = to;
    }
    this.setCap[set] = next;
  }

  /** Gives a set that reached `MEMBERS_FROM` workers its id words. */
  private buildIds(set: number): void {
    const r = set * SET_WORDS;
    const at = this.idPool.alloc(this.setCap[set]!);
    const { slotLo, slotHi } = this.src;
    const m = this.mIds;
    const off = this.sets[r + 3]!;
    const cnt = this.sets[r]!;
    for (let i = 0; i < cnt; i++) {
      const w = this.mSlot[off + i]!;
      m[2 * (at + i)] = slotLo[w]!;
      m[2 * (at + i) + 1] = slotHi[w]!;
    }
    this.sets[r + 4] = at;
  }

  private growPool(atLeast: number): void {
    if (atLeast <= this.mSlot.length) return;
    const n = Math.max(atLeast, Math.ceil(this.mSlot.length * GROW));
    this.mSlot = this.store.growInt32(this.mSlot, n, NONE);
    this.mLo = L.growUint32(this.mLo, n);
    this.mHi = L.growUint32(this.mHi, n);
    this.mSet = L.growInt32(this.mSet, n, NONE);
  }
}
