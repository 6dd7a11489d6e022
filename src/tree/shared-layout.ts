/**
 * The part of a shard's tree that lookups on another thread read, in shared memory: the edge
 * table (two buffers: a resized table is built in the inactive one while readers keep using
 * the active one, then switched), each node's parent and its record (tokens-hash key, first
 * child and child class, worker set), the member sets' records (count, fingerprint, offsets) and
 * their members' slots and id words, the slots' fingerprint keys, and the slot -> worker id table. Everything
 * else (the per-worker external-hash lookups, child counts, free lists) stays private to the
 * shard thread, as in Dynamo.
 *
 * `header` (Int32) words are listed in `H`; the tree writes `GEN`, `EDGE_*`, `SLOTS` and its
 * unit log (unit-log.ts), the shard's lock (src/shard/wire/tree-lock.ts) the rest. Readers take
 * the lock, then rebuild their views if `GEN` moved; or, past a descheduled holder, read with
 * the views they have, guarded by the unit log.
 */

export const H = {
  /**
   * Ticket lock (tree-lock.ts): one word holding the next ticket (high 16 bits) and the ticket
   * served (low 16 bits); threads asleep waiting. Word 1 is unused.
   */
  LOCK: 0,
  WAITERS: 2,
  /** Layout generation: bumped whenever an array grows or the edge table switches. */
  GEN: 3,
  /** Events the shard has applied (u32, wrapping): read-your-writes waits on it. */
  APPLIED: 4,
  /** Which edge buffer is active (0: edgesA, 1: edgesB), and its mask (capacity - 1). */
  EDGE_ACTIVE: 5,
  EDGE_MASK: 6,
  /** 1 once the shard failed: waiters stop waiting. */
  FAILED: 7,
  /** Worker slots handed out so far (readers size their score scratch on it). */
  SLOTS: 8,
  /** Threads asleep waiting on `APPLIED`: the shard notifies only if there are any. */
  APPLIED_WAITERS: 9,
  /** Never notified: a writer's timed step off the CPU waits on it (tree-lock.ts). */
  HANDOFF: 10,
  /**
   * A lookup's ticket it gave up after reading the tree past a descheduled holder, plus 1 (0:
   * none): whoever sees it served releases it (tree-lock.ts).
   */
  ABANDON: 11,
  /*
   * Words 16-31, their own cache line (the lock's line bounces between threads): the writer's
   * unit log (unit-log.ts), written with plain stores by the shard thread only.
   */
  /** Bumped when a unit of writing starts (then odd) and when it ends (even). */
  PROGRESS: 16,
  /** How many nodes the unit in progress changes (listed from `TOUCHED`), or -1: any node. */
  TOUCHED_N: 17,
  TOUCHED: 18,
} as const;

/** Nodes a unit can list in `TOUCHED`; a unit that changes more is logged as "any node". */
export const TOUCHED_MAX = 14;

export const HEADER_WORDS = 32;

export interface SharedTreeLayout {
  header: SharedArrayBuffer;
  parent: SharedArrayBuffer;
  /** Node records: tokens hash halves, child word, worker set word (node-store.ts). */
  node: SharedArrayBuffer;
  /** Member set records (member-sets.ts, `SET_WORDS` per set). */
  sets: SharedArrayBuffer;
  /** Members' worker slots, per pool position. */
  mSlot: SharedArrayBuffer;
  keyLo: SharedArrayBuffer;
  keyHi: SharedArrayBuffer;
  edgesA: SharedArrayBuffer;
  edgesB: SharedArrayBuffer;
  slotLo: SharedArrayBuffer;
  slotHi: SharedArrayBuffer;
  /** Id words of the members of large sets (member-sets.ts). */
  mIds: SharedArrayBuffer;
  /** Root keys (edge-table.ts `ROOT_SLOTS`): fixed size, never grows. */
  roots: SharedArrayBuffer;
}
