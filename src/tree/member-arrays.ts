/**
 * Member arrays: a node held by many workers (at least `MEMBERS_FROM`) also lists them in one
 * contiguous array of worker ids as (lo, hi) words, beside its overflow list (node-store.ts).
 * A lookup whose path starts with such a node can then write all of its workers into the
 * caller's result with one copy and one fill, instead of visiting a linked list of pairs three
 * times (walk.ts): at 4,096 workers sharing a prompt that visiting cost ~12 ns per worker, and
 * the lookup was 66x the 16-worker one (issue "fleet scale").
 *
 * Adding or removing a worker stays O(1): an append, or a swap with the last member (each
 * overflow pair knows its position, and the pair index finds the moved member's pair). Arrays
 * live in one pool, in power-of-two capacities with a free list per size; a node that falls
 * under `MEMBERS_UNDER` workers gives its array back (the gap avoids rebuilding an array
 * around the threshold). The array's offset is kept at the head of the node's overflow list,
 * like its count and fingerprint. Costs 8 bytes per overflow pair (offset, position; 4 while no node has an array) and 12 per
 * member (8 shared: the id words lookups copy; 4 private: the slot, to repair positions) on
 * nodes past the threshold; nodes with one worker (97% on the conversation trace) pay nothing.
 */
import type { ArrayStore } from './array-store.js';
import { LOCAL_STORE } from './array-store.js';

/** Workers a node needs before it keeps a member array. */
export const MEMBERS_FROM = 64;
/** Workers under which a node drops its member array. */
export const MEMBERS_UNDER = 32;
const NONE = -1;

/** What the member arrays need of the node store: lists, pair lookup, slot ids. */
export interface MemberSource {
  head(node: number): number;
  pNext: Int32Array;
  pWorker: Int32Array;
  findPair(node: number, slot: number): number;
  slotLo: Uint32Array;
  slotHi: Uint32Array;
}

export class MemberArrays {
  /**
   * At the head pair of a node's overflow list: where its member array starts (in members),
   * or NONE. Read by lookups; moved with the head (node-store.ts).
   */
  pMOff: Int32Array;
  /** Member id words, 2 per member, in the pool. Read by lookups. */
  mIds: Uint32Array;
  /** The slot of each member (private: repairs positions on removal); an array's capacity sits just before it. */
  private mSlot: Int32Array;
  /**
   * Per overflow pair: its position in its node's member array (private). Allocated when the
   * first member array is built: a tree whose nodes never reach `MEMBERS_FROM` workers (the
   * conversation workload) saves 4 bytes per overflow pair (0.8 bytes per pair there).
   */
  private pPos: Int32Array = new Int32Array(0);
  private pairCap: number;
  private top = 0;
  /**
   * Free ranges of the pool, [start, end) in members, sorted by start and merged when they
   * touch (a range's first word was a capacity word); a range that reaches `top` lowers it.
   * Why ranges and first fit, not a free list per capacity: nodes that thousands of workers
   * join one after another (a shared prompt) grow their arrays in lockstep, each freeing an
   * array of the size the others no longer need, and the per-size lists kept every outgrown
   * generation: the pool held 2.2x its members, 26 of the 88 bytes a pair cost at 4,096
   * workers storing one 48-block prompt.
   */
  private readonly freeStart: number[] = [];
  private readonly freeEnd: number[] = [];

  constructor(private readonly store: ArrayStore, pairCap: number) {
    this.pMOff = store.int32(pairCap, NONE);
    this.mIds = store.uint32(2 * (MEMBERS_FROM + 1));
    this.mSlot = LOCAL_STORE.int32(MEMBERS_FROM + 1, 0);
    this.pairCap = pairCap;
  }

  get bytes(): number {
    return this.pMOff.length * 4 + this.pPos.length * 4 + this.mSlot.length * 12;
  }

  /** The slot of the member at pool index `i`. */
  slotAt(i: number): number {
    return this.mSlot[i]!;
  }

  growPairs(cap: number): void {
    this.pMOff = this.store.growInt32(this.pMOff, cap, NONE);
    if (this.pPos.length > 0) this.pPos = LOCAL_STORE.growInt32(this.pPos, cap, 0);
    this.pairCap = cap;
  }

  /**
   * Overflow pair `p` of worker `w` just joined `node` as the head of its list (its offset
   * word already copied from the previous head), and the node now holds `cnt` workers.
   */
  added(src: MemberSource, node: number, p: number, w: number, cnt: number): void {
    const off = this.pMOff[p]!;
    if (off === NONE) {
      if (cnt >= MEMBERS_FROM) this.build(src, node, p, cnt);
      return;
    }
    const at = cnt > this.mSlot[off - 1]! ? this.relocate(p, cnt - 1, cnt) : off;
    this.put(src, at, cnt - 1, w, p);
  }

