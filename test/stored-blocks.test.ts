/**
 * `storedBlocks`: the blocks of a Stored event from tokens, against the manual zipping of
 * `computeBlockHashes` and `computeSequenceHashes`, Dynamo's published vectors, and a sequence
 * split over events against the whole sequence hashed at once.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError, RadixTree, computeBlockHashes, computeSequenceHashes, storedBlocks } from '../src/index.js';

const tokens = Uint32Array.from({ length: 200 }, (_, i) => (i * 7919 + 13) % 32_000);

function zipped(t: Uint32Array | number[], blockSize: number, options?: Parameters<typeof computeBlockHashes>[2]) {
  const local = computeBlockHashes(t, blockSize, options);
  const seq = computeSequenceHashes(local);
  return Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash }));
}

describe('storedBlocks', () => {
  it('equals the manual zipping of the two hashes, full blocks only', () => {
    const blocks = storedBlocks(tokens, 16);
    expect(blocks).toHaveLength(12); // 200 tokens: 12 full blocks of 16, 8 tokens left out
    expect(blocks).toEqual(zipped(tokens, 16));
    expect(storedBlocks([...tokens], 16)).toEqual(blocks);
  });

  it("gives Dynamo's vectors for tokens 1..8, block size 4 (shared/docs/dynamo-reference.md)", () => {
    expect(storedBlocks([1, 2, 3, 4, 5, 6, 7, 8], 4)).toEqual([
      { blockHash: 14643705804678351452n, tokensHash: 14643705804678351452n },
      { blockHash: 4945711292740353085n, tokensHash: 16777012769546811212n },
    ]);
  });

  it('continues a sequence from its parent: the parts equal the whole, at every split', () => {
    const whole = storedBlocks(tokens, 16);
    for (const cut of [1, 5, 11]) {
      const head = storedBlocks(tokens.subarray(0, cut * 16), 16);
      const tail = storedBlocks(tokens.subarray(cut * 16), 16, { parentHash: head.at(-1)!.blockHash });
      expect([...head, ...tail]).toEqual(whole);
    }
  });

  it('does not roll from the first block when a parent is given (the hand-zipping mistake)', () => {
    const tail = tokens.subarray(64);
    const fromParent = storedBlocks(tail, 16, { parentHash: 42n });
    expect(fromParent.map((b) => b.tokensHash)).toEqual(zipped(tail, 16).map((b) => b.tokensHash));
    expect(fromParent[0]!.blockHash).not.toBe(zipped(tail, 16)[0]!.blockHash);
    expect(storedBlocks(tail, 16, { parentHash: null })).toEqual(zipped(tail, 16));
  });

  it('passes the LoRA and multimodal options to the block hashes', () => {
    const options = { loraName: 'adapter-a', blockMmHashes: [null, [7n, 3n]] };
    const blocks = storedBlocks(tokens, 16, options);
    expect(blocks).toEqual(zipped(tokens, 16, options));
    expect(blocks[0]!.tokensHash).not.toBe(storedBlocks(tokens, 16)[0]!.tokensHash);
  });

  it('builds events a tree accepts and matches, a continuation included', () => {
    const tree = new RadixTree();
    const head = storedBlocks(tokens.subarray(0, 64), 16);
    const tail = storedBlocks(tokens.subarray(64, 128), 16, { parentHash: head.at(-1)!.blockHash });
    expect(tree.applyEvent({ workerId: 1n, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: head } } })).toBe('ok');
    expect(tree.applyEvent({ workerId: 1n, event: { eventId: 1n, data: { type: 'stored', parentHash: head.at(-1)!.blockHash, blocks: tail } } })).toBe('ok');
    expect([...tree.findMatches(computeBlockHashes(tokens, 16)).scores]).toEqual([[1n, 8]]);
  });

  it('returns no blocks for fewer tokens than a block, and refuses a parent that is not a u64', () => {
    expect(storedBlocks([1, 2, 3], 4)).toEqual([]);
    for (const bad of [-1n, 1n << 64n, 5 as unknown as bigint]) {
      let err: unknown = null;
      try {
        storedBlocks(tokens, 16, { parentHash: bad });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(KvIndexError);
      expect((err as KvIndexError).code).toBe(ErrorCode.InvalidOption);
      expect((err as KvIndexError).message).toMatch(/^parentHash: /);
    }
  });
});
