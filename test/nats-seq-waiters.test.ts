/**
 * The subscriber's waiters on stream sequences (`waitForSeq`): released by the commit that
 * reaches them and not before, rejected on their timeout or when the subscriber closes.
 */
import { describe, expect, it } from 'vitest';
import { SeqWaiters } from '../src/nats/seq-waiters.js';
import { PauseGate } from '../src/nats/pause-gate.js';

describe('SeqWaiters', () => {
  it('resolves at once when applied, and each waiter only once a release reaches its sequence', async () => {
    const w = new SeqWaiters();
    let applied = 5;
    await w.wait(5, () => applied, 1_000);
    const done: number[] = [];
    const a = w.wait(7, () => applied, 1_000).then(() => done.push(7));
    const b = w.wait(9, () => applied, 1_000).then(() => done.push(9));
    applied = 6;
    w.release(6);
    await new Promise((r) => setImmediate(r));
    expect(done).toEqual([]);
    w.release(8);
    await a;
    expect(done).toEqual([7]);
    w.release(9);
    await b;
    expect(done).toEqual([7, 9]);
  });

  it('rejects on timeout naming the applied sequence, and every waiter when closed', async () => {
    const w = new SeqWaiters();
    await expect(w.wait(3, () => 1, 10)).rejects.toThrow('stream sequence 3 not applied within 10 ms (applied: 1)');
    const pending = [w.wait(4, () => 2, 10_000), w.wait(5, () => 2, 10_000)];
    w.rejectAll(2);
    for (const p of pending) await expect(p).rejects.toThrow(/subscriber closed before stream sequence \d was applied \(applied: 2\)/);
    w.release(100); // nothing left to release
  });
});

describe('PauseGate', () => {
  it('pause() resolves once the loop paused, and the loop waits until resume()', async () => {
    const g = new PauseGate();
    let pausedResolved = false;
    const p = g.pause().then(() => (pausedResolved = true));
    expect(g.wanted).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(pausedResolved).toBe(false);
    let loopResumed = false;
    const loop = g.paused().then(() => (loopResumed = true));
    await p;
    await new Promise((r) => setImmediate(r));
    expect(loopResumed).toBe(false);
    g.resume();
    await loop;
    expect(g.wanted).toBe(false);
  });

  it('a loop that stops for good lets the pause() caller go', async () => {
    const g = new PauseGate();
    const p = g.pause();
    g.stopped();
    await p;
  });
});
