/**
 * The shard tree's ticket lock across two real threads: a reader that went to sleep waiting is
 * handed the lock by the writer's release (`unlockTreeHandoff`, which also steps the writer off
 * its CPU for a moment), in ticket order; a queued reader is visible to the writer (hasWaiter)
 * and no longer once served. A lookup that finds the holder stopped (its `PROGRESS` still) gets
 * its ticket back to read past it and give it up; the holder's release then skips the run of
 * given-up tickets, and a ticket given up after it was served is released by its owner.
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { H, HEADER_WORDS } from '../src/tree/shared-layout.js';
import {
  abandonTicket, hasWaiter, lockTree, lockTreeReader, unlockTree, unlockTreeHandoff, waitForTicket,
} from '../src/shard/wire/tree-lock.js';
import { until } from './support/vllm-publisher.js';

const LOCK_JS = new URL('../dist/src/shard/wire/tree-lock.js', import.meta.url).href;

describe('tree lock', () => {
  it('hands the lock to a reader asleep on it, in ticket order', async () => {
    const h = new Int32Array(new SharedArrayBuffer(HEADER_WORDS * 4));
    lockTree(h); // the writer holds ticket 0
    const reader = new Worker(
      `const { workerData, parentPort } = require('node:worker_threads');
       import(workerData.url).then(({ lockTree, unlockTree }) => {
         lockTree(workerData.h);
         parentPort.postMessage('locked');
         unlockTree(workerData.h);
       });`,
      { eval: true, workerData: { h, url: LOCK_JS } },
    );
    try {
      const locked = new Promise((r) => reader.once('message', r));
      await until(() => Atomics.load(h, H.WAITERS) === 1, 10_000, 'the reader asleep on the lock');
      expect(hasWaiter(h)).toBe(true);
      unlockTreeHandoff(h);
      expect(await locked).toBe('locked');
      await until(() => served(h) === 2, 10_000, 'the reader released');
      expect(tickets(h)).toBe(2);
      expect(Atomics.load(h, H.WAITERS)).toBe(0);
      expect(hasWaiter(h)).toBe(false);
      // Uncontended: a release with no sleeper, and the lock is free again.
      lockTree(h);
      unlockTreeHandoff(h);
      lockTree(h);
      unlockTree(h);
      expect(served(h)).toBe(4);
      expect(tickets(h)).toBe(4);
    } finally {
      await reader.terminate();
    }
  });

  it('counts tickets modulo 2^16: an uncontended lock wraps without blocking or carrying', () => {
    const h = new Int32Array(new SharedArrayBuffer(HEADER_WORDS * 4));
    h[H.LOCK] = (0xfffd << 16) | 0xfffd;
    for (let i = 0; i < 6; i++) {
      lockTree(h); // would spin then sleep forever if a wrap broke the halves
      expect(hasWaiter(h)).toBe(false);
      unlockTree(h);
    }
    expect(tickets(h)).toBe(3);
    expect(served(h)).toBe(3);
  });

  it('excludes: two threads adding under the lock across the wrap lose no update', async () => {
    const h = new Int32Array(new SharedArrayBuffer(HEADER_WORDS * 4));
    h[H.LOCK] = (0xff00 << 16) | 0xff00; // 2 x 20,000 acquisitions wrap the halves
    const data = new Int32Array(new SharedArrayBuffer(12)); // counter, scratch, start flag
    const N = 20_000;
    const { other, done } = await startAdder(h, data, N, '');
    try {
      for (let i = 0; i < N; i++) {
        lockTree(h);
        const v = data[0]!;
        data[1] = v;
        data[0] = v + 1;
        unlockTree(h);
      }
      await done;
      expect(data[0]).toBe(2 * N);
      expect(tickets(h)).toBe((0xff00 + 2 * N) & 0xffff);
      expect(served(h)).toBe(tickets(h));
    } finally {
      await other.terminate();
    }
  });
});

describe('tickets given up by reads past a stopped holder', () => {
  it('are skipped by the holder\'s release, as a run, and are no waiters', () => {
    const h = new Int32Array(new SharedArrayBuffer(HEADER_WORDS * 4));
    h[H.LOCK] = (0xfffe << 16) | 0xfffe; // the run crosses the wrap
    lockTree(h); // the holder: ticket 0xfffe, and it does not move (PROGRESS stays)
    const first = lockTreeReader(h, true, NaN); // watches PROGRESS, then hands the ticket back
    expect(first).toBe(0xffff);
    abandonTicket(h, first);
    expect(hasWaiter(h)).toBe(false);
    // Still stopped where the last read found it: the next tickets come back without watching.
    const p = Atomics.load(h, H.PROGRESS);
    const second = lockTreeReader(h, true, p);
    expect(second).toBe(0);
    abandonTicket(h, second);
    const third = lockTreeReader(h, true, p);
    abandonTicket(h, third);
    expect(Atomics.load(h, H.ABANDON)).toBe((0xffff << 16) | 3);
    expect(hasWaiter(h)).toBe(false);
    unlockTree(h);
    expect(served(h)).toBe(2);
    expect(tickets(h)).toBe(2);
    expect(Atomics.load(h, H.ABANDON)).toBe(0);
    lockTree(h); // free again: would spin then sleep forever if a given-up ticket were left
    unlockTree(h);
  });

  it('a ticket served before it is given up is released by its owner; a moving holder is waited for', () => {
    const h = new Int32Array(new SharedArrayBuffer(HEADER_WORDS * 4));
    lockTree(h);
    const t = lockTreeReader(h, true, NaN);
    expect(t).toBe(1);
    expect(hasWaiter(h)).toBe(true);
    unlockTree(h); // serves ticket 1: the reader holds the lock without knowing it
    expect(served(h)).toBe(1);
    abandonTicket(h, t);
    expect(served(h)).toBe(2);
    expect(Atomics.load(h, H.ABANDON)).toBe(0);
    // Without reads past the holder (or with one given up) the ticket is waited for as usual.
    lockTree(h);
    const u = lockTreeReader(h, true, NaN);
    unlockTree(h);
    waitForTicket(h, u);
    expect(served(h)).toBe(u);
    unlockTree(h);
    expect(lockTreeReader(h, false, NaN)).toBe(-1);
    unlockTree(h);
    expect(served(h)).toBe(tickets(h));
  });

  it('across threads: a writer that stalls in its sections, a reader that reads past it or waits, no update lost', async () => {
    // Reading past needs the two threads to overlap in time; with two test files running at once
    // on two cores a run can see none, so the scenario is repeated (each run checks that no update
    // is lost) until one read past the holder, at most 20 times (5 were not enough once, with
    // two suites and a benchmark on the two cores; a run takes ~1.3 s).
    let pastSeen = 0;
    for (let run = 0; run < 20 && pastSeen === 0; run++) pastSeen = await stalledWriterRun();
    expect(pastSeen).toBeGreaterThan(0);
  }, 120_000);
});

/** One run of the stalled-writer scenario: asserts that no update is lost; returns the reads past. */
async function stalledWriterRun(): Promise<number> {
  {
    const h = new Int32Array(new SharedArrayBuffer(HEADER_WORDS * 4));
    h[H.LOCK] = (0xff00 << 16) | 0xff00;
    const data = new Int32Array(new SharedArrayBuffer(12)); // counter, scratch, start flag
    const N = 20_000;
    // Every 16th section stops moving for a while (PROGRESS, word 16, still), as a descheduled
    // holder does; the others move (a unit started and ended).
    const { other, done } = await startAdder(h, data, N, `
      if (i % 16 === 0) { const t = Date.now(); while (Date.now() - t < 1) {} }
      else { h[16] = (h[16] + 2) | 0; }`);
    try {
      let locked = 0;
      let past = 0;
      let stalledAt = NaN;
      for (let i = 0; i < N; i++) {
        const t = lockTreeReader(h, true, stalledAt);
        if (t >= 0 && i % 3 !== 0) {
          past++; // read past the holder: no update, the ticket given up
          stalledAt = Atomics.load(h, H.PROGRESS);
          abandonTicket(h, t);
          continue;
        }
        if (t >= 0) waitForTicket(h, t); // as after a read that did not stand
        locked++;
        const v = data[0]!;
        data[1] = v;
        data[0] = v + 1;
        unlockTree(h);
      }
      await done;
      expect(data[0]).toBe(N + locked);
      expect(served(h)).toBe(tickets(h));
      expect(tickets(h)).toBe((0xff00 + 2 * N) & 0xffff);
      expect(Atomics.load(h, H.ABANDON)).toBe(0);
      return past;
    } finally {
      await other.terminate();
    }
  }
}

