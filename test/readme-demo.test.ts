import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runDemo } from '../src/cli/demo.js';
import { RadixTree, computeBlockHashes, computeSequenceHashes } from '../src/index.js';

describe('README', () => {
  it('shows the real output of the demo', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const block = /<!-- demo-output -->\n```\n([\s\S]*?)```\n<!-- \/demo-output -->/.exec(readme);
    expect(block).not.toBeNull();
    expect(runDemo().join('\n') + '\n').toBe(block![1]);
  });

  it('example scores three blocks for the worker', () => {
    const tree = new RadixTree();
    const tokens = Uint32Array.from({ length: 64 }, (_, i) => i + 1);
    const local = computeBlockHashes(tokens, 16);
    const seq = computeSequenceHashes(local);
    tree.applyEvent({
      workerId: 7587889975016782855n,
      event: {
        eventId: 0n,
        data: { type: 'stored', parentHash: null, blocks: Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash })) },
      },
    });
    expect([...tree.findMatches(local.subarray(0, 3)).scores]).toEqual([[7587889975016782855n, 3]]);
  });
});
