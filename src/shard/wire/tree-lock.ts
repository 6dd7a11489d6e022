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
 * in `WAITERS` so that an uncontended release skips `Atomics.notify`. A lookup that sees the
 * holder stop moving does not wait at all (`lockTreeReader`): it reads past it and gives its
 * ticket up, and releases skip given-up tickets. Validation is needed only on that rare path,
 * so unlike a seqlock it cannot starve readers: a read past that does not stand waits here.
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
  if ((old & SERVED) !== ticket) waitForTicket(h, ticket);
}

/** Sleeps in `Atomics.wait` until `ticket` is served, announced in `WAITERS`. */
function sleepForTicket(h: Int32Array, ticket: number): void {
  Atomics.add(h, H.WAITERS, 1);
  // The word also changes when another thread takes a ticket: `wait` then returns at once and
  // the loop looks again.
  let v: number;
  while (((v = Atomics.load(h, H.LOCK)) & SERVED) !== ticket) Atomics.wait(h, H.LOCK, v, 50);
  Atomics.sub(h, H.WAITERS, 1);
}

/**
 * Polls between two looks at the writer's `PROGRESS` (~0.6 us; a unit of writing takes
 * 0.1-1 us: unit-log.ts). Two looks without a move: the holder is taken as descheduled.
 */
const PROGRESS_POLLS = 128;

/**
 * A lookup's lock. Returns -1 once it holds the lock; or, when the holder stopped moving (no
 * unit of writing started or ended over two looks ~0.6 us apart, or `PROGRESS` is still
 * `stalledAt`, where the caller last read past it) and the ticket can join the run of this
 * thread's abandoned tickets, the ticket, still queued: the caller may then read past the
 * holder (tree-reader.ts) and give the ticket up (`abandonTicket`), or wait for it
 * (`waitForTicket`).
 *
 * Why: with three busy threads on two cores (the calling thread and two shards ingesting), a
 * holder is sometimes descheduled inside its write section; a reader then waited for the
 * scheduler to run it again (offered-load sweep at 2,000-7,000x on the 2-core dev VM: ~1 % of
 * lookups slept, 2-shard p99 41-60 us against 12-23 us in-thread).
 */
export function lockTreeReader(h: Int32Array, optimistic: boolean, stalledAt: number): number {
  const old = Atomics.add(h, H.LOCK, TICKET);
  const ticket = old >>> 16;
  if ((old & SERVED) === ticket) return -1;
  let seen = optimistic ? Atomics.load(h, H.PROGRESS) : 0;
  // Still where the last read past it found it: the holder has not run since, no need to watch
  // it again (a holder descheduled for a slice meets every lookup of that slice).
  if (optimistic && seen === stalledAt && canAbandon(Atomics.load(h, H.ABANDON), ticket)) return ticket;
  let still = 0;
  for (let i = 1; i <= SPINS; i++) {
    if ((Atomics.load(h, H.LOCK) & SERVED) === ticket) return -1;
    if (optimistic && (i & (PROGRESS_POLLS - 1)) === 0) {
      const p = Atomics.load(h, H.PROGRESS);
      if (p !== seen) {
        seen = p;
        still = 0;
      } else if (++still === 2 && canAbandon(Atomics.load(h, H.ABANDON), ticket)) {
        return ticket;
      }
    }
  }
  sleepForTicket(h, ticket);
  return -1;
}

/** Waits for a queued ticket (spinning, then sleeping): then the lock is held. */
export function waitForTicket(h: Int32Array, ticket: number): void {
  for (let i = 0; i < SPINS; i++) {
    if ((Atomics.load(h, H.LOCK) & SERVED) === ticket) return;
  }
  sleepForTicket(h, ticket);
}

/*
 * Abandoned tickets: a run of consecutive tickets, `ABANDON` = first ticket << 16 | count (0:
 * none). A holder descheduled for a scheduler slice (0.1-8 ms) sees many lookups of the calling
 * thread queue and give up their tickets; only the calling thread and the shard thread take
 * tickets, and the shard thread cannot take one while it holds the lock, so the calling
 * thread's abandoned tickets follow each other.
 */
const runFirst = (a: number): number => a >>> 16;
const runCount = (a: number): number => a & 0xffff;

/** Whether `ticket` can join the run of abandoned tickets `a`. */
function canAbandon(a: number, ticket: number): boolean {
  return a === 0 || ((runFirst(a) + runCount(a)) & SERVED) === ticket;
}

/**
 * Gives up a queued ticket (after a read past the holder): whoever sees it served releases it,
 * the holder in `unlockTree`, or this thread if it was served already.
 */
export function abandonTicket(h: Int32Array, ticket: number): void {
  for (;;) {
    const a = Atomics.load(h, H.ABANDON);
    const next = a === 0 ? (ticket << 16) | 1 : a + 1; // a run is never 2^16 long
    if (Atomics.compareExchange(h, H.ABANDON, a, next) === a) break;
  }
  // Served already: every ticket before it was released, so the run is this ticket alone.
  const alone = (ticket << 16) | 1;
  if ((Atomics.load(h, H.LOCK) & SERVED) === ticket && Atomics.compareExchange(h, H.ABANDON, alone, 0) === alone) {
    unlockTree(h);
  }
}

/**
 * Whether a reader is queued behind the holder (tickets handed out beyond the one served): a
 * writer checks it between steps of its section and ends the section early, so that a lookup
 * waits for one step, not a whole section.
 */
export function hasWaiter(h: Int32Array): boolean {
  const v = Atomics.load(h, H.LOCK);
  const queued = (((v >>> 16) - (v & SERVED)) & SERVED) - 1;
  if (queued <= 0) return false;
  // Tickets given up by lookups that read past this holder wait for nothing.
  const a = Atomics.load(h, H.ABANDON);
  return a === 0 || queued > runCount(a);
}

/**
 * Releases the lock; if a ticket is queued, releases it too when its owner abandoned it
 * (`abandonTicket`), and otherwise wakes sleepers if someone sleeps.
 */
export function unlockTree(h: Int32Array): void {
  // Only the holder changes the low half, so a plain read of it is exact here.
  const served = h[H.LOCK]! & SERVED;
  // The served half wraps to 0 without carrying into the tickets: add 1 - 2^16 instead of 1.
  const old = Atomics.add(h, H.LOCK, served === SERVED ? 1 - TICKET : 1);
  const next = (served + 1) & SERVED;
  if (old >>> 16 === next) return; // nobody queued
  for (;;) {
    // The next ticket was given up: take it out of the run and release it on its owner's
    // behalf. Retried if the calling thread lengthened the run meanwhile.
    const a = Atomics.load(h, H.ABANDON);
    if (a === 0 || runFirst(a) !== next) break;
    const rest = runCount(a) > 1 ? ((((next + 1) & SERVED) << 16) | (runCount(a) - 1)) : 0;
    if (Atomics.compareExchange(h, H.ABANDON, a, rest) === a) {
      unlockTree(h);
      return;
    }
  }
  if (Atomics.load(h, H.WAITERS) > 0) Atomics.notify(h, H.LOCK);
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
