/**
 * Reused scratch that turns bigint hashes from the API edge into the (lo, hi) u32 words the tree
 * works on: writing a bigint into a BigUint64Array and reading the Uint32Array view over the
 * same buffer splits it without allocating (Node runs little-endian only).
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import type { StoredBlock } from '../protocol/types.js';
import { showValue } from '../protocol/show-value.js';

export class U64Scratch {
  private big = new BigUint64Array(512);
  private words = new Uint32Array(this.big.buffer);

  /** Blocks as (blockLo, blockHi, tokLo, tokHi) words; valid until the next call. */
  blockWords(blocks: readonly StoredBlock[]): Uint32Array {
    this.ensure(blocks.length * 2);
    const big = this.big;
    for (let i = 0; i < blocks.length; i++) {
      const b = blocks[i]!;
      big[2 * i] = b.blockHash;
      big[2 * i + 1] = b.tokensHash;
    }
    return this.words;
  }

  /** Hashes as (lo, hi) words; `check` validates each (a BigUint64Array would wrap bad ones). */
  hashWords(hashes: readonly bigint[], check: boolean): Uint32Array {
    this.ensure(hashes.length);
    const big = this.big;
    for (let i = 0; i < hashes.length; i++) {
      const h = hashes[i]!;
      if (check && (typeof h !== 'bigint' || h < 0n || h > 0xffff_ffff_ffff_ffffn)) {
        throw new KvIndexError(ErrorCode.InvalidField, `hashes[${i}]: expected a u64 bigint, got ${showValue(h)}`);
      }
      big[i] = h;
    }
    return this.words;
  }

  /**
   * A BigUint64Array's hashes as (lo, hi) words, copied (a memcpy, no bigint): a view over the
   * caller's buffer would be a new object per call, ~96 bytes of garbage per lookup.
   */
  copyWords(hashes: BigUint64Array): Uint32Array {
    this.ensure(hashes.length);
    this.big.set(hashes);
    return this.words;
  }

  /**
   * The first of a BigUint64Array's hashes as (lo, hi) words at 0 and 1 (`copyWords` copies
   * the rest): a lookup whose first block the tree lacks needs no more, and copying all of a
   * prompt (up to 2,242 hashes) to find that out was a third of the no-match lookups' p99
   * (in-thread, synthetic workload: 0.44 -> 0.30 us without it). Copied as an element:
   * V8's optimized code moves a BigUint64Array element without making a bigint (measured: no
   * scavenge over 1M calls), and no subarray view is made.
   */
  firstWords(hashes: BigUint64Array): Uint32Array {
    this.big[0] = hashes[0]!;
    return this.words;
  }

  private ensure(n: number): void {
    if (this.big.length >= n) return;
    this.big = new BigUint64Array(Math.max(n, this.big.length * 2));
    this.words = new Uint32Array(this.big.buffer);
  }
}
