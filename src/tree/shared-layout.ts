/**
 * The part of a shard's tree that lookups on another thread read, in shared memory: the edge
 * table (two buffers: a resized table is built in the inactive one while readers keep using
 * the active one, then switched), each node's parent and its record (tokens-hash key, first
 * child and worker set), the overflow pairs' worker and next links and their lists' counts
 * and fingerprints, the slots' fingerprint keys, and the slot -> worker id table. Everything
 * else (the per-worker external-hash lookups, sibling links, free lists) stays private to the
 * shard thread, as in Dynamo.
 *
 * `header` (Int32) words are listed in `H`; the tree writes `GEN`, `EDGE_*` and `SLOTS`, the
 * shard's lock (src/shard/wire/tree-lock.ts) the rest. Readers take the lock, then rebuild their
 * views if `GEN` moved.
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
} as const;

export const HEADER_WORDS = 16;

export interface SharedTreeLayout {
  header: SharedArrayBuffer;
  parent: SharedArrayBuffer;
  /** Node records: tokens hash halves, first child, worker set word (node-store.ts). */
  node: SharedArrayBuffer;
  pWorker: SharedArrayBuffer;
  pNext: SharedArrayBuffer;
  /** Overflow lists' counts and fingerprints (node-store.ts, 3 words per pair). */
  pSet: SharedArrayBuffer;
  keyLo: SharedArrayBuffer;
  keyHi: SharedArrayBuffer;
  edgesA: SharedArrayBuffer;
  edgesB: SharedArrayBuffer;
  slotLo: SharedArrayBuffer;
  slotHi: SharedArrayBuffer;
  /** Member arrays (member-arrays.ts): offset at each list head, and the members' id words. */
  pMOff: SharedArrayBuffer;
  mIds: SharedArrayBuffer;
}