  /**
   * Overflow pair `p` is leaving `node`, whose list's head will be `head` (its offset word
   * already moved there) and which will hold `cnt` workers; `p`'s pair-index entry is gone.
   */
  removing(src: MemberSource, node: number, head: number, p: number, cnt: number): void {
    const off = this.pMOff[head]!;
    if (off === NONE) return;
    if (cnt < MEMBERS_UNDER) {
      this.giveBack(off);
      this.pMOff[head] = NONE;
      return;
    }
    const pos = this.pPos[p]!;
    if (pos !== cnt) {
      // The last member takes the leaving one's place.
      const s = this.mSlot[off + cnt]!;
      this.mSlot[off + pos] = s;
      this.mIds[2 * (off + pos)] = this.mIds[2 * (off + cnt)]!;
      this.mIds[2 * (off + pos) + 1] = this.mIds[2 * (off + cnt) + 1]!;
      this.pPos[src.findPair(node, s)] = pos;
    }
  }

  private put(src: MemberSource, off: number, i: number, w: number, p: number): void {
    this.mSlot[off + i] = w;
    this.mIds[2 * (off + i)] = src.slotLo[w]!;
    this.mIds[2 * (off + i) + 1] = src.slotHi[w]!;
    this.pPos[p] = i;
  }

  private build(src: MemberSource, node: number, head: number, cnt: number): void {
    if (this.pPos.length < this.pairCap) this.pPos = LOCAL_STORE.int32(this.pairCap, 0);
    const off = this.alloc(head, cnt);
    let i = 0;
    for (let p = src.head(node); p !== NONE; p = src.pNext[p]!) this.put(src, off, i++, src.pWorker[p]!, p);
  }

  /**
   * Gives the list headed by `head` (`keep` members) an array of room for `need`: grown in place
   * when the words after it are free (or it ends the pool), else a new array with the members
   * copied.
   */
  private relocate(head: number, keep: number, need: number): number {
    const old = this.pMOff[head]!;
    const oldCap = this.mSlot[old - 1]!;
    const cap = capacityFor(need);
    if (this.extend(old + oldCap, cap - oldCap)) {
      this.mSlot[old - 1] = cap;
      return old;
    }
    const off = this.alloc(head, need);
    this.mSlot.copyWithin(off, old, old + keep);
    this.mIds.copyWithin(2 * off, 2 * old, 2 * (old + keep));
    this.giveBack(old);
    return off;
  }

  /** Returns an array's words (its capacity word included) to the free ranges. */
  private giveBack(off: number): void {
    const start = off - 1;
    const end = off + this.mSlot[start]!;
    const fs = this.freeStart;
    const fe = this.freeEnd;
    let lo = 0;
    let hi = fs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (fs[mid]! < start) lo = mid + 1;
      else hi = mid;
    }
    const before = lo > 0 && fe[lo - 1] === start;
    const after = lo < fs.length && fs[lo] === end;
    if (before && after) {
      fe[lo - 1] = fe[lo]!;
      fs.splice(lo, 1);
      fe.splice(lo, 1);
    } else if (before) {
      fe[lo - 1] = end;
    } else if (after) {
      fs[lo] = start;
    } else {
      fs.splice(lo, 0, start);
      fe.splice(lo, 0, end);
    }
    const last = fs.length - 1;
    if (fe[last] === this.top) {
      this.top = fs[last]!;
      fs.pop();
      fe.pop();
    }
  }

  /** Takes the `words` after `at` if they are free or past the pool's end; returns whether it did. */
  private extend(at: number, words: number): boolean {
    if (at === this.top) {
      this.takeTop(words);
      return true;
    }
    const fs = this.freeStart;
    const i = fs.indexOf(at);
    if (i < 0) return false;
    const fe = this.freeEnd;
    if (fe[i]! - at < words) return false;
    fs[i] = at + words;
    if (fs[i] === fe[i]) {
      fs.splice(i, 1);
      fe.splice(i, 1);
    }
    return true;
  }

  /** `words` more words at the pool's end; returns where they start. */
  private takeTop(words: number): number {
    const start = this.top;
    this.top += words;
    if (this.top > this.mSlot.length) {
      const n = Math.max(this.top, Math.ceil(this.mSlot.length * 1.5));
      this.mSlot = LOCAL_STORE.growInt32(this.mSlot, n, 0);
      this.mIds = this.store.growUint32(this.mIds, 2 * n);
    }
    return start;
  }

  /** An array of capacity >= need (a power of two), recorded at the head pair; returns its offset. */
  private alloc(head: number, need: number): number {
    const cap = capacityFor(need);
    const words = cap + 1; // one word before each array holds its capacity
    const fs = this.freeStart;
    const fe = this.freeEnd;
    let start = -1;
    for (let i = 0; i < fs.length; i++) {
      if (fe[i]! - fs[i]! < words) continue;
      start = fs[i]!;
      fs[i] = start + words;
      if (fs[i] === fe[i]) {
        fs.splice(i, 1);
        fe.splice(i, 1);
      }
      break;
    }
    if (start < 0) start = this.takeTop(words);
    const off = start + 1;
    this.mSlot[start] = cap;
    this.pMOff[head] = off;
    return off;
  }
}

/** The capacity of an array for `need` members: a power of two, at least `MEMBERS_FROM`. */
function capacityFor(need: number): number {
  return 2 ** Math.max(Math.ceil(Math.log2(need)), Math.log2(MEMBERS_FROM));
}
