/**
 * Whether a long tokens lookup checks its first block before hashing the rest
 * (sharded-indexer.ts `#cutShort`), from what the recent checks found.
 *
 * Why a gate: the check saves a lookup that matches nothing most of its cost (an 8,192-token
 * prompt, 128 blocks of 64: p50 4.4 -> 0.3-0.4 us, shards 0 and 2), and costs one that matches
 * 0.3-0.45 us on top of 4.3-4.4 (7-10 %: the lookup bench's tokens rows, the two calls
 * interleaved on the dev VM). Checking pays when more than roughly 7-13 % of lookups match
 * nothing (8,192 and 4,096 tokens); a router whose requests nearly all share a system prompt
 * would pay it for nothing. So the indexer keeps an average of what the checks found (each
 * check weighs 1/16) and checks only while more than `MIN_SHARE` of them found the first block
 * unheld; while it does not, every `SAMPLE`-th long lookup is checked anyway, so the average
 * follows the traffic (a closed gate costs a matching lookup 1/16 of a check on average, and
 * reopens at the first sampled miss).
 */

/**
 * Tokens lookups this long or longer may check their first block before hashing the rest. Why
 * the length: the check costs about the same for any prompt, and below ~4,000 tokens (~2 us of
 * hashing at 64 tokens per block) it is too large a share of what it could save.
 */
export const CUT_MIN_TOKENS = 4096;

/** Weight of one check's finding in the average. */
const WEIGHT = 1 / 16;
/** The gate is open while the average share of unheld first blocks is at least this. */
export const MIN_SHARE = 0.1;
/** While closed, one long lookup in this many is checked. */
export const SAMPLE = 16;

export class FirstBlockGate {
  /** Recent share of checks that found the first block unheld; starts open. */
  #share = 1;
  #skipped = 0;

  /** Whether this lookup should check its first block. */
  shouldCheck(): boolean {
    if (this.#share >= MIN_SHARE) return true;
    return ++this.#skipped % SAMPLE === 0;
  }

  /** What a check found: `unheld` true when no worker held the first block. */
  note(unheld: boolean): void {
    this.#share += ((unheld ? 1 : 0) - this.#share) * WEIGHT;
  }

  /** Whether checks are made on every long lookup now (metrics, tests). */
  get open(): boolean {
    return this.#share >= MIN_SHARE;
  }
}
