/**
 * Lookups by tokens that match nothing (lookup suite): `findMatchesForTokensSync`, which hashes
 * the first block alone and stops there when no worker holds it (sharded-indexer.ts), beside
 * what the call did before, in the same rounds: hash every block, then `findMatchesSync`.
 * Prompts of random tokens, 1,024 and 8,192 tokens (16 and 128 blocks of 64), on the indexers
 * the suite loaded (the conversation workload's final tree).
 */
import { computeBlockHashes } from '../src/hash/block-hash.js';
import type { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { concatLatencies, percentile, quiesce, table } from './suite.js';

type Row = Record<string, string | number | boolean>;
const BLOCK_SIZE = 64;
const PROMPTS = 64;
const r2 = (x: number): number => Math.round(x * 100) / 100;

/** `PROMPTS` prompts of `n` random tokens (xorshift, seeded: the same prompts on every side). */
function prompts(n: number, seed: number): Uint32Array[] {
  let x = seed | 1;
  return Array.from({ length: PROMPTS }, () => {
    const p = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      p[i] = x >>> 0;
    }
    return p;
  });
}

/** `n` timed calls of `call(i)` (after 1,000 untimed), microseconds. */
function time(n: number, call: (i: number) => unknown): Float64Array {
  const lat = new Float64Array(n);
  for (let i = 0; i < n + 1000; i++) {
    const t0 = performance.now();
    call(i);
    const dt = performance.now() - t0;
    if (i >= 1000) lat[i - 1000] = dt * 1000;
  }
  return lat;
}

function stats(lat: Float64Array): Row {
  lat.sort();
  return {
    lookups: lat.length,
    'p50 us': r2(percentile(lat, 50)), 'p99 us': r2(percentile(lat, 99)),
    'p99.9 us': r2(percentile(lat, 99.9)), 'max us': r2(lat[lat.length - 1]!),
  };
}

export async function tokensRows(sides: ReadonlyArray<{ shards: number; ix: ShardedIndexer }>, quick: boolean): Promise<{ rows: Row[]; markdown: string }> {
  const n = quick ? 3_000 : 20_000;
  const rounds = 3;
  const rows: Row[] = [];
  const notes: string[] = [];
  for (const tokens of [1_024, 8_192]) {
    const set = prompts(tokens, tokens);
    for (const { shards, ix } of sides) {
      // Every prompt must match nothing, or the rows would compare different lookups.
      const matched = set.filter((p) => ix.findMatchesSync(computeBlockHashes(p, BLOCK_SIZE)).scores.size > 0).length;
      const eager: Float64Array[] = [];
      const lazy: Float64Array[] = [];
      const cut0 = ix.firstBlockMisses;
      for (let round = 0; round < rounds; round++) {
        await quiesce(50);
        eager.push(time(n, (i) => ix.findMatchesSync(computeBlockHashes(set[i % PROMPTS]!, BLOCK_SIZE))));
        await quiesce(50);
        lazy.push(time(n, (i) => ix.findMatchesForTokensSync(set[i % PROMPTS]!)));
      }
      const cut = ix.firstBlockMisses - cut0;
      const e = stats(concatLatencies(eager));
      const l = stats(concatLatencies(lazy));
      rows.push({ shards, tokens, lookup: 'hash every block, then findMatchesSync (the call before)', ...e });
      rows.push({ shards, tokens, lookup: 'findMatchesForTokensSync (first block alone)', ...l });
      notes.push(
        `shards ${shards}, ${tokens.toLocaleString('en-US')} tokens: p50 ${r2((e['p50 us'] as number) / (l['p50 us'] as number))}x lower ` +
          `(${cut.toLocaleString('en-US')} of ${(rounds * (n + 1000)).toLocaleString('en-US')} calls cut short; prompts matching something: ${matched})`,
      );
    }
  }
  const markdown =
    `**Lookups by tokens that match nothing**: ${PROMPTS} prompts of random tokens per size, blocks of ${BLOCK_SIZE}, on the indexers above ` +
    '(keep-warm off), the two calls alternating in 3 rounds. `findMatchesForTokensSync` hashes the first block alone and ' +
    'stops when no worker holds it at the start of a sequence (src/indexer/sharded-indexer.ts); the other row is what it did ' +
    `before: hash every block, then look them up. ${notes.join('; ')}.\n\n${table(rows)}`;
  return { rows, markdown };
}
