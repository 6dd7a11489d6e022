/**
 * Fleets for the scaling tests and benchmarks: `workers` workers that each store one chain
 * starting with a prompt shared with the others (a system prompt), then private blocks. Shapes:
 * `shared` (one prompt for the whole fleet) and `groups` (groups of `groupSize` workers share
 * a group prompt). Hashes are the workers' own (salted by worker), tokens hashes are shared.
 */
import type { RouterEvent } from '../src/protocol/types.js';

const MASK64 = (1n << 64n) - 1n;

/** splitmix64 finaliser on bigints: a stand-in for the engines' chained block hashing. */
export function mix64(x: bigint): bigint {
  let z = (x + 0x9e3779b97f4a7c15n) & MASK64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return z ^ (z >> 31n);
}

export interface Fleet {
  workers: bigint[];
  /** Each worker's Stored event (its whole chain). */
  events: RouterEvent[];
  /** Each worker's chain as tokens hashes (a lookup that matches it fully). */
  chains: BigUint64Array[];
  /** Tokens hashes of the shared (or first group's) prompt. */
  prompt: BigUint64Array;
}

export function fleet(workers: number, shape: 'shared' | 'groups', sharedBlocks = 48, privateBlocks = 16, groupSize = 64): Fleet {
  const ids = Array.from({ length: workers }, (_, i) => 0x694d_99ba_db9f_0000n + BigInt(i) * 7919n);
  const events: RouterEvent[] = [];
  const chains: BigUint64Array[] = [];
  const promptOf = (g: number): bigint[] => Array.from({ length: sharedBlocks }, (_, i) => mix64(BigInt(g) * 1_000_003n + BigInt(i) + 1n));
  for (let w = 0; w < workers; w++) {
    const group = shape === 'shared' ? 0 : Math.floor(w / groupSize);
    const toks = [...promptOf(group), ...Array.from({ length: privateBlocks }, (_, i) => mix64(BigInt(w) * 65_537n + BigInt(i) + 0x5eedn))];
    const id = ids[w]!;
    let h = id;
    const blocks = toks.map((t) => {
      h = mix64(h ^ t);
      return { blockHash: h, tokensHash: t };
    });
    events.push({ workerId: id, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks } } });
    chains.push(BigUint64Array.from(toks));
  }
  return { workers: ids, events, chains, prompt: BigUint64Array.from(promptOf(0)) };
}
