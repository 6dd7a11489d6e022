/**
 * Token prompts of the conversation workload, for the end-to-end hashing + lookup benchmark.
 * The workload stores each request's prompt as LocalBlockHashes only; its tokens are the
 * generator's synthetic ones (shared/workloads/README.md): trace block h's token k is
 * splitmix64(h*512 + k + seed*GAMMA) mod vocab, block size 64, the first 6 blocks (384 tokens)
 * of every 512-token trace block. This file rebuilds them from the trace and checks that they
 * hash to the workload's own sequence, so the lookups walk the real paths of its tree.
 */

import { computeBlockHashes } from '../../src/hash/block-hash.js';
import { readTraceFile } from '../../src/trace/mooncake.js';
import { SyntheticTokens, TRACE_BLOCK_TOKENS } from '../../src/trace/synthetic-tokens.js';
import type { LoadedWorkload } from '../workloads.js';

const BLOCK_SIZE = 64;
const SUB_BLOCKS = 6;
const VOCAB = 32_000;
const SEED = 0n;

/**
 * The first `tokens` tokens of every request of `tracePath` whose prompt has at least that
 * many (in full blocks of 64), at most `limit` prompts. Throws when a prompt does not hash to
 * the workload's match sequence of the same request (the trace and workload disagree).
 */
export async function conversationPrompts(
  tracePath: string,
  workload: LoadedWorkload,
  tokens: number,
  limit: number,
): Promise<Uint32Array[]> {
  const { requests } = await readTraceFile(tracePath);
  const seqs = workload.ops.flatMap((op) => (op.kind === 'match' ? [op.seq] : []));
  if (seqs.length !== requests.length) {
    throw new Error(`trace has ${requests.length} requests, workload ${seqs.length} match ops`);
  }
  const generator = new SyntheticTokens(SEED, VOCAB);
  const blocksWanted = tokens / BLOCK_SIZE;
  const prompts: Uint32Array[] = [];
  for (let r = 0; r < requests.length && prompts.length < limit; r++) {
    const seq = seqs[r]!;
    if (seq.length < blocksWanted) continue;
    const ids = new Uint32Array(requests[r]!.hashIds.buffer, requests[r]!.hashIds.byteOffset, 2 * requests[r]!.hashIds.length);
    const prompt = new Uint32Array(tokens);
    for (let i = 0, pos = 0; pos < tokens; i++) {
      const count = Math.min(SUB_BLOCKS * BLOCK_SIZE, tokens - pos, TRACE_BLOCK_TOKENS);
      generator.fill(ids[2 * i]!, ids[2 * i + 1]!, 0, count, prompt, pos);
      pos += count;
    }
    const local = computeBlockHashes(prompt, BLOCK_SIZE);
    for (let b = 0; b < blocksWanted; b++) {
      if (local[b] !== seq[b]) throw new Error(`request ${r}: block ${b} of the rebuilt prompt is not the workload's`);
    }
    prompts.push(prompt);
  }
  return prompts;
}
