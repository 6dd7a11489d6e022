import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { parseJsonLossless } from '../src/protocol/json-value.js';
import { detectInputKind } from '../src/trace/input-kind.js';
import { openLineSource } from '../src/trace/line-source.js';
import { MAX_TRACE_BLOCKS, parseTraceLine, readTraceFile } from '../src/trace/mooncake.js';

const dir = mkdtempSync(join(tmpdir(), 'kvindex-trace-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('parseTraceLine', () => {
  it('reads a Mooncake request', () => {
    const r = parseTraceLine('{"timestamp": 3052, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}', 7);
    expect(r).toEqual({ ok: true, request: { timestamp: 3052, inputLength: 6758, outputLength: 500, hashIds: BigUint64Array.of(0n, 1n, 2n), line: 7 } });
  });

  it('keeps hash ids above 2^53 exact', () => {
    const r = parseTraceLine('{"timestamp":0,"input_length":1024,"output_length":1,"hash_ids":[18446744073709551615,9007199254740993]}', 1);
    expect(r.ok && Array.from(r.request.hashIds)).toEqual([18446744073709551615n, 9007199254740993n]);
  });

  it('a request of more than 8,192 blocks is a bad line (the simulation would materialise its tokens)', () => {
    const ids = (n: number): string => `{"hash_ids":[${Array.from({ length: n }, (_, i) => i).join(',')}]}`;
    expect(parseTraceLine(ids(MAX_TRACE_BLOCKS), 1).ok).toBe(true);
    expect(parseTraceLine(ids(MAX_TRACE_BLOCKS + 1), 1)).toEqual({ ok: false, reason: 'hash_ids: 8193 blocks, more than the 8192 a request may have' });
  });

  it('fills missing optional fields with defaults', () => {
    const r = parseTraceLine('{"hash_ids":[4,5]}', 2, 1500);
    expect(r.ok && r.request).toMatchObject({ timestamp: 1500, inputLength: 1024, outputLength: 0 });
  });

  it.each([
    ['not JSON', '{"timestamp": 0, "hash_ids": [1, 2'],
    ['not an object', '[1, 2, 3]'],
    ['no hash_ids', '{"timestamp": 0, "input_length": 10}'],
    ['hash_ids not a list', '{"hash_ids": 5}'],
    ['a negative id', '{"hash_ids": [1, -2]}'],
    ['a fractional id', '{"hash_ids": [1, 2.5]}'],
    ['a string id', '{"hash_ids": ["1"]}'],
    ['an id above u64', '{"hash_ids": [18446744073709551616]}'],
    ['a negative input_length', '{"hash_ids": [1], "input_length": -4}'],
    ['an object id', '{"hash_ids": [{}]}'],
    ['an object input_length', '{"hash_ids": [1], "input_length": {}}'],
    ['a deeply nested id', `{"hash_ids": [${'['.repeat(20_000)}${']'.repeat(20_000)}]}`],
  ])('rejects a line with %s', (_what, text) => {
    const r = parseTraceLine(text, 3);
    expect(r.ok).toBe(false);
  });
});

describe('readTraceFile', () => {
  it('counts bad lines with 1-based numbers and keeps going', async () => {
    const file = join(dir, 'mixed.jsonl');
    writeFileSync(
      file,
      [
        '{"timestamp":0,"input_length":512,"output_length":1,"hash_ids":[0]}',
        'garbage',
        '',
        '{"timestamp":5,"input_length":512,"output_length":1,"hash_ids":[0,-1]}',
        '{"timestamp":9,"input_length":1024,"output_length":1,"hash_ids":[0,1]}',
      ].join('\n') + '\n',
    );
    const t = await readTraceFile(file);
    expect(t.requests.map((r) => r.line)).toEqual([1, 5]);
    expect(t.bad.map((b) => b.line)).toEqual([2, 4]);
  });
});

describe('openLineSource', () => {
  it('detects gzip by its magic bytes whatever the name, and numbers lines from 1', async () => {
    const file = join(dir, 'looks-plain.jsonl');
    writeFileSync(file, gzipSync('a\n\nb\nc'));
    const src = await openLineSource(file);
    expect(src.gzip).toBe(true);
    const lines: Array<[number, string]> = [];
    for await (const { text, line } of src.lines()) lines.push([line, text]);
    expect(lines).toEqual([[1, 'a'], [2, ''], [3, 'b'], [4, 'c']]);
    expect(src.bytesRead).toBe(src.size);
    expect(src.fraction).toBe(1);
  });

  it('stops after `limit` lines', async () => {
    const file = join(dir, 'plain.jsonl');
    writeFileSync(file, 'a\nb\nc\n');
    const src = await openLineSource(file);
    expect(src.gzip).toBe(false);
    const got: string[] = [];
    for await (const { text } of src.lines(2)) got.push(text);
    expect(got).toEqual(['a', 'b']);
  });
});

describe('detectInputKind', () => {
  it.each([
    ['{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[1]}', 'trace'],
    ['{"timestamp":12,"event":{"worker_id":1,"event":{"event_id":0,"data":"cleared"}}}', 'recorder'],
    ['{"worker_id":1,"event":{"event_id":0,"data":"cleared"}}', 'events'],
    ['{"op":"meta","format":"dynamo-kv-router-replay"}', 'workload'],
    ['{"something":"else"}', null],
    ['[1,2]', null],
  ])('%s -> %s', (text, kind) => {
    expect(detectInputKind(parseJsonLossless(text))).toBe(kind);
  });
});
