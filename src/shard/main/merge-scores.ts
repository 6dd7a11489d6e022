/** A sharded lookup's two ends on the main thread: the hashes packed, the replies merged. */
import { u64FromHalves } from '../../protocol/u64-text.js';
import type { OverlapScores } from '../../protocol/types.js';
import type { FindReply } from '../wire/messages.js';

/** Union of the shards' scores (their workers are disjoint); frequencies summed element-wise. */
export function mergeScores(replies: FindReply[]): OverlapScores {
  const scores = new Map<bigint, number>();
  const frequencies: number[] = [];
  for (const r of replies) {
    const t = r.triples;
    for (let i = 0; i < t.length; i += 3) scores.set(u64FromHalves(t[i + 1]!, t[i]!), t[i + 2]!);
    for (let i = 0; i < r.frequencies.length; i++) frequencies[i] = (frequencies[i] ?? 0) + r.frequencies[i]!;
  }
  return { scores, frequencies };
}
