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
      await until(() => Atomics.load(h, H.SERVING) === 2, 10_000, 'the reader released');
      expect(Atomics.load(h, H.TICKET)).toBe(2);
      expect(Atomics.load(h, H.WAITERS)).toBe(0);
      expect(hasWaiter(h)).toBe(false);
      // Uncontended: a release with no sleeper, and the lock is free again.
      lockTree(h);
      unlockTreeHandoff(h);
      lockTree(h);
      unlockTree(h);
      expect(Atomics.load(h, H.SERVING)).toBe(4);
    } finally {
      await reader.terminate();
    }
  });
});
