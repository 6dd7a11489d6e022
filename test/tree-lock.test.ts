/**
 * The shard tree's ticket lock across two real threads: a reader that went to sleep waiting is
 * handed the lock by the writer's release (`unlockTreeHandoff`, which also steps the writer off
 * its CPU for a moment), in ticket order; a queued reader is visible to the writer (hasWaiter)
 * and no longer once served.
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { H, HEADER_WORDS } from '../src/tree/shared-layout.js';
import { hasWaiter, lockTree, unlockTree, unlockTreeHandoff } from '../src/shard/wire/tree-lock.js';
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
    const other = new Worker(
      `const { workerData, parentPort } = require('node:worker_threads');
       import(workerData.url).then(({ lockTree, unlockTree }) => {
         const { h, data, n } = workerData;
         parentPort.postMessage('ready');
         Atomics.wait(data, 2, 0); // both threads start together, so their sections overlap
         for (let i = 0; i < n; i++) {
           lockTree(h);
           const v = data[0]; // plain read-modify-write: only the lock makes it safe
           data[1] = v;
           data[0] = v + 1;
           unlockTree(h);
         }
         parentPort.postMessage('done');
       });`,
      { eval: true, workerData: { h, data, n: N, url: LOCK_JS } },
    );
    try {
      await new Promise((r) => other.once('message', r));
      const done = new Promise((r) => other.once('message', r));
      Atomics.store(data, 2, 1);
      Atomics.notify(data, 2);
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

/** The lock word's next ticket and ticket served. */
function tickets(h: Int32Array): number {
  return Atomics.load(h, H.LOCK) >>> 16;
}
function served(h: Int32Array): number {
  return Atomics.load(h, H.LOCK) & 0xffff;
}
