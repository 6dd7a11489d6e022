/**
 * Replays the shared workloads through RadixTree and checks every `match` line against its
 * `expect` oracle (Dynamo's own find_matches), then rebuilds the final tree from its dump.
 */
import { describe, expect, it } from 'vitest';
import { readWorkload } from '../src/trace/workload.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { sharedWorkload } from './support/shared.js';

function sameScores(got: Map<bigint, number>, want: Map<bigint, number>): boolean {
  if (got.size !== want.size) return false;
  for (const [k, v] of want) if (got.get(k) !== v) return false;
  return true;
}

describe.each(['conversation', 'synthetic', 'synthetic-perworker'])('workload %s', (name) => {
  const path = sharedWorkload(name);
  it.skipIf(path === null)('matches every expect line and rebuilds from its dump', async () => {
    const tree = new RadixTree();
    const statuses = new Map<string, number>();
    const recent: BigUint64Array[] = [];
    let matches = 0;
    let mismatches = 0;
    for await (const op of readWorkload(path!)) {
      if (op.op === 'event') {
        const s = tree.applyEvent(op.event);
        statuses.set(s, (statuses.get(s) ?? 0) + 1);
      } else if (op.op === 'match') {
        matches++;
        if (!sameScores(tree.findMatches(op.seq).scores, op.expect)) mismatches++;
        recent.push(op.seq);
        if (recent.length > 3000) recent.shift();
      }
    }
    expect(matches).toBeGreaterThan(3000);
    expect(mismatches).toBe(0);
    expect([...statuses.keys()]).toEqual(['ok']);
    expect(tree.size).toBe(65_536);

    const rebuilt = new RadixTree();
    for (const e of tree.dumpEvents()) expect(rebuilt.applyEvent(e)).toBe('ok');
    expect(rebuilt.size).toBe(tree.size);
    for (const seq of recent) expect(rebuilt.findMatches(seq).scores).toEqual(tree.findMatches(seq).scores);
  }, 120_000);
});
