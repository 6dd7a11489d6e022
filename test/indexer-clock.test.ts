/** `IndexerClock`: which stretches of time `kvindex replay` counts as indexer time. */
import { describe, expect, it } from 'vitest';
import { IndexerClock } from '../src/cli/indexer-clock.js';

/** A clock whose time the test sets. */
function manual(): { now: () => number; at: (t: number) => void } {
  let t = 0;
  return { now: () => t, at: (v) => (t = v) };
}

describe('IndexerClock', () => {
  it('in-thread, counts only the time inside calls', () => {
    const c = manual();
    const clock = new IndexerClock(false, c.now);
    clock.begin();
    c.at(2);
    clock.enqueued(); // an in-thread apply did its work before returning
    c.at(10); // the caller parses the next line: not indexer time
    clock.begin();
    c.at(11);
    clock.enqueued();
    c.at(20);
    clock.begin();
    c.at(25);
    clock.idle(); // flush
    expect(clock.ms).toBe(2 + 1 + 5);
    expect(clock.busy).toBe(false);
  });

  it('with shard threads, counts wall time from the first enqueue through the flush', () => {
    const c = manual();
    const clock = new IndexerClock(true, c.now);
    clock.begin();
    c.at(2);
    clock.enqueued(); // the shards are still applying
    expect(clock.busy).toBe(true);
    c.at(10);
    clock.begin(); // does not restart the open span
    c.at(11);
    clock.enqueued();
    c.at(20);
    clock.begin();
    c.at(25);
    clock.idle(); // flush resolved: the shards caught up
    expect(clock.ms).toBe(25);
    expect(clock.busy).toBe(false);
  });

  it('with shard threads, does not count the time between a lookup reply and the next call', () => {
    const c = manual();
    const clock = new IndexerClock(true, c.now);
    clock.begin();
    c.at(3);
    clock.enqueued();
    c.at(4);
    clock.begin(); // lookup
    c.at(7);
    clock.idle(); // its reply: every earlier event is applied
    c.at(100); // the simulation's own work, no indexer call pending
    clock.begin();
    c.at(101);
    clock.enqueued();
    c.at(104);
    clock.begin();
    c.at(106);
    clock.idle();
    expect(clock.ms).toBe(7 + 6);
  });

  it('ignores idle() with no open span', () => {
    const c = manual();
    const clock = new IndexerClock(true, c.now);
    c.at(5);
    clock.idle();
    expect(clock.ms).toBe(0);
  });
});