/**
 * A thread that adds 1 to `data[0]` `n` times under the lock, with a plain read-modify-write
 * (only the lock makes it safe), running `inSection` (code, with `i` and `h`) before each
 * release. Both threads start together once it is ready, so that their sections overlap.
 */
async function startAdder(
  h: Int32Array, data: Int32Array, n: number, inSection: string,
): Promise<{ other: Worker; done: Promise<unknown> }> {
  const other = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
     import(workerData.url).then(({ lockTree, unlockTree }) => {
       const { h, data, n } = workerData;
       parentPort.postMessage('ready');
       Atomics.wait(data, 2, 0);
       for (let i = 0; i < n; i++) {
         lockTree(h);
         const v = data[0];
         data[1] = v;
         data[0] = v + 1;
         ${inSection}
         unlockTree(h);
       }
       parentPort.postMessage('done');
     });`,
    { eval: true, workerData: { h, data, n, url: LOCK_JS } },
  );
  await new Promise((r) => other.once('message', r));
  const done = new Promise((r) => other.once('message', r));
  Atomics.store(data, 2, 1);
  Atomics.notify(data, 2);
  return { other, done };
}

/** The lock word's next ticket and ticket served. */
function tickets(h: Int32Array): number {
  return Atomics.load(h, H.LOCK) >>> 16;
}
function served(h: Int32Array): number {
  return Atomics.load(h, H.LOCK) & 0xffff;
}
