import { describe, expect, it } from 'vitest';
import { deriveWorkerIds } from '../src/trace/cluster-sim.js';
import { splitmix64, SyntheticTokens } from '../src/trace/synthetic-tokens.js';

const U64 = (1n << 64n) - 1n;
const GAMMA = 0x9e3779b97f4a7c15n;

function reference(seed: bigint, id: bigint, k: number, vocab: number): number {
  return Number(splitmix64((id * 512n + BigInt(k) + seed * GAMMA) & U64) % BigInt(vocab));
}

describe('SyntheticTokens', () => {
  it('matches splitmix64(id*512 + k + seed*gamma) mod vocab computed on bigints', () => {
    let x = 42n;
    for (const vocab of [32_000, 7, 151_936, 2 ** 21]) {
      for (const seed of [0n, 1n, U64]) {
        const gen = new SyntheticTokens(seed, vocab);
        for (let j = 0; j < 8; j++) {
          x = splitmix64(x);
          const id = j === 0 ? 0n : j === 1 ? U64 : j % 2 === 0 ? x : x >> 44n;
          const out = new Uint32Array(512);
          gen.fill(Number(id & 0xffffffffn), Number(id >> 32n), 0, 512, out, 0);
          const want = Array.from({ length: 512 }, (_, k) => reference(seed, id, k, vocab));
          expect(Array.from(out)).toEqual(want);
        }
      }
    }
  });

  it('fills a sub-range at an offset', () => {
    const gen = new SyntheticTokens(3n, 32_000);
    const all = new Uint32Array(512);
    gen.fill(77, 0, 0, 512, all, 0);
    const part = new Uint32Array(100);
    gen.fill(77, 0, 64, 64, part, 10);
    expect(Array.from(part.subarray(10, 74))).toEqual(Array.from(all.subarray(64, 128)));
  });
});

describe('deriveWorkerIds', () => {
  it('gives distinct ids above 2^53 and below 2^63, the same for the same seed', () => {
    const a = deriveWorkerIds(0n, 64);
    expect(new Set(a).size).toBe(64);
    for (const id of a) {
      expect(id > 2n ** 53n).toBe(true);
      expect(id < 2n ** 63n).toBe(true);
    }
    expect(deriveWorkerIds(0n, 64)).toEqual(a);
    expect(deriveWorkerIds(1n, 4)).not.toEqual(a.slice(0, 4));
  });
});
