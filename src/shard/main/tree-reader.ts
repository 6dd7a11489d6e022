/**
 * Lookups on the calling thread, reading one shard's tree from shared memory (the arrays of
 * src/tree/shared-layout.ts) under the shard's ticket lock (wire/tree-lock.ts). Views are
 * fixed-length and rebuilt only when the layout generation moves (an array grew, the edge
 * table switched); the walk is the tree's own (walk.ts). Nothing is allocated per lookup
 * once the scratch arrays have grown to the shard's worker count.
 *
 * Under the lock, `GEN` and `SLOTS` are read as plain elements, not with `Atomics.load`: the
 * shard writes them before the write section that makes new arrays or slots reachable, so taking
 * the lock (whose release and acquire are atomic) already orders those writes before the read,
 * as it does for every tree array the walk reads. In Node 20 an `Atomics.load` is a call, not an
 * inlined load: ~16 ns against ~2 (2-core dev VM), four per 2-shard lookup.
 */
import { H, type SharedTreeLayout } from '../../tree/shared-layout.js';
import type { MatchResult } from '../../tree/match-result.js';
import { WalkScratch, emptyLookupArrays, type LookupArrays } from '../../tree/walk.js';
import { lockTree, unlockTree } from '../wire/tree-lock.js';
import type { ScoreList } from './score-list.js';
import { SlotIds } from './slot-ids.js';

export class TreeReader {
  readonly header: Int32Array;
  private gen = -1;
  private readonly arrays: LookupArrays = emptyLookupArrays();
  private readonly slotIds = new SlotIds();
  /**
   * @param walker scratch of the walk, shared by the readers of one indexer (they run one after
   * the other on the calling thread, and `emit` copies a walk out before the next one).
   */
  constructor(private readonly layout: SharedTreeLayout, private readonly walker: WalkScratch) {
    this.header = new Int32Array(layout.header);
  }

  /** Events the shard has applied (u32 count, wrapping, as an int32). */
  get applied(): number {
    return Atomics.load(this.header, H.APPLIED);
  }

  /** Whether the shard reported a fatal failure. */
  get failed(): boolean {
    return Atomics.load(this.header, H.FAILED) !== 0;
  }

  /**
   * Walks the shard's tree under its lock and appends the matching workers to `result` from
   * index `at`; returns the new count.
   */
  lookupInto(words: Uint32Array, off: number, n: number, earlyExit: boolean, result: MatchResult, at: number): number {
    const h = this.header;
    lockTree(h);
    try {
      if (h[H.GEN] !== this.gen) this.refresh();
      const walker = this.walker;
      walker.ensure(h[H.SLOTS]!);
      return walker.emit(this.arrays, walker.walk(this.arrays, words, off, n, earlyExit), result, at);
    } finally {
      unlockTree(h);
    }
  }

  /**
   * Walks the shard's tree under its lock and appends the matching workers to `list` (ids as
   * bigints: see score-list.ts); ids the slot cache could not answer for are made after the
   * lock is released.
   */
  lookupScores(words: Uint32Array, off: number, n: number, list: ScoreList): void {
    const h = this.header;
    const walker = this.walker;
    list.pending = 0;
    let bulk = 0;
    lockTree(h);
    try {
      if (h[H.GEN] !== this.gen) this.refresh();
      walker.ensure(h[H.SLOTS]!);
      const a = this.arrays;
      const k = walker.walk(a, words, off, n, false);
      if (walker.bulkOff >= 0) {
        // Members listed in bulk are id words, not slots: copied out, their ids made below.
        bulk = walker.emit(a, k, list.bulk, 0);
      } else {
        let at = list.count;
        list.ensure(at + k);
        const { slotLo, slotHi } = a;
        const { touched, score } = walker;
        const keys = list.keys;
        const vals = list.vals;
        const ids = this.slotIds;
        for (let i = 0; i < k; i++, at++) {
          const s = touched[i]!;
          const lo = slotLo[s]!;
          const hi = slotHi[s]!;
          const id = ids.cached(s, lo, hi);
          if (id === undefined) list.pend(at, s, lo, hi);
          else keys[at] = id;
          vals[at] = score[s]!;
        }
        list.count = at;
      }
    } finally {
      unlockTree(h);
    }
    if (bulk > 0) list.appendBulk(bulk);
    for (let p = 0; p < list.pending; p++) {
      list.keys[list.pendAt[p]!] = this.slotIds.make(list.pendSlot[p]!, list.pendLo[p]!, list.pendHi[p]!);
    }
  }

  /** Rebuilds the views after the layout changed (called under the lock). */
  private refresh(): void {
    const h = this.header;
    const l = this.layout;
    this.gen = Atomics.load(h, H.GEN);
    const i32 = (b: SharedArrayBuffer): Int32Array => new Int32Array(b, 0, b.byteLength >>> 2);
    const u32 = (b: SharedArrayBuffer): Uint32Array => new Uint32Array(b, 0, b.byteLength >>> 2);
    const a = this.arrays;
    a.parent = i32(l.parent);
    a.node = i32(l.node);
    a.pWorker = i32(l.pWorker);
    a.pNext = i32(l.pNext);
    a.pSet = i32(l.pSet);
    a.keyLo = u32(l.keyLo);
    a.keyHi = u32(l.keyHi);
    const mask = Atomics.load(h, H.EDGE_MASK);
    a.edges = new Int32Array(Atomics.load(h, H.EDGE_ACTIVE) === 0 ? l.edgesA : l.edgesB, 0, mask + 1);
    a.edgeMask = mask;
    a.slotLo = u32(l.slotLo);
    a.slotHi = u32(l.slotHi);
    a.pMOff = i32(l.pMOff);
    a.mIds = u32(l.mIds);
  }
}
