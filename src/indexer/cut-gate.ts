/**
 * Whether a long tokens lookup tries a cut before hashing every block (tokens-cut.ts, for the
 * indexer and the HTTP engine index), from what the recent tries found. Two cuts use one gate
 * each: the first block hashed alone (no worker holds it at the start of a sequence: nothing
 * can score), and a prefix of `PREFIX_BLOCKS` blocks looked up first (every worker's score
 * below the prefix's length: the rest of the prompt cannot change any score).
 *
 * Why a gate: a cut saves a lookup that it ends most of its hashing (an 8,192-token prompt,
 * 128 blocks of 64, that matches nothing: p50 4.4 -> 0.3-0.4 us, shards 0 and 2), and costs one
 * it does not end a lookup on top (the first block: 0.3-0.45 us on 4.3-4.4, 7-10 %: the lookup
 * bench's tokens rows, the two calls interleaved on the dev VM). A router whose requests nearly
 * all share a system prompt would pay the first-block check for nothing, one whose requests
 * match deep would pay the prefix lookup for nothing. So each gate keeps an average of what its
 * tries found (each weighs 1/16) and tries on every long lookup only while more than its share
 * (`MIN_SHARE`, `PREFIX_MIN_SHARE`) of them ended the lookup; while it does not, every
 * `SAMPLE`-th long lookup tries anyway, so the average follows the traffic (a closed gate costs
 * a lookup 1/16 of a try on average, and reopens at the first sampled cut).
 */

/**
 * Tokens lookups this long or longer may try a cut before hashing the rest. Why the length: a
 * try costs about the same for any prompt, and below ~4,000 tokens (~2 us of hashing at 64
 * tokens per block) it is too large a share of what it could save.
 */
export const CUT_MIN_TOKENS = 4096;

/** Weight of one try's finding in the average. */
const WEIGHT = 1 / 16;
/** The first-block gate is open while the average share of unheld first blocks is at least this. */
export const MIN_SHARE = 0.1;
/**
 * Blocks of the prefix looked up first. Why 16: on the conversation workload (Mooncake trace,
 * blocks of 64 tokens) the longest score of 73 % of the lookups of 4,096 tokens or more is under
 * 8 blocks (a shared system prompt of 6-7), 74 % under 16, 76 % under 32: 16 keeps a longer
 * system prompt's lookups cut, and hashing 16 blocks costs ~0.5 us where the whole prompt
 * (median 80 blocks) costs ~2.4.
 */
export const PREFIX_BLOCKS = 16;
/**
 * The prefix gate is open while the average share of prefix lookups that ended the lookup is at
 * least this. A prefix lookup that does not end it costs one lookup of 16 blocks (~0.3-0.5 us);
 * one that does saves hashing the rest of a prompt of 64 blocks or more (~1.5 us or more), so
 * trying pays above roughly a quarter.
 */
export const PREFIX_MIN_SHARE = 0.25;
/** While closed, one long lookup in this many is checked. */
export const SAMPLE = 16;

export class CutGate {
  /** Recent share of tries that ended the lookup; starts open. */
  #share = 1;
  #skipped = 0;

  /** `minShare`: the gate is open while at least this share of recent tries ended the lookup. */
  constructor(private readonly minShare: number = MIN_SHARE) {}

  /** Whether this lookup should try the cut. */
  shouldCheck(): boolean {
    if (this.#share >= this.minShare) return true;
    return ++this.#skipped % SAMPLE === 0;
  }

  /** What a try found: `cut` true when it ended the lookup. */
  note(cut: boolean): void {
    this.#share += ((cut ? 1 : 0) - this.#share) * WEIGHT;
  }

  /** Whether every long lookup tries now (metrics, tests). */
  get open(): boolean {
    return this.#share >= this.minShare;
  }
}
