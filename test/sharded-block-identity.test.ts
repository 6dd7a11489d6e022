import { afterEach, describe, expect, it } from 'vitest';

import { computeBlockHashes, computeSequenceHashes, type BlockHashOptions } from '../src/hash/block-hash.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';

// findMatchesForTokens(Sync) with Dynamo's block identity options: a LoRA or multimodal request
// is scored against the blocks its own engine stored, not the base model's.

const BLOCK_SIZE = 4;
const TOKENS = Array.from({ length: 12 }, (_, i) => 100 + i);
const BASE = 11n;
const LORA = 22n;
const VISION = 33n;
const LORA_OPTIONS: BlockHashOptions = { loraName: 'sql-lora' };
const MM_OPTIONS: BlockHashOptions = { blockMmHashes: [null, [0xfedc_ba98_7654_3210n]] };

/** The Stored event an engine with these options publishes for TOKENS. */
function stored(worker: bigint, options?: BlockHashOptions): RouterEvent {
  const local = computeBlockHashes(TOKENS, BLOCK_SIZE, options);
  const seq = computeSequenceHashes(local);
  return {
    workerId: worker,
    event: {
      eventId: 0n,
      data: { type: 'stored', parentHash: null, blocks: Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash })) },
    },
  };
}

let indexer: ShardedIndexer | null = null;
afterEach(async () => {
  await indexer?.close();
  indexer = null;
});

for (const shards of [0, 2]) {
  describe(`findMatchesForTokens with block identity options (shards: ${shards})`, () => {
    async function start(): Promise<ShardedIndexer> {
      indexer = await ShardedIndexer.create({ shards, blockSize: BLOCK_SIZE });
      indexer.applyEvents([stored(BASE), stored(LORA, LORA_OPTIONS), stored(VISION, MM_OPTIONS)]);
      return indexer;
    }

    it('scores a LoRA request against the adapter blocks only', async () => {
      const ix = await start();
      expect([...(await ix.findMatchesForTokens(TOKENS, LORA_OPTIONS)).scores]).toEqual([[LORA, 3]]);
      expect([...ix.findMatchesForTokensSync(TOKENS, LORA_OPTIONS).scores]).toEqual([[LORA, 3]]);
    });

    it('scores a base-model request without the LoRA worker', async () => {
      const ix = await start();
      const scores = new Map((await ix.findMatchesForTokens(TOKENS)).scores);
      expect(scores.get(BASE)).toBe(3);
      expect(scores.has(LORA)).toBe(false);
      // The multimodal worker shares the first block (no image in it) and then diverges.
      expect(scores.get(VISION)).toBe(1);
      expect(new Map(ix.findMatchesForTokensSync(TOKENS).scores)).toEqual(scores);
    });

    it('scores a multimodal request by its image-bearing blocks', async () => {
      const ix = await start();
      const scores = new Map((await ix.findMatchesForTokens(Uint32Array.from(TOKENS), MM_OPTIONS)).scores);
      expect(scores.get(VISION)).toBe(3);
      expect(scores.get(BASE)).toBe(1);
      expect(scores.has(LORA)).toBe(false);
    });
  });
}
