import { describe, expect, it } from 'vitest';
import { U64SlotMap } from '../src/trace/u64-slot-map.js';
import { WorkerCache } from '../src/trace/worker-cache.js';

/** A request's blocks as (lo, hi) words; names map to distinct u64 hashes. */
function seq(...names: string[]): Uint32Array {
  const big = BigUint64Array.from(names, (n) => hashOf(n));
  return new Uint32Array(big.buffer);
}

function hashOf(name: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const c of name) h = ((h ^ BigInt(c.charCodeAt(0))) * 0x100000001b3n) & ((1n << 64n) - 1n);
  return h;
}

function held(cache: WorkerCache, names: string[]): string[] {
  return names.filter((n) => {
    const h = hashOf(n);
    return cache.has(Number(h & 0xffffffffn), Number(h >> 32n));
  });
}

/** Serves a request: match, then store min(n, capacity) blocks; returns the evicted names. */
function serve(cache: WorkerCache, universe: string[], ...names: string[]): string[] {
  const words = seq(...names);
  const hit = cache.match(words, names.length);
  const evicted: number[] = [];
  cache.serve(words, hit, Math.min(names.length, cache.capacity), evicted);
  const byHash = new Map(universe.map((n) => [hashOf(n), n]));
  const out: string[] = [];
  for (let i = 0; i < evicted.length; i += 2) out.push(byHash.get((BigInt(evicted[i + 1]!) << 32n) | BigInt(evicted[i]!))!);
  return out;
}

describe('WorkerCache', () => {
  const all = ['r', 'a1', 'a2', 'a3', 'b1', 'b2', 'c1', 'c2', 'x1', 'x2', 'd1'];

  it('matches the held prefix only', () => {
    const cache = new WorkerCache(8);
    serve(cache, all, 'r', 'a1', 'a2');
    expect(cache.match(seq('r', 'a1', 'b1'), 3)).toBe(2);
    expect(cache.match(seq('b1', 'r'), 2)).toBe(0);
  });

  it('evicts leaves first, least recently used first', () => {
    const cache = new WorkerCache(4);
    serve(cache, all, 'r', 'a1', 'a2');
    serve(cache, all, 'r', 'b1'); // r touched again; leaves: a2 (older), b1
    expect(serve(cache, all, 'c1')).toEqual(['a2']);
    // leaves now a1 (older than b1, since a parent is stamped before its child) and b1, c1
    expect(serve(cache, all, 'c1', 'c2')).toEqual(['a1']);
    expect(held(cache, all).sort()).toEqual(['b1', 'c1', 'c2', 'r']);
  });

  it('never evicts the matched prefix of the request being served', () => {
    const cache = new WorkerCache(3);
    serve(cache, all, 'r', 'a1', 'a2');
    expect(serve(cache, all, 'r', 'x1', 'x2')).toEqual(['a2', 'a1']);
    expect(held(cache, all).sort()).toEqual(['r', 'x1', 'x2']);
  });

  it('stores at most its capacity of a longer request', () => {
    const cache = new WorkerCache(2);
    serve(cache, all, 'r', 'a1', 'a2', 'a3');
    expect(cache.size).toBe(2);
    expect(held(cache, all)).toEqual(['r', 'a1']);
  });

  it('stays prefix-closed and within capacity under random requests', () => {
    let state = 7;
    const rand = (n: number): number => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return state % n;
    };
    const cache = new WorkerCache(40);
    for (let r = 0; r < 1000; r++) {
      // Requests are paths in a small random tree: prefix ids depend on the parent.
      const len = 1 + rand(12);
      const names: string[] = [];
      let path = '';
      for (let i = 0; i < len; i++) {
        path += `/${rand(3)}`;
        names.push(path);
      }
      serve(cache, [], ...names.map(String));
      expect(cache.size).toBeLessThanOrEqual(40);
      cache.forEach((_lo, _hi, parent) => {
        if (parent !== null) expect(cache.has(parent.lo, parent.hi)).toBe(true);
      });
    }
  });
});

describe('U64SlotMap', () => {
  it('agrees with a Map under random set/delete/get (tiny table, many collisions)', () => {
    const map = new U64SlotMap(4);
    const ref = new Map<string, number>();
    let state = 1;
    const rand = (n: number): number => {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      return state % n;
    };
    const keys = Array.from({ length: 200 }, (_, i) => [rand(2 ** 32), i % 3 === 0 ? 0 : rand(2 ** 32)] as const);
    for (let step = 0; step < 20_000; step++) {
      const [lo, hi] = keys[rand(keys.length)]!;
      const k = `${lo}:${hi}`;
      const op = rand(3);
      if (op === 0) {
        map.set(lo, hi, step);
        ref.set(k, step);
      } else if (op === 1) {
        expect(map.delete(lo, hi)).toBe(ref.delete(k));
      } else {
        expect(map.get(lo, hi)).toBe(ref.get(k) ?? -1);
      }
      expect(map.size).toBe(ref.size);
    }
    for (const [lo, hi] of keys) expect(map.get(lo, hi)).toBe(ref.get(`${lo}:${hi}`) ?? -1);
  });
});
