/**
 * Member sets: the workers of a node held by two or more, in one contiguous array per node
 * (node-store.ts keeps a node's single worker inline). They replaced a linked record of 36 bytes
 * per (worker, node) pair (node, worker, hash, next, previous, count and fingerprint) plus, past
 * 64 workers, a second array of the members' ids: at 4,096 workers storing one 48-block prompt
 * those were 65 of the 79 bytes a pair cost (docs/layout.md, "Memory").
 *
 * Per set (`SET_WORDS` words of `sets`, shared: lookups read them): its worker count, the XOR of
 * its workers' slot keys (the 64-bit fingerprint walk.ts compares), the offset of its members in
 * the pool, and the offset of their id words in `mIds` (or NONE); private: its capacity and
 * member table. Per member (a pool position): its worker slot (shared: lookups visit it) and its
 * external block hash (8, private: the worker's lookup reads it back). The id words (8 per
 * member, shared) are kept only for sets of at least `MEMBERS_FROM` workers, where a lookup
 * copies them into its result in bulk (walk.ts `emit`): at 4,096 workers that copy is what made
 * a lookup ~2 us instead of ~50.
 *
 * Membership ("where is worker w in this set?", `find`): a scan of the set's slots under
 * `TABLE_FROM` workers, else the set's own member table (open addressing, slot -> index in the
 * set + 1, member-table.ts: sized on its own, doubled when full). A pair is named by its node,
 * not its position (node-store.ts `PairRef`), so positions may move freely: on removal the set's
 * last member takes the leaving one's place (one table entry changes), and a set that outgrows
 * its range moves to a larger one (capacity 2, then 1.5x, 1.25x past `MEMBERS_FROM`; grown in
 * place when the positions after it are free), keeping its table (indexes do not change); in an
 * in-thread tree the live ranges slide down over the free ones before the pool would grow
 * (`slidePool`). Before, a position was the pair's name, held by the
 * worker's lookup and a tree-wide (set, worker) -> position index: every moved member cost a
 * probe of each (random reads: 23 % of the shared-prompt build) and the index and an owner-set
 * word per position cost 13 bytes a pair there. A set that falls to one worker is dissolved: the
 * node stores that worker inline again.
 */
import { LOCAL_STORE, nextCapacity, type ArrayStore } from './array-store.js';
import { entryAt, isWide, memberHome as home, tableDelete, tablePut, tableRenumber, tableSize, tableWords } from './member-table.js';
import { RangePool } from './range-pool.js';

/** Words per set record: count, fingerprint low, high, member offset, id offset. */
export const SET_WORDS = 5;
/** Workers a set needs before it keeps its members' id words (for bulk copies). */
export const MEMBERS_FROM = 64;
/** Workers under which a set drops its id words (the gap avoids churn around the threshold). */
export const MEMBERS_UNDER = 32;
const NONE = -1;
/**
 * Least growth step of the arrays, in entries (`nextCapacity`: 1/16 in place, 1.25x by copy;
 * with 1.5x the pool's unused tail was up to a third of it on top of each set's own slack).
 */
const MIN_STEP = 256;
/** Spare room a compacted pool keeps for growth, as a fraction of its live capacity. */
const COMPACT_ROOM = 1.25;

/** What the sets read of the node store: each slot's fingerprint key and id halves. */
export interface SetSource {
  keyLo: Uint32Array;
  keyHi: Uint32Array;
  slotLo: Uint32Array;
  slotHi: Uint32Array;
  /** Writes a node's worker word (a set renumbered by `compact` is `-set - 2` there). */
  setW0(node: number, w: number): void;
}

/**
 * Growth of a set of `MEMBERS_FROM`+ workers that outgrows its range (smaller ones take 1.5x,
 * at least one more). A move copies its slots, hashes and id words (a memmove each) and no
 * longer rebuilds its member table (sized on its own, in doubling steps), so the step could go
 * from 1.5x to 1.25x: at 4,096 workers on one prompt a set's capacity is 4,199 (5,394 at 1.5x),
 * and the mean slack of a set that stops growing at a random size is ~11 % instead of ~20 %.
 */
