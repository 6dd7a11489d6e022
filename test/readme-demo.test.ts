import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runDemo } from '../src/cli/demo.js';
import { RadixTree, computeBlockHashes, computeSequenceHashes } from '../src/index.js';

describe('README', () => {
  it('shows the real output of the demo (docs/library.md)', () => {
    const readme = readFileSync(new URL('../docs/library.md', import.meta.url), 'utf8');
    const block = /<!-- demo-output -->\n```\n([\s\S]*?)```\n<!-- \/demo-output -->/.exec(readme);
    expect(block).not.toBeNull();
    expect(runDemo().join('\n') + '\n').toBe(block![1]);
  });

  it('shows the real counts of the main command (replay of the shipped trace slice)', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const block = /<!-- replay-output -->\n```\n([\s\S]*?)```\n<!-- \/replay-output -->/.exec(readme);
    expect(block).not.toBeNull();
    const cli = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
    const out = execFileSync(process.execPath, [cli, 'replay'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    // Timings vary; every line that counts something must be exactly as shown.
    const stable = /^(requests|events|blocks stored|blocks removed|hit rate|mismatches|apply status|memory|bad lines) /;
    const pick = (text: string): string[] => text.split('\n').filter((l) => stable.test(l)).map((l) => l.replace(/\s+$/, ''));
    expect(pick(block![1]!).length).toBe(9);
    expect(pick(out)).toEqual(pick(block![1]!));
  }, 60_000);

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
