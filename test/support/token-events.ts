/** Events and prompts made from tokens, for the tokens-lookup tests. */
import { computeBlockHashes, computeSequenceHashes, type BlockHashOptions } from '../../src/hash/block-hash.js';
import type { OverlapScores, RouterEvent } from '../../src/protocol/types.js';

/** Tokens `base .. base + n - 1` as a Uint32Array. */
export function tokenRange(base: number, n: number): Uint32Array {
  return Uint32Array.from({ length: n }, (_, i) => base + i);
}

/**
 * The Stored event an engine with `options` publishes for `toks` (full blocks of `blockSize`),
 * block hashes being the sequence hashes of the tokens hashes.
 */
export function storedTokens(worker: bigint, toks: Uint32Array, blockSize: number, options?: BlockHashOptions, id = 0n): RouterEvent {
  const local = computeBlockHashes(toks, blockSize, options);
  const seq = computeSequenceHashes(local);
  return {
    workerId: worker,
    event: { eventId: id, data: { type: 'stored', parentHash: null, blocks: Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash })) } },
  };
}

/** The scores as (worker, score) pairs in worker order. */
export function sortedEntries(r: OverlapScores): Array<[bigint, number]> {
  return [...r.scores].sort((a, b) => (a[0] < b[0] ? -1 : 1));
}