const BIG_GROW = 1.25;
/** 16-bit words before a member table's entries: its entry capacity (low, high). */
const HEAD = 2;
/** Workers a set needs before it keeps a member table (`find` scans smaller sets). */
export const TABLE_FROM = 16;
/** Workers under which a set drops its member table. */
export const TABLE_UNDER = 8;

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
  private setCap: Int32Array;
  /** Per set: where its member table starts in `tabs`, or NONE. */
  private setTab: Int32Array;
  /** Member tables: per slot, the member's index in its set + 1, 0 when empty (16-bit words). */
  private tabs: Uint16Array;
  private setTop = 0;
  /** Sum of the live sets' capacities: the pool positions a compacted pool needs. */
  private capSum = 0;
  /**
   * The node of the member (slot, hash) (the tree's worker lookups know it): `compact` renumbers
   * sets by it, where a node word per set would cost 4 bytes a record.
   */
  nodeOfMember: (slot: number, lo: number, hi: number) => number = () => NONE;
  /** Private arrays (an in-thread tree): compacted after a peak (`compact`). */
  private readonly local: boolean;
  private readonly freeSets: number[] = [];
  liveSets = 0;
  liveMembers = 0;
  /**
   * The member-table slot where the last `find` that missed in a set with a table stopped:
   * where that worker goes if it is appended next (`append`'s `hole`), saving a second probe.
   */
  hole = -1;
  private readonly pool: RangePool;
  private readonly idPool: RangePool;
  private readonly tabPool: RangePool;

  /**
   * `store`: memory lookups read (shared with readers in a shard tree); `own`: the writer's
   * private arrays. Both grow in place in a tree (array-store.ts `SharedStore`): as plain
   * arrays copied 1.25x at each step, the private ones (hashes, member tables, capacities) left
   * their outgrown copies in glibc's heap, and the copies were 12.5 % of the shared-prompt build
   * (4,096 workers x 48 blocks) and the external-memory scavenges another 11.6 %.
   */
  constructor(private readonly store: ArrayStore, private readonly src: SetSource, private readonly own: ArrayStore = LOCAL_STORE) {
    const sets = 16;
    const pool = 64;
    this.sets = store.int32(sets * SET_WORDS, 0);
    this.setCap = own.int32(sets, 0);
    this.local = store.solo;
    this.setTab = own.int32(sets, NONE);
    this.mSlot = store.int32(pool, NONE);
    this.mLo = own.uint32(pool);
    this.mHi = own.uint32(pool);
    this.mIds = store.uint32(2 * MEMBERS_FROM);
    this.tabs = own.uint16(64);
    this.pool = new RangePool((atLeast) => this.growPool(atLeast));
    this.idPool = new RangePool((atLeast) => {
      if (2 * atLeast > this.mIds.length) this.mIds = this.store.growUint32(this.mIds, 2 * nextCapacity(this.store, this.mIds.length >> 1, atLeast, MIN_STEP));
    });
    this.tabPool = new RangePool((atLeast) => {
      if (atLeast > this.tabs.length) this.tabs = this.own.growUint16(this.tabs, nextCapacity(this.own, this.tabs.length, atLeast, MIN_STEP));
    });
  }

  /** Bytes of the typed arrays (capacities). */
  get bytes(): number {
    const b = this.bytesBy;
    return b.records + b.pool + b.ids + b.tables;
  }

  /**
   * Bytes by structure: set records (20 shared + 8 private per set), pool (12 per position:
   * slot, hash), id words of large sets, member tables of sets of `TABLE_FROM`+ workers.
   */
  get bytesBy(): { records: number; pool: number; ids: number; tables: number } {
    return {
      records: this.sets.length * 4 + this.setCap.length * 8,
      pool: this.mSlot.length * 12,
      ids: this.mIds.length * 4,
      tables: this.tabs.length * 2,
    };
  }

  /** Pool positions handed out (live members, free ranges and growth slack of live sets). */
  get poolUsed(): number {
    return this.pool.top - this.pool.freePositions;
  }

  /** Worker count of `set`. */
  count(set: number): number {
    return this.sets[set * SET_WORDS]!;
  }

  /** Where the members of `set` start in the pool. */
  offset(set: number): number {
    return this.sets[set * SET_WORDS + 3]!;
  }

  /** The position of worker `slot` in `set`, or -1 (then `hole` is where it would go). */
  find(set: number, slot: number): number {
    const r = set * SET_WORDS;
    const s = this.sets;
    const off = s[r + 3]!;
    const mSlot = this.mSlot;
    const t = this.setTab[set]!;
    if (t < 0) {
      for (let p = off, end = off + s[r]!; p < end; p++) if (mSlot[p] === slot) return p;
      return -1;
    }
    const tabs = this.tabs;
    const tcap = tabs[t]! | (tabs[t + 1]! << 16);
    const n = tableSize(tcap);
    const wide = isWide(tcap);
    let i = home(slot, n);
    for (;;) {
      const v = entryAt(tabs, t + HEAD, i, wide);
      if (v === 0) {
        this.hole = i;
        return -1;
      }
      if (mSlot[off + v - 1] === slot) return off + v - 1;
      i = i + 1 === n ? 0 : i + 1;
    }
  }

  /** An empty set (the node word that names it is the caller's to switch once members are in). */
  create(): number {
    let set = this.freeSets.pop();
    if (set === undefined) {
      set = this.setTop++;
      if (set * SET_WORDS >= this.sets.length) {
        const cap = nextCapacity(this.own, this.setCap.length, set + 1, 64);
        this.sets = this.store.growInt32(this.sets, cap * SET_WORDS, 0);
        this.setCap = this.own.growInt32(this.setCap, cap, 0);
        this.setTab = this.own.growInt32(this.setTab, cap, NONE);
      }
    }
    const off = this.pool.alloc(2);
    this.setCap[set] = 2;
    this.capSum += 2;
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
   * Adds worker `slot` with external hash (lo, hi) to `set` (not a member: `find` missed);
   * returns its position. `hole`: `this.hole` right after that `find`, or -1.
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
    let t = this.setTab[set]!;
    if (t >= 0) {
      let tcap = this.tableCap(t);
      if (cnt === tcap) {
        // Full: a table for twice as many, holding the members before this one.
        this.tabPool.free(t, tableWords(tcap) + HEAD);
        tcap *= 2;
        t = this.buildTable(set, tcap);
        hole = -1;
      }
      tablePut(this.tabs, t + HEAD, tcap, slot, cnt + 1, hole);
    }
    const ids = s[r + 4]!;
    if (ids >= 0) {
      this.mIds[2 * (ids + cnt)] = this.src.slotLo[slot]!;
      this.mIds[2 * (ids + cnt) + 1] = this.src.slotHi[slot]!;
    }
    s[r + 1] = s[r + 1]! ^ this.src.keyLo[slot]!;
    s[r + 2] = s[r + 2]! ^ this.src.keyHi[slot]!;
    s[r] = cnt + 1;
    this.liveMembers++;
    if (t < 0 && cnt + 1 >= TABLE_FROM) this.buildTable(set, 2 * (cnt + 1));
    if (ids < 0 && cnt + 1 >= MEMBERS_FROM) this.buildIds(set);
    return pos;
  }

  /**
   * Takes the member at `pos` out of `set` (the set's last member takes its place); returns the
   * set's new count. A set left with one member is the caller's to `dissolve`.
   */
  remove(set: number, pos: number): number {
    const mSlot = this.mSlot;
    const r = set * SET_WORDS;
    const s = this.sets;
    const cnt = s[r]!;
    const off = s[r + 3]!;
    const ids = s[r + 4]!;
    const last = off + cnt - 1;
    const slot = mSlot[pos]!;
    const t = this.setTab[set]!;
    if (t >= 0) {
      const tcap = this.tableCap(t);
      tableDelete(this.tabs, t + HEAD, tcap, this.mSlot, off, slot);
      // The last member's entry names its new index.
      if (pos !== last) tableRenumber(this.tabs, t + HEAD, tcap, mSlot[last]!, cnt, pos - off + 1);
    }
    if (pos !== last) {
      mSlot[pos] = mSlot[last]!;
      this.mLo[pos] = this.mLo[last]!;
      this.mHi[pos] = this.mHi[last]!;
      if (ids >= 0) {
        const m = this.mIds;
        const to = 2 * (ids + pos - off);
        const from = 2 * (ids + cnt - 1);
        m[to] = m[from]!;
        m[to + 1] = m[from + 1]!;
      }
    }
    mSlot[last] = NONE;
    s[r + 1] = s[r + 1]! ^ this.src.keyLo[slot]!;
    s[r + 2] = s[r + 2]! ^ this.src.keyHi[slot]!;
    s[r] = cnt - 1;
    this.liveMembers--;
    if (ids >= 0 && cnt - 1 < MEMBERS_UNDER) {
      this.idPool.free(ids, this.setCap[set]!);
      s[r + 4] = NONE;
    }
    if (t >= 0 && cnt - 1 < TABLE_UNDER) {
      this.tabPool.free(t, tableWords(this.tableCap(t)) + HEAD);
      this.setTab[set] = NONE;
    }
    return cnt - 1;
  }

  /** Frees `set` and its remaining members (their worker lookups are the caller's). */
  dissolve(set: number): void {
    const r = set * SET_WORDS;
    const s = this.sets;
    const cnt = s[r]!;
    const off = s[r + 3]!;
    this.mSlot.fill(NONE, off, off + cnt);
    this.liveMembers -= cnt;
    this.pool.free(off, this.setCap[set]!);
    if (s[r + 4]! >= 0) this.idPool.free(s[r + 4]!, this.setCap[set]!);
    const t = this.setTab[set]!;
    if (t >= 0) this.tabPool.free(t, tableWords(this.tableCap(t)) + HEAD);
    s[r] = 0;
    s[r + 1] = 0;
    s[r + 2] = 0;
    s[r + 3] = NONE;
    s[r + 4] = NONE;
    this.capSum -= this.setCap[set]!;
    this.setCap[set] = 0;
    this.setTab[set] = NONE;
    this.freeSets.push(set);
    this.liveSets--;
    if (this.local) this.compact();
  }

  /**
   * Gives memory back after a peak, in an in-thread tree (no reader runs beside the writer, and
   * private arrays can be replaced by smaller ones; shared ones only grow): when half the set
   * records are free, the live sets are renumbered from 0 (their nodes' words rewritten) into
   * records for 1.5x as many; when half the pool is outside the live sets' ranges, the ranges are
   * copied end to end into a pool 1.25x their capacities. Pairs are named by node, so nothing
   * else changes. Each compaction costs O(records or positions) and needs a quarter of them
   * freed since the last one. The conversation workload peaks at 4,852 sets and
   * 9,812 positions and ends with 1,771 and 3,794 (records for 7,065 and a pool of 13,794 kept:
   * 5.6 bytes a pair before compaction).
   */
  private compact(): void {
    if (this.setCap.length > 64 && this.liveSets * 2 < this.setCap.length) this.compactSets();
    if (this.mSlot.length > 256 && this.capSum * 2 < this.mSlot.length) this.compactPool();
  }

  private compactSets(): void {
    const n = Math.max(16, Math.ceil(this.liveSets * 1.5));
    // The shared-memory arrays come from the store (growable memory in trees: array-store.ts),
    // which forgets the old ones; the private ones are plain memory.
    const sets = this.store.int32(n * SET_WORDS, 0);
    const setCap = this.own.int32(n, 0);
    const setTab = this.own.int32(n, NONE);
    const old = this.sets;
    // Every node first, while the lookups read the old numbering, then the new words.
    const nodes = new Int32Array(this.liveSets);
    let k = 0;
    for (let set = 0; set < this.setTop; set++) {
      if (this.setCap[set] === 0) continue;
      const off = old[set * SET_WORDS + 3]!;
      nodes[k] = this.nodeOfMember(this.mSlot[off]!, this.mLo[off]! | 0, this.mHi[off]! | 0);
      sets.set(old.subarray(set * SET_WORDS, (set + 1) * SET_WORDS), k * SET_WORDS);
      setCap[k] = this.setCap[set]!;
      setTab[k] = this.setTab[set]!;
      k++;
    }
    for (let i = 0; i < k; i++) this.src.setW0(nodes[i]!, -i - 2);
    this.store.release(this.sets);
    this.own.release(this.setCap);
    this.own.release(this.setTab);
    this.sets = sets;
    this.setCap = setCap;
    this.setTab = setTab;
    this.setTop = k;
    this.freeSets.length = 0;
  }

  private compactPool(): void {
    const n = Math.max(64, Math.ceil(this.capSum * COMPACT_ROOM));
    const mSlot = this.store.int32(n, NONE);
    const mLo = this.own.uint32(n);
    const mHi = this.own.uint32(n);
    const s = this.sets;
    let at = 0;
    for (let set = 0; set < this.setTop; set++) {
      const cap = this.setCap[set]!;
      if (cap === 0) continue;
      const r = set * SET_WORDS;
      const off = s[r + 3]!;
      const end = off + s[r]!;
      mSlot.set(this.mSlot.subarray(off, end), at);
      mLo.set(this.mLo.subarray(off, end), at);
      mHi.set(this.mHi.subarray(off, end), at);
      s[r + 3] = at;
      at += cap;
    }
    this.store.release(this.mSlot);
    this.own.release(this.mLo);
    this.own.release(this.mHi);
    this.mSlot = mSlot;
    this.mLo = mLo;
    this.mHi = mHi;
    this.pool.reset(at);
  }

  /** Room for one more member of a full set of `cnt`: in place if the positions after it are free. */
  private growSet(set: number, cnt: number): void {
    const r = set * SET_WORDS;
    const cap = this.setCap[set]!;
    const next = cap < MEMBERS_FROM ? Math.max(cap + 1, Math.ceil(cap * 1.5)) : Math.ceil(cap * BIG_GROW);
    let off = this.sets[r + 3]!;
    if (!this.pool.extend(off + cap, next - cap) && this.slideFirst(this.pool, this.mSlot.length, next)) {
      this.slidePool();
      off = this.sets[r + 3]!;
    }
    if (!this.pool.extend(off + cap, next - cap)) {
      const to = this.pool.alloc(next); // may grow the pool's arrays: read them after
      const { mSlot, mLo, mHi } = this;
      mSlot.copyWithin(to, off, off + cnt);
      mLo.copyWithin(to, off, off + cnt);
      mHi.copyWithin(to, off, off + cnt);
      this.sets[r + 3] = to;
      mSlot.fill(NONE, off, off + cap);
      this.pool.free(off, cap);
    }
    let ids = this.sets[r + 4]!;
    if (ids >= 0 && !this.idPool.extend(ids + cap, next - cap) && this.slideFirst(this.idPool, this.mIds.length >> 1, next)) {
      this.slideIds();
      ids = this.sets[r + 4]!;
    }
    if (ids >= 0 && !this.idPool.extend(ids + cap, next - cap)) {
      const to = this.idPool.alloc(next);
      this.mIds.copyWithin(2 * to, 2 * ids, 2 * (ids + cnt));
      this.idPool.free(ids, cap);
      this.sets[r + 4] = to;
    }
    // The member table stays: it maps slots to indexes in the set, which a move keeps.
    this.setCap[set] = next;
    this.capSum += next - cap;
  }

  /**
   * Whether a move of `n` positions should first slide the live ranges of `pool` (whose arrays
   * hold `length`) down over its free ones: in an in-thread tree, when the move would grow the
   * arrays and an eighth of the handed-out positions are free. Sets that grow in lockstep (every
   * worker joining each node of a shared prompt) leave the free ranges of the generation before
   * behind them: at 4,096 workers x 48 blocks the pool held 242,054 positions for 201,552 of
   * capacity, 40,502 positions of 20 bytes (slot, hash, id words) at their peak.
   */
  private slideFirst(pool: RangePool, length: number, n: number): boolean {
    return this.local && pool.top + n > length && pool.freePositions * 8 >= pool.top;
  }

  /** The live sets whose `word` (3: member offset, 4: id offset) is set, ordered by it. */
  private liveBy(word: number): number[] {
    const s = this.sets;
    const out: number[] = [];
    for (let set = 0; set < this.setTop; set++) if (this.setCap[set]! > 0 && s[set * SET_WORDS + word]! >= 0) out.push(set);
    return out.sort((a, b) => s[a * SET_WORDS + word]! - s[b * SET_WORDS + word]!);
  }

  /**
   * Moves every live set's members down over the free positions before them, in offset order
   * (each copy goes down, over positions already copied or free), and hands out the pool from
   * their end. In place: no new memory, no reader (in-thread only). Member tables stay (they map
   * slots to indexes in the set).
   */
  private slidePool(): void {
    const s = this.sets;
    const { mSlot, mLo, mHi } = this;
    const top = this.pool.top;
    let at = 0;
    for (const set of this.liveBy(3)) {
      const r = set * SET_WORDS;
      const off = s[r + 3]!;
      const cnt = s[r]!;
      const cap = this.setCap[set]!;
      if (off !== at) {
        mSlot.copyWithin(at, off, off + cnt);
        mLo.copyWithin(at, off, off + cnt);
        mHi.copyWithin(at, off, off + cnt);
        mSlot.fill(NONE, at + cnt, at + cap);
        s[r + 3] = at;
      }
      at += cap;
    }
    mSlot.fill(NONE, at, top);
    this.pool.reset(at);
  }

  /** `slidePool` for the id words of the sets that have them. */
  private slideIds(): void {
    const s = this.sets;
    const m = this.mIds;
    let at = 0;
    for (const set of this.liveBy(4)) {
      const r = set * SET_WORDS;
      const ids = s[r + 4]!;
      if (ids !== at) {
        m.copyWithin(2 * at, 2 * ids, 2 * (ids + s[r]!));
        s[r + 4] = at;
      }
      at += this.setCap[set]!;
    }
    this.idPool.reset(at);
  }

  /** Entries the member table at `t` holds at most (its header). */
  private tableCap(t: number): number {
    return this.tabs[t]! | (this.tabs[t + 1]! << 16);
  }

  /** Gives `set` a member table for `tcap` entries, holding its members; returns where it starts. */
  private buildTable(set: number, tcap: number): number {
    const words = tableWords(tcap) + HEAD;
    const t = this.tabPool.alloc(words); // may grow `tabs`: read it after
    const tabs = this.tabs;
    tabs.fill(0, t + HEAD, t + words);
    tabs[t] = tcap & 0xffff;
    tabs[t + 1] = tcap >>> 16;
    const off = this.sets[set * SET_WORDS + 3]!;
    const cnt = this.sets[set * SET_WORDS]!;
    const mSlot = this.mSlot;
    for (let k = 0; k < cnt; k++) tablePut(tabs, t + HEAD, tcap, mSlot[off + k]!, k + 1, -1);
    this.setTab[set] = t;
    return t;
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
    const n = nextCapacity(this.store, this.mSlot.length, atLeast, MIN_STEP);
    this.mSlot = this.store.growInt32(this.mSlot, n, NONE);
    this.mLo = this.own.growUint32(this.mLo, n);
    this.mHi = this.own.growUint32(this.mHi, n);
  }
}
