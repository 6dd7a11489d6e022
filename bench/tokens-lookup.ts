/**
 * Lookups by tokens (lookup suite): `findMatchesForTokensSync`, which from `CUT_MIN_TOKENS` tokens
 * on may stop after hashing the first block (no worker holds it) or the first `PREFIX_BLOCKS`
 * blocks (every score below that: tokens-cut.ts), beside what the call did before, in the
 * same rounds: hash every block, then `findMatchesSync`. Prompts of random tokens, 1,024 and
 * 8,192 tokens (16 and 128 blocks of 64), on the indexers the suite loaded (the conversation
 * workload's final tree): prompts that match nothing, where the first block saves the rest;
 * prompts whose first 4 blocks a worker holds (stored for the rows), where the prefix saves the
 * rest; and prompts whose first 48 blocks it holds, which pay what does not cut.
 */
import { computeBlockHashes, computeSequenceHashes } from '../src/hash/block-hash.js';
import { PREFIX_BLOCKS, SAMPLE } from '../src/indexer/cut-gate.js';
import { CUT_MIN_TOKENS, type ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { concatLatencies, latencyStats as stats, quiesce, table } from './suite.js';

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

/**
 * `n` timed calls of each of `a(i)` and `b(i)` (after 1,000 untimed), interleaved call by call,
 * the order swapped every call (the second call of a pair finds the prompt in the caches):
 * microseconds, one array per call.
 */
function timePairs(n: number, a: (i: number) => unknown, b: (i: number) => unknown): [Float64Array, Float64Array] {
  const la = new Float64Array(n);
  const lb = new Float64Array(n);
  for (let i = 0; i < n + 1000; i++) {
    const first = (i & 1) === 0 ? a : b;
    const second = first === a ? b : a;
    const t0 = performance.now();
    first(i);
    const t1 = performance.now();
    second(i);
    const t2 = performance.now();
    if (i < 1000) continue;
    (first === a ? la : lb)[i - 1000] = (t1 - t0) * 1000;
    (first === a ? lb : la)[i - 1000] = (t2 - t1) * 1000;
  }
  return [la, lb];
}


/** A worker id no workload uses: it holds the matching prompts' first blocks. */
const HOLDER = 0xfeed_0000_0000_0001n;
/** Blocks of each matching prompt its holder stores: none, a few (under the prefix), many. */
const HELD = [0, 4, 48] as const;

/** Stores the first `held` blocks of every prompt for `HOLDER` (the indexers are closed after). */
async function hold(ix: ShardedIndexer, set: Uint32Array[], held: number): Promise<void> {
  let id = 0n;
  for (const p of set) {
    const local = computeBlockHashes(p.subarray(0, held * BLOCK_SIZE), BLOCK_SIZE);
    const seq = computeSequenceHashes(local);
    ix.applyEvent({
      workerId: HOLDER,
      event: { eventId: id++, data: { type: 'stored', parentHash: null, blocks: Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash })) } },
    });
  }
  await ix.flush();
}

/**
 * `conversation`: the conversation trace's prompts of 8,192 tokens or more, cut to 8,192
 * (bench/hash/conversation-prompts.ts), measured last; null: no such rows.
 */
