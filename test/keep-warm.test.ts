/**
 * Keep-warm (option `keepWarmMs`, on by default): its checks and default; the tick's rule (no
 * prime after a lookup, none counted when the indexer cannot prime, the timer stops after its
 * linger without lookups and the next lookup starts it again); priming while idle with and without shard threads,
 * never while lookups come or after close; and answers unchanged by it: every lookup equals
 * the in-thread tree's at quiescent points while priming runs between them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode } from '../src/errors.js';
import { KeepWarm, LINGER_MS } from '../src/indexer/keep-warm.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { createMatchResult } from '../src/tree/match-result.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { sortedScores } from './support/compare.js';
import { prefixClosedEvents } from './support/prefix-closed-gen.js';
import { until } from './support/poll.js';

let open: ShardedIndexer[] = [];
afterEach(async () => {
  await Promise.all(open.map((ix) => ix.close()));
  open = [];
});

async function indexer(shards: number, keepWarmMs?: number, readYourWrites = true): Promise<ShardedIndexer> {
  const ix = await ShardedIndexer.create({ shards, blockSize: 16, readYourWrites, ...(keepWarmMs === undefined ? {} : { keepWarmMs }) });
  open.push(ix);
  return ix;
}

describe('keep-warm', () => {
  it.each([-1, 0.5, 60_001, Number.NaN, Infinity, '5'])('rejects keepWarmMs %s', async (keepWarmMs) => {
    await expect(ShardedIndexer.create({ shards: 0, blockSize: 16, keepWarmMs: keepWarmMs as number })).rejects.toMatchObject({
      code: ErrorCode.InvalidOption,
    });
  });

  it('rejects keepWarmMs with expirationMs (a lookup would record the frequency trail)', async () => {
    for (const shards of [0, 1]) {
      await expect(ShardedIndexer.create({ shards, blockSize: 16, keepWarmMs: 1, expirationMs: 1000 })).rejects.toMatchObject({
        code: ErrorCode.InvalidOption,
        message: expect.stringContaining('expirationMs'),
      });
    }
  });

  it('primes on a tick only when no lookup came since the last one, and counts only primes made', () => {
    let lookups = 0;
    let canPrime = true;
    let called = 0;
    let t = 0;
    const kw = new KeepWarm(60_000, { lookups: () => lookups, prime: () => (called++, canPrime) }, 10 * 60_000, () => (t += 60_000));
    try {
      kw.tick(); // first look at the count: no prime
      expect(called).toBe(0);
      kw.tick();
      kw.tick();
      expect([called, kw.primes]).toEqual([2, 2]);
      lookups++;
      kw.tick(); // a lookup came since the last tick
      expect(called).toBe(2);
      kw.tick();
      expect(called).toBe(3);
      canPrime = false;
      kw.tick();
      expect([called, kw.primes]).toEqual([4, 3]);
    } finally {
      kw.stop();
    }
  });

  it.each([0, 2])('primes while idle, never while lookups come, never after close (shards: %i)', async (shards) => {
    const ix = await indexer(shards, 1);
    const { events, docs } = prefixClosedEvents(7, 300);
    ix.applyEvents(events);
    await ix.flush();
    expect(ix.idle).toBe(true);
    // Polled, not a fixed 60 ms: ticks of 1 ms fire late on a loaded host (a stalled process
    // gets one tick per wake-up, and the first tick only notes the lookup count).
    await until('a prime while idle', () => ix.keepWarmPrimes > 0);

    // Lookups at every turn of the event loop: each tick follows a lookup.
    const before = ix.keepWarmPrimes;
    const stopAt = performance.now() + 40;
    let k = 0;
    while (performance.now() < stopAt) {
      await ix.findMatches(docs[k++ % docs.length]!);
      await new Promise((r) => setImmediate(r));
    }
    expect(ix.keepWarmPrimes).toBe(before);

    await ix.close();
    const closed = ix.keepWarmPrimes;
    await sleep(20);
    expect(ix.keepWarmPrimes).toBe(closed);
  });

  it.each([0, 1])('survives a latest lookup the caller gave bad values, and primes again after a good one (shards: %i)', async (shards) => {
    const ix = await indexer(shards, 1);
    const { events, docs } = prefixClosedEvents(5, 200);
    ix.applyEvents(events);
    await ix.flush();
    const bad = [1 as unknown as bigint, 2n];
    await expect(async () => ix.findMatchesSync(bad)).rejects.toThrow();
    await sleep(30);
    const stuck = ix.keepWarmPrimes; // each prime copies the bad value and gives up, uncounted
    await sleep(30);
    expect(ix.keepWarmPrimes).toBe(stuck);
    expect(sortedScores(await ix.findMatches(docs[0]!))).toEqual(sortedScores(await ix.findMatches(docs[0]!)));
    await until('a prime after the good lookup', () => ix.keepWarmPrimes > stuck);
  });

  it('disarms after its linger without a lookup, without priming then, and a wake re-arms it', () => {
    let lookups = 0;
    let called = 0;
    // A clock read as ticks come, one period apart (each read moves it by a period).
    let t = 0;
    const kw = new KeepWarm(60_000, { lookups: () => lookups, prime: () => (called++, true) }, 3 * 60_000, () => (t += 60_000));
    try {
      kw.tick(); // sees the count
      kw.tick();
      kw.tick();
      expect([called, kw.armed]).toEqual([2, true]);
      kw.tick(); // the linger has passed since the count last moved: disarms, no prime
      expect([called, kw.armed]).toEqual([2, false]);
      kw.wake();
      expect(kw.armed).toBe(true);
      kw.tick();
      kw.tick();
      expect(called).toBe(4); // the linger started again at the wake
      lookups++;
      kw.tick();
      kw.tick();
      kw.tick();
      expect([called, kw.armed]).toEqual([6, true]);
    } finally {
      kw.stop();
    }
    kw.wake(); // after stop: stays stopped
    expect(kw.armed).toBe(false);
  });

  it('lingers in wall time: ticks that fire late do not stretch it', () => {
    let now = 0;
    let called = 0;
    const kw = new KeepWarm(1, { lookups: () => 7, prime: () => (called++, true) }, 1000, () => now);
    try {
      kw.tick(); // sees the count at 0
      now = 600; // a loaded machine: the next tick comes 600 periods late
      kw.tick();
      expect([called, kw.armed]).toEqual([1, true]);
      now = 1000;
      kw.tick(); // 1 s since the last lookup, after 2 quiet ticks of the 1,000 a count would need
      expect([called, kw.armed]).toEqual([1, false]);
    } finally {
      kw.stop();
    }
  });

  it('is on by default, and off with keepWarmMs 0 or with expirationMs', async () => {
    const on = await indexer(1);
    const off = await indexer(1, 0);
    const trail = await ShardedIndexer.create({ shards: 1, blockSize: 16, expirationMs: 1000 });
    open.push(trail);
    await until('a prime with the default keepWarmMs', () => on.keepWarmPrimes > 0);
    await sleep(30); // ticks the other two would have had, were they on
    expect(off.keepWarmPrimes).toBe(0);
    expect(trail.keepWarmPrimes).toBe(0);
  });

  it.each([0, 2])('stops priming a second after the last lookup, and the next lookup starts it again (shards: %i)', async (shards) => {
    const ix = await indexer(shards);
    const { events, docs } = prefixClosedEvents(5, 200);
    ix.applyEvents(events);
    await ix.flush();
    await ix.findMatches(docs[0]!);
    await sleep(LINGER_MS + 200);
    // The linger is wall time, but a tick can still be late to see that it ended: wait, within
    // a liveness bound, until no prime comes for 100 ms.
    let lingered = ix.keepWarmPrimes;
    for (let i = 0; i < 100; i++) {
      await sleep(100);
      if (ix.keepWarmPrimes === lingered) break;
      lingered = ix.keepWarmPrimes;
    }
    expect(lingered).toBeGreaterThan(0);
    await sleep(100);
    expect(ix.keepWarmPrimes).toBe(lingered); // the timer stopped
    ix.findMatchesInto(docs[1]!, createMatchResult());
    await until('a prime after the waking lookup', () => ix.keepWarmPrimes > lingered);
  });

  it('is not idle while events wait to reach a shard, so no prime posts them early', async () => {
    const ix = await indexer(1, 60_000);
    const { events } = prefixClosedEvents(3, 50);
    ix.applyEvent(events[0]!);
    expect(ix.idle).toBe(false); // queued in the outbox
    await ix.flush();
    expect(ix.idle).toBe(true);
    await ix.close();
    expect(ix.idle).toBe(false);
  });

  it.each([
    [0, true],
    [2, true],
    [2, false],
  ])('leaves every answer as the in-thread tree gives it while it primes between events (shards: %i, readYourWrites: %s)', async (shards, ryw) => {
    const ix = await indexer(shards, 1, ryw);
    const ref = new RadixTree();
    const { events, docs } = prefixClosedEvents(11, 1200);
    for (let i = 0; i < events.length; i += 100) {
      const part = events.slice(i, i + 100);
      ix.applyEvents(part);
      for (const e of part) ref.applyEvent(e);
      await ix.flush();
      // A prime between these events and the lookups below, polled (a fixed 5 ms sleep could see
      // none on a loaded host, and the final count alone did not say it came in between).
      const primed = ix.keepWarmPrimes;
      await until('a prime between events', () => ix.keepWarmPrimes > primed);
      for (const d of docs) expect(sortedScores(await ix.findMatches(d))).toEqual(sortedScores(ref.findMatches(d)));
    }
    expect(ix.keepWarmPrimes).toBeGreaterThan(0);
  });
});
