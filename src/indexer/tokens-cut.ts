/**
 * A long tokens lookup's two cuts, one sequence for every index that answers tokens: the
 * indexer (`ShardedIndexer`, one engine) and the HTTP engine index (src/zmq/engine-index.ts,
 * every tier and rank). Each index says how to ask itself through `CutProbes`; this file owns
 * the order, the gates and the hashing, so the two cannot drift apart.
 *
 * Why: hashing is most of a long prompt's lookup (an 8,192-token prompt, 128 blocks of 64:
 * ~4 of ~4.4 us through `findMatchesForTokensSync`, dev VM), and a router's prompts often match
 * nothing (70 % of the synthetic workload's) or only a shared system prompt (the conversation
 * workload: median 6 blocks matched of 80). A `Uint32Array` prompt of at least
 * `CUT_MIN_TOKENS` tokens and two blocks may try two cuts, each behind its gate (cut-gate.ts:
 * what a try costs when it does not cut, and when a lookup tries):
 * - its first block hashed alone: when no worker holds it at the start of a sequence, nothing
 *   can score, and the lookup answers no match;
 * - then, for a prompt of `2 * PREFIX_BLOCKS` blocks or more, its first `PREFIX_BLOCKS` blocks
 *   hashed and looked up: when every score is below `PREFIX_BLOCKS`, that is the answer. Exact,
 *   because a worker's score is its run of leading blocks without a gap (tree/walk.ts): the
 *   prefix's score is min(score, PREFIX_BLOCKS), so a score under it is the whole prompt's.
 *   Otherwise the rest is hashed (the prefix's hashes kept, and the first block's when the
 *   first cut made it) and the caller looks up the whole prompt.
 * Not for an array of numbers: every token is checked as it is staged (a bad one throws, in the
 * ignored partial block too), which costs more than the hashing saved. The options are checked
 * whole, as the full hashing checks them.
 */
import { blockHashesInto, computeBlockHashes, firstBlockHashInto, type BlockHashOptions } from '../hash/block-hash.js';
import { CUT_MIN_TOKENS, CutGate, PREFIX_BLOCKS, PREFIX_MIN_SHARE } from './cut-gate.js';

/** How a tokens lookup asks one index; made once per index (and per wait mode), not per call. */
export interface CutProbes<R> {
  /**
   * Whether no worker holds `first[0]` as a sequence's first block; null when the index cannot
   * tell now (a shard behind, not waited for): the lookup then hashes everything.
   */
  firstUnheld(first: BigUint64Array): boolean | null;
  /** The lookup of a prompt's first `PREFIX_BLOCKS` hashes; null when it cannot be made now. */
  prefix(hashes: BigUint64Array): R | null;
  /** The longest score in a prefix lookup's answer (every tier and rank the index has). */
  deepest(found: R): number;
}

/** `TokensCut.lookup`'s answer when the first block settled it: no worker scores. */
export const FIRST_UNHELD: unique symbol = Symbol('kvindex.firstUnheld');

export class TokensCut {
  readonly #gate = new CutGate();
  readonly #prefixGate = new CutGate(PREFIX_MIN_SHARE);
  /** The first block's hash, reused. */
  readonly #first = new BigUint64Array(1);
  #prefix: BigUint64Array = this.#first;
  /** Lookups answered no match after hashing their first block alone. */
  firstBlockMisses = 0;
  /** Lookups answered from their first `PREFIX_BLOCKS` blocks, the rest never hashed. */
  prefixAnswers = 0;

  /**
   * The lookup's answer when a cut settles it (`FIRST_UNHELD`, or the prefix lookup's `R`),
   * else every block's hash, for the caller to look up. Throws what `computeBlockHashes` throws.
   */
  lookup<R>(tokens: Uint32Array | readonly number[], blockSize: number, options: BlockHashOptions | undefined, probes: CutProbes<R>): R | BigUint64Array | typeof FIRST_UNHELD {
    if (!(tokens instanceof Uint32Array) || tokens.length < CUT_MIN_TOKENS || tokens.length < 2 * blockSize) {
      return computeBlockHashes(tokens, blockSize, options);
    }
    const checked = this.#gate.shouldCheck();
    if (checked) {
      const first = this.#first;
      firstBlockHashInto(tokens, blockSize, options, first);
      const unheld = probes.firstUnheld(first);
      if (unheld === null) return computeBlockHashes(tokens, blockSize, options);
      this.#gate.note(unheld);
      if (unheld) {
        this.firstBlockMisses++;
        return FIRST_UNHELD;
      }
    }
    const blocks = Math.floor(tokens.length / blockSize);
    if (blocks < 2 * PREFIX_BLOCKS || !this.#prefixGate.shouldCheck()) return computeBlockHashes(tokens, blockSize, options);
    const hashes = new BigUint64Array(blocks);
    if (checked) hashes[0] = this.#first[0]!;
    blockHashesInto(tokens, blockSize, options, checked ? 1 : 0, PREFIX_BLOCKS, hashes);
    const prefix = hashes.subarray(0, PREFIX_BLOCKS);
    const found = probes.prefix(prefix);
    if (found !== null) {
      const settled = probes.deepest(found) < PREFIX_BLOCKS;
      this.#prefixGate.note(settled);
      if (settled) {
        this.prefixAnswers++;
        this.#prefix = prefix;
        return found;
      }
    }
    blockHashesInto(tokens, blockSize, options, PREFIX_BLOCKS, blocks, hashes);
    return hashes;
  }

  /** The hashes the latest answer from a prefix was looked up with (keep-warm primes them). */
  get lastPrefix(): BigUint64Array {
    return this.#prefix;
  }
}