export async function tokensRows(
  sides: ReadonlyArray<{ shards: number; ix: ShardedIndexer }>,
  quick: boolean,
  conversation: Uint32Array[] | null,
): Promise<{ rows: Row[]; markdown: string }> {
  const n = quick ? 3_000 : 20_000;
  const rounds = 3;
  const rows: Row[] = [];
  const notes: string[] = [];
  const sets: Array<[number, number, Uint32Array[]]> = HELD.flatMap((held) => [1_024, 8_192].map((tokens): [number, number, Uint32Array[]] => [held, tokens, prompts(tokens, tokens + held)]));
  if (conversation !== null) sets.push([-1, 8_192, conversation]);
  for (const [held, tokens, set] of sets) {
    for (const { shards, ix } of sides) {
      if (held > 0) await hold(ix, set, held);
      // Every prompt must match as its set says, or the rows would compare different lookups.
      const matched = set.filter((p) => ix.findMatchesSync(computeBlockHashes(p, BLOCK_SIZE)).scores.size > 0).length;
      const eager: Float64Array[] = [];
      const lazy: Float64Array[] = [];
      const cut0 = ix.firstBlockMisses;
      const prefix0 = ix.prefixAnswers;
      for (let round = 0; round < rounds; round++) {
        await quiesce(50);
        const [e, l] = timePairs(
          n,
          (i) => ix.findMatchesSync(computeBlockHashes(set[i % set.length]!, BLOCK_SIZE)),
          (i) => ix.findMatchesForTokensSync(set[i % set.length]!),
        );
        eager.push(e);
        lazy.push(l);
      }
      const cut = ix.firstBlockMisses - cut0;
      const prefixCut = ix.prefixAnswers - prefix0;
      const e = stats(concatLatencies(eager));
      const l = stats(concatLatencies(lazy));
      const prompt = held < 0 ? `conversation trace (${set.length.toLocaleString('en-US')} prompts)` : held > 0 ? `first ${held} blocks held` : 'no match';
      rows.push({ shards, tokens, prompts: prompt, lookup: 'hash every block, then findMatchesSync (the call before)', ...e });
      rows.push({ shards, tokens, prompts: prompt, lookup: 'findMatchesForTokensSync (first block, then prefix)', ...l });
      notes.push(
        `shards ${shards}, ${tokens.toLocaleString('en-US')} tokens, ${prompt}: p50 ${r2((l['p50 us'] as number) / (e['p50 us'] as number))}x the call before ` +
          `(of ${(rounds * (n + 1000)).toLocaleString('en-US')} calls, untimed ones included: ${cut.toLocaleString('en-US')} cut at the first block, ` +
          `${prefixCut.toLocaleString('en-US')} answered from the prefix; prompts matching: ${matched} of ${set.length})`,
      );
    }
  }
  const markdown =
    `**Lookups by tokens**: ${PROMPTS} prompts of random tokens per size, blocks of ${BLOCK_SIZE}, on the indexers above ` +
    `(keep-warm off), 3 rounds, the two calls interleaved call by call on the same prompt (which goes first alternates). From ${CUT_MIN_TOKENS.toLocaleString('en-US')} tokens on, ` +
    '`findMatchesForTokensSync` hashes the first block alone and stops when no worker holds it at the start of a sequence, then ' +
    `(prompts of ${2 * PREFIX_BLOCKS} blocks or more) hashes and looks up the first ${PREFIX_BLOCKS} blocks and stops when every score is below ${PREFIX_BLOCKS} ` +
    '(src/indexer/tokens-cut.ts); each cut is tried while recent tries often cut, else on one long lookup in ' +
    `${SAMPLE} (src/indexer/cut-gate.ts). The other row is what the call did before: hash every block, then look them up. ` +
    `Prompts that match nothing, then prompts whose first ${HELD[1]} blocks one worker holds, then prompts whose first ${HELD[2]} it holds ` +
    '(stored for these rows), in that order: by the deep rows the tries have found the first block held and the prefix not enough often ' +
    'enough that both gates are closed, so those rows show what a router whose requests match deep pays. The 1,024-token rows are under ' +
    'the length that tries: the same work on both. ' +
    (conversation === null
      ? ''
      : 'Last, real prompts: the conversation trace\'s requests of 8,192 tokens or more, their first 8,192 tokens (bench/hash/conversation-prompts.ts: ' +
        'they hash to the workload\'s own sequences), looked up on its final tree as it stands, gates as the deep rows left them. ') +
    `${notes.join('; ')}.\n\n${table(rows)}`;
  return { rows, markdown };
}
