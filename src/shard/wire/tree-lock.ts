/**
 * A fair FIFO ticket lock over a shard tree's header words (src/tree/shared-layout.ts): the
 * shard thread holds it for a bounded write section (what readers can see of one event, at
 * most `WRITE_SECTION_BLOCKS` steps; the rest of the event's work is done outside:
 * src/shard/thread/apply-batch.ts), a lookup on the calling thread for its walk of that
 * shard. Measured on the 2-core dev VM before it was built: about +35 ns per shard when idle,
 * reader p99 19-57 us with the writer saturated, where a seqlock alone starved readers (p99
 * 20-100 ms) under constant writes.
 *
 * A waiter spins first: a release is seen within 0.2-3 us by spinning, against 3-44 us (p99 up
 * to 150 us) to wake from `Atomics.wait`. It sleeps only after `SPINS` polls, announcing itself
 * in `WAITERS` so that an uncontended release skips `Atomics.notify`.
 */
import { H } from '../../tree/shared-layout.js';

/**
 * Steps per write section (blocks a worker joins or leaves, one for a new chain): ~10 us of
 * writing on the dev VM. 16 and 64 measured the same within noise (lookup p99 37-61 us while 2
 * shards ingest, when sections held whole batches).
 */
export const WRITE_SECTION_BLOCKS = 32;

/**
 * Polls before sleeping, ~10 us. Measured with lookups while 2 shards ingest the conversation
 * workload on the 2-core dev VM: 100 polls gave lookup p99 102-180 us (a waiter that sleeps
 * early pays the wake-up), 2,000 gave 37-47 us, 10,000 gave 18-28 us but burns a core the
 * shards need when a holder was preempted.
 */
const SPINS = 2000;

/** One ticket in the lock word's high half; the ticket served is its low half. */
const TICKET = 0x10000;
const SERVED = 0xffff;

/**
 * Why one word: taking the lock is then a single `Atomics.add` (the ticket and the ticket served
 * come back together) and an uncontended release a single `Atomics.add`, against two atomics
 * each with separate words. In Node 20 an atomic is a call, ~13-17 ns on the 2-core dev VM: a
 * lock and release measured 50 ns with two words, 22 ns with one (a 2-shard lookup takes two).
 * Tickets count modulo 2^16: only the shard thread and the calling thread take a shard's lock.
 */

/** Takes the lock (blocking: spin, then `Atomics.wait`). */
export function lockTree(h: Int32Array): void {
  const old = Atomics.add(h, H.LOCK, TICKET);
  const ticket = old >>> 16;
  if ((old & SERVED) === ticket) return;
  for (let i = 0; i < SPINS; i++) {
    if ((Atomics.load(h, H.LOCK) & SERVED) === ticket) return;
  }
  Atomics.add(h, H.WAITERS, 1);
  // The word also changes when another thread takes a ticket: `wait` then returns at once and
  // the loop looks again.
  let v: number;
  while (((v = Atomics.load(h, H.LOCK)) & SERVED) !== ticket) Atomics.wait(h, H.LOCK, v, 50);
  Atomics.sub(h, H.WAITERS, 1);
}

/**
 * Whether a reader is queued behind the holder (tickets handed out beyond the one served): a
 * writer checks it between steps of its section and ends the section early, so that a lookup
 * waits for one step, not a whole section.
 */
export function hasWaiter(h: Int32Array): boolean {
  const v = Atomics.load(h, H.LOCK);
  return (((v >>> 16) - (v & SERVED)) & SERVED) > 1;
}

/** Releases the lock; wakes sleepers only if a ticket is queued and someone sleeps. */
export function unlockTree(h: Int32Array): void {
  // Only the holder changes the low half, so a plain read of it is exact here.
  const served = h[H.LOCK]! & SERVED;
  // The served half wraps to 0 without carrying into the tickets: add 1 - 2^16 instead of 1.
  const old = Atomics.add(h, H.LOCK, served === SERVED ? 1 - TICKET : 1);
  if (old >>> 16 !== ((served + 1) & SERVED) && Atomics.load(h, H.WAITERS) > 0) Atomics.notify(h, H.LOCK);
}

/**
 * How long a writer steps off its CPU after waking a reader that slept on the lock: the reader
 * gets that core at once instead of waiting for the scheduler to give it one. On the 2-core dev
 * VM, with 3 busy threads, a woken reader otherwise waited up to a scheduler slice (0.1-8 ms):
 * lookup p99 in the offered-load sweep at 2,000-10,000x measured 13-39 us without the step and
 * 10-23 us with 20 us (5 us: 9-24 us, 50 us: 26-37 us; 4 runs each), and lookups while 2 shards
 * ingest p99 7-31 us without, 6-9 us with, ingestion unchanged. It costs the writer only when a reader
 * slept (~100-150 times per sweep window at 5,000x), never on an uncontended release.
 */
const HANDOFF_MS = 0.02;

/** A writer's release: `unlockTree`, then a step off the CPU if a reader was asleep on the lock. */
export function unlockTreeHandoff(h: Int32Array): void {
  const sleeper = Atomics.load(h, H.WAITERS) > 0;
  unlockTree(h);
  if (sleeper) Atomics.wait(h, H.HANDOFF, Atomics.load(h, H.HANDOFF), HANDOFF_MS);
}
