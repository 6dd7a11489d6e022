/**
 * The writer's unit log: what lets a lookup read a shard's tree without the lock while the
 * lock's holder is descheduled (src/shard/main/tree-reader.ts), instead of waiting for the
 * scheduler to run it again.
 *
 * A unit is one change that leaves the tree valid for readers: a worker joining a node, a
 * new chain linked, a pair dropped (with the nodes it frees). An edge-table switch or an
 * array's growth is not one: it changes no answer, and a reader whose views are not those of
 * the current layout generation waits for the lock instead.
 * Before a unit's first write the writer lists the nodes whose reader-visible state the unit
 * changes (`TOUCHED`), then makes `PROGRESS` odd; after its last write, even. A reader that
 * found the lock held by a thread that stopped moving reads `PROGRESS`, walks while treating
 * the listed nodes as unreadable (the walk gives up on meeting one), and keeps its result only
 * if `PROGRESS` did not move meanwhile: then the writer did not run, every unit before is
 * whole, and the walk never read what the unit in progress changes.
 *
 * A node is listed when the unit changes its record words (first child, worker set), its
 * member set (member-sets.ts: a set only ever changes, moves or grows in a unit that lists its
 * node; a range it leaves is reused only by a later unit), or when an edge-table entry of one of its children may move
 * (backward-shift deletion moves the later entries of a cluster: their parents are listed, so
 * a reader at such a parent never probes a cluster with a hole in it). Writes no reader can
 * reach (a new node before it is linked, a freed node, a new slot) need no listing.
 *
 * Plain stores: one writer, and x86-64 keeps stores in order (and loads in order), so a
 * reader that sees `PROGRESS` sees the list written before it; V8 neither reorders typed-array
 * element stores nor drops them as dead (its store-store elimination takes object fields only).
 * Readers use this path only on x86-64 (`OPTIMISTIC_READS`); elsewhere they wait for the lock.
 *
 * Cost to the writer: applying the conversation workload to a shared tree in-thread measured
 * +22-26 % with the first version, whose detach listing walked a stack for every leaf and probed
 * the edge table twice; listing a leaf directly and letting `remove` start at the slot the
 * listing found brought it to +5-15 % in paired runs on a noisy hour (the listing's cluster scan
 * reads the lines the removal's shift reads next).
 */
import { H, TOUCHED_MAX } from './shared-layout.js';

/** Whether lookups may read past a descheduled holder (see the file comment: store order). */
export const OPTIMISTIC_READS = process.arch === 'x64' || process.arch === 'ia32';

export class UnitLog {
  private n = 0;

  constructor(private readonly h: Int32Array) {}

  /** Starts listing the next unit's nodes (between units: readers do not look at the list). */
  open(): void {
    this.n = 0;
  }

  /** Lists a node the next unit changes. */
  add(id: number): void {
    if (this.n < TOUCHED_MAX) this.h[H.TOUCHED + this.n] = id;
    this.n++;
  }

  /** Whether the list is past TOUCHED_MAX (the unit is logged as changing any node). */
  get full(): boolean {
    return this.n > TOUCHED_MAX;
  }

  /** Publishes the list (or "any node", past TOUCHED_MAX) and starts the unit. */
  begin(): void {
    const h = this.h;
    h[H.TOUCHED_N] = this.n > TOUCHED_MAX ? -1 : this.n;
    h[H.PROGRESS] = (h[H.PROGRESS]! + 1) | 0;
  }

  /** Ends the unit: the tree is whole again. */
  end(): void {
    const h = this.h;
    h[H.PROGRESS] = (h[H.PROGRESS]! + 1) | 0;
  }
}
