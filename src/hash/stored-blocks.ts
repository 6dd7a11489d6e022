/**
 * The blocks of a Stored event built from tokens, as an engine publishes them: what a fake
 * engine, a test or an adapter for an engine without its own hashes needs, instead of zipping
 * `computeBlockHashes` and `computeSequenceHashes` by hand (and getting a continuation's
 * rolling hash wrong: it rolls on from its parent's sequence hash, not from its first block).
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { U64_MAX, type StoredBlock } from '../protocol/types.js';
import { computeBlockHashes, computeSequenceHashes, type BlockHashOptions } from './block-hash.js';

/** `storedBlocks` options: the block identity options of `computeBlockHashes`, and where the blocks continue. */
export interface StoredBlocksOptions extends BlockHashOptions {
  /**
   * The sequence hash (`blockHash`) of the block these tokens continue: the last block of an
   * earlier Stored event of the same sequence, which is also that event's `parentHash` to
   * give. Absent or null: the tokens start a sequence.
   */
  parentHash?: bigint | null;
}

/**
 * The blocks of a Stored event for `tokens`: one per FULL block of `blockSize` tokens (a
 * trailing partial block is left out, as engines do), in order, each with
 * - `tokensHash`: Dynamo's LocalBlockHash of the block's tokens (`computeBlockHashes`, with
 *   the LoRA and multimodal options given), what lookups match on;
 * - `blockHash`: the block's sequence hash, Dynamo's rolling hash (`computeSequenceHashes`),
 *   the external block hash Dynamo's mocker publishes, continued from `options.parentHash`
 *   when given: seq[0] = XXH3-64(le_u64(parentHash) ++ le_u64(local[0])), seed 1337.
 *
 * Blocks of a whole sequence split over several events come out the same as the whole
 * sequence's: pass each event the last `blockHash` of the one before as `parentHash`, and use
 * it as that event's `parentHash` too.
 *
 * Throws `KvIndexError` as `computeBlockHashes` does, and `InvalidOption` when `parentHash` is
 * neither null nor a u64 bigint.
 */
export function storedBlocks(tokens: Uint32Array | readonly number[], blockSize: number, options?: StoredBlocksOptions): StoredBlock[] {
  const parent = options?.parentHash ?? null;
  if (parent !== null && (typeof parent !== 'bigint' || parent < 0n || parent > U64_MAX)) {
    throw new KvIndexError(ErrorCode.InvalidOption, `parentHash: expected null or a u64 bigint, got ${String(parent)}`);
  }
  const local = computeBlockHashes(tokens, blockSize, options);
  const n = local.length;
  let seq: BigUint64Array;
  if (parent === null) {
    seq = computeSequenceHashes(local);
  } else {
    // The rolling hash over [parent, ...local] starts with parent itself (seq[0] = local[0]),
    // then rolls on from it: exactly the continuation, one wasm call.
    const chain = new BigUint64Array(n + 1);
    chain[0] = parent;
    chain.set(local, 1);
    seq = computeSequenceHashes(chain).subarray(1);
  }
  const blocks: StoredBlock[] = new Array(n);
  for (let i = 0; i < n; i++) blocks[i] = { blockHash: seq[i]!, tokensHash: local[i]! };
  return blocks;
}
