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
 *
 * When the lock's holder (the shard thread) has stopped moving inside a write section, which on
 * a machine with fewer cores than busy threads means it was descheduled, a lookup does not wait
 * for the scheduler to run it again: it reads the tree without the lock, guarded by the writer's
 * unit log (src/tree/unit-log.ts), keeps the result if the writer did not move meanwhile, and
 * gives its ticket up (tree-lock.ts). Otherwise it waits for the lock as before.
 */
import { H, TOUCHED_MAX, type SharedTreeLayout } from '../../tree/shared-layout.js';
import type { MatchResult } from '../../tree/match-result.js';
import { OPTIMISTIC_READS } from '../../tree/unit-log.js';
import { WalkScratch, emptyLookupArrays, type LookupArrays } from '../../tree/walk.js';
import { abandonTicket, lockTreeReader, unlockTree, waitForTicket } from '../wire/tree-lock.js';
import type { ScoreList } from './score-list.js';
import { SlotIds } from './slot-ids.js';

/** `beginPast`: no read past the holder now. */
const NO_READ = 0.5;

export class TreeReader {
  readonly header: Int32Array;
  private gen = -1;
  private readonly arrays: LookupArrays = emptyLookupArrays();
  private readonly slotIds = new SlotIds();
  /** The nodes the writer's unit in progress changes, copied for a read past it. */
  private readonly guard = new Int32Array(TOUCHED_MAX);
  /** Whether lookups may read past a descheduled holder (unit-log.ts: x86-64 only). */
  private readonly optimistic = OPTIMISTIC_READS;
  /** How many nodes of `guard` the read past in progress avoids. */
  private guardN = 0;
  /**
   * The writer's `PROGRESS` when a lookup last read past it; -1 before any. Always an int32:
   * NaN here (as before) is a double, and passing a double to `lockTreeReader` when V8 did not
   * inline it boxed it, 16 bytes of garbage per shard per lookup: in one process out of three
   * (the same build, by the order of its compilations), 100k 2-shard `findMatchesInto` grew the
   * heap by 3.2 MB instead of ~0. A `PROGRESS` that happens to equal -1 only lets a lookup try a
   * read past without watching the writer first, and a read past validates itself (`stands`).
   */
  private stalledAt = -1;
  /** Lookups answered by reading past a descheduled holder, and those that tried and waited. */
  readsPast = 0;
  readsPastFailed = 0;
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
   * Walks the shard's tree under its lock (or past a descheduled holder) and appends the
   * matching workers to `result` from index `at`; returns the new count.
   */
  lookupInto(words: Uint32Array, off: number, n: number, earlyExit: boolean, result: MatchResult, at: number): number {
    const h = this.header;
    const ticket = lockTreeReader(h, this.optimistic, this.stalledAt);
    if (ticket >= 0) {
      // On a failed read the entries written from `at` are overwritten by the locked read.
      const end = this.readPast(words, off, n, earlyExit, result, at);
      if (end >= 0) {
        this.giveUp(ticket);
        return end;
      }
      this.readsPastFailed++;
      waitForTicket(h, ticket);
    }
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
   * Walks the shard's tree under its lock (or past a descheduled holder) and appends the
   * matching workers to `list` (ids as bigints: see score-list.ts); ids the slot cache could
   * not answer for are made after the lock is released.
   */
  lookupScores(words: Uint32Array, off: number, n: number, list: ScoreList): void {
    const h = this.header;
    list.pending = 0;
    let bulk = -1;
    const ticket = lockTreeReader(h, this.optimistic, this.stalledAt);
    if (ticket >= 0) {
      const p0 = this.beginPast();
      const count = list.count;
      if (p0 !== NO_READ) {
        bulk = this.collect(words, off, n, list, this.guardN);
        if (bulk >= 0 && !this.stands(p0)) bulk = -1;
      }
      if (bulk >= 0) {
        this.giveUp(ticket);
      } else {
        list.count = count;
        list.pending = 0;
        this.readsPastFailed++;
        waitForTicket(h, ticket);
      }
    }
    if (bulk < 0) {
      try {
        if (h[H.GEN] !== this.gen) this.refresh();
        this.walker.ensure(h[H.SLOTS]!);
        bulk = this.collect(words, off, n, list, 0);
      } finally {
        unlockTree(h);
      }
    }
    if (bulk > 0) list.appendBulk(bulk);
    for (let p = 0; p < list.pending; p++) {
      list.keys[list.pendAt[p]!] = this.slotIds.make(list.pendSlot[p]!, list.pendLo[p]!, list.pendHi[p]!);
    }
  }

  /**
   * The walk of `lookupScores` into `list` (under the lock, or past the holder with `guardN`);
   * returns the bulk listing's size, or -1 if a guarded walk met a node the writer is changing.
   */
  private collect(words: Uint32Array, off: number, n: number, list: ScoreList, guardN: number): number {
    const walker = this.walker;
    let bulk = 0;
    {
      const a = this.arrays;
      const k = walker.walk(a, words, off, n, false, this.guard, guardN);
      if (walker.aborted) return -1;
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
    }
    return bulk;
  }

  /**
   * Starts a read past a descheduled holder (unit-log.ts): returns the writer's `PROGRESS`, with
   * the unit in progress's nodes in `guard`, or NO_READ when this read cannot be made (the
   * views are not the current layout's, or the unit may change any node).
   */
  private beginPast(): number {
    const h = this.header;
    const p0 = Atomics.load(h, H.PROGRESS);
    if (Atomics.load(h, H.GEN) !== this.gen) return NO_READ;
    let n = 0;
    if ((p0 & 1) !== 0) {
      n = h[H.TOUCHED_N]!;
      if (n < 0 || n > TOUCHED_MAX) return NO_READ;
      for (let i = 0; i < n; i++) this.guard[i] = h[H.TOUCHED + i]!;
    }
    this.guardN = n;
    this.walker.ensure(h[H.SLOTS]!);
    return p0;
  }

  /**
   * @internal The lookup of `lookupInto` made without the lock, past a writer that holds it
   * (unit-log.ts): returns the new count, or -1 when it cannot stand (the views are not the
   * current layout's, the writer's unit in progress may change any node or lies on the path,
   * or the writer moved meanwhile). Takes no ticket: `lookupInto` holds one, tests none.
   */
  readPast(words: Uint32Array, off: number, n: number, earlyExit: boolean, result: MatchResult, at: number): number {
    const p0 = this.beginPast();
    if (p0 === NO_READ) return -1;
    const walker = this.walker;
    const k = walker.walk(this.arrays, words, off, n, earlyExit, this.guard, this.guardN);
    if (walker.aborted) return -1;
    const end = walker.emit(this.arrays, k, result, at);
    return this.stands(p0) ? end : -1;
  }

  /**
   * Whether a read past the writer stands: the writer did not move since `beginPast` (an atomic
   * read-modify-write, so that no read of the walk is ordered after it).
   */
  private stands(p0: number): boolean {
    if (Atomics.compareExchange(this.header, H.PROGRESS, p0, p0) !== p0) return false;
    this.stalledAt = p0;
    return true;
  }

  /** Gives up the ticket of a lookup answered past the writer. */
  private giveUp(ticket: number): void {
    abandonTicket(this.header, ticket);
    this.readsPast++;
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
    a.sets = i32(l.sets);
    a.mSlot = i32(l.mSlot);
    a.keyLo = u32(l.keyLo);
    a.keyHi = u32(l.keyHi);
    const mask = Atomics.load(h, H.EDGE_MASK);
    a.edges = new Int32Array(Atomics.load(h, H.EDGE_ACTIVE) === 0 ? l.edgesA : l.edgesB, 0, mask + 1);
    a.edgeMask = mask;
    a.roots = i32(l.roots);
    a.slotLo = u32(l.slotLo);
    a.slotHi = u32(l.slotHi);
    a.mIds = u32(l.mIds);
  }
}
