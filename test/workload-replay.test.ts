/**
 * Replays the shared workloads through RadixTree and checks every `match` line against its
 * `expect` oracle (Dynamo's own find_matches), then rebuilds the final tree from its dump.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import { parseWorkloadLine, readWorkload } from '../src/trace/workload.js';
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

describe('readWorkload input', () => {
  const lines = [
    '{"op":"meta","block_size":16}',
    '{"op":"event","event":{"worker_id":7,"event":{"event_id":1,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":11,"tokens_hash":21}]}}}}}',
    '{"op":"match","seq":[21],"expect":{"7":1}}',
  ];

  it('takes whitespace around a line, and refuses an expect id past u64 or a negative score as a bad line', () => {
    expect(parseWorkloadLine(` ${lines[1]!} \t`, 2).op).toBe('event');
    expect(parseWorkloadLine(`${lines[2]!}  `, 3)).toMatchObject({ op: 'match', expect: new Map([[7n, 1]]) });
    expect(parseWorkloadLine('{"op":"match","seq":[21],"expect":{"18446744073709551615":1}}', 4)).toMatchObject({ expect: new Map([[18446744073709551615n, 1]]) });
    for (const e of ['{"18446744073709551616":1}', '{"7":-1}', '{"7":1.5}', `{"${'9'.repeat(400)}":1}`]) {
      expect(() => parseWorkloadLine(`{"op":"match","seq":[21],"expect":${e}}`, 5), e).toThrow(expect.objectContaining({ code: ErrorCode.InvalidJson, message: expect.stringMatching(/^workload line 5: bad expect entry .{0,120}$/) as unknown }));
    }
  });

  it('tells gzip by its bytes, not its name, and a truncated gzip is KVX_CORRUPT_INPUT after the lines read', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvindex-workload-'));
    try {
      const text = lines.join('\n') + '\n';
      const named = join(dir, 'w.jsonl'); // gzip bytes under a plain name
      writeFileSync(named, gzipSync(text));
      const ops: string[] = [];
      for await (const op of readWorkload(named)) ops.push(op.op);
      expect(ops).toEqual(['meta', 'event', 'match']);

      const big = Array.from({ length: 4000 }, () => text).join('');
      const gz = gzipSync(big);
      const cut = join(dir, 'cut.gz');
      writeFileSync(cut, gz.subarray(0, gz.length - 20));
      let read = 0;
      const err = await (async () => {
        for await (const op of readWorkload(cut)) if (op.op !== 'other') read++;
      })().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KvIndexError);
      expect((err as KvIndexError).code).toBe(ErrorCode.CorruptInput);
      expect((err as KvIndexError).message).toMatch(/cut\.gz: gzip data ends early \(truncated file\) after line \d+/);
      expect(read).toBeGreaterThan(0);
      expect(read).toBeLessThan(12_000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
