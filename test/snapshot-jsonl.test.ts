import { describe, expect, it } from 'vitest';
import { ErrorCode, EventParseError, KvIndexError } from '../src/errors.js';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import { createSnapshotWriter, encodeSnapshot } from '../src/protocol/snapshot-writer.js';
import { decodeSnapshot, iterateSnapshot } from '../src/protocol/snapshot-reader.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { writeU64Decimal, writeUintDecimal } from '../src/protocol/u64-decimal.js';
import { xorshift32 as rng } from './support/rng.js';

const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString('utf8');
const bytesOf = (s: string): Uint8Array => new TextEncoder().encode(s);


const SPECIAL = [0n, 1n, 9n, 10n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 10n ** 16n, 2n ** 63n, 2n ** 64n - 1n];

function randomEvents(seed: number, count: number): RouterEvent[] {
  const next = rng(seed);
  const u64 = (): bigint =>
    next() % 4 === 0 ? SPECIAL[next() % SPECIAL.length]! : (BigInt(next()) << 32n) | BigInt(next());
  const events: RouterEvent[] = [];
  for (let i = 0; i < count; i++) {
    const kind = next() % 3;
    let data: RouterEvent['event']['data'];
    if (kind === 0) {
      data = {
        type: 'stored',
        parentHash: next() % 2 === 0 ? null : u64(),
        blocks: Array.from({ length: next() % 4 }, () => ({ blockHash: u64(), tokensHash: u64() })),
      };
    } else if (kind === 1) {
      data = { type: 'removed', blockHashes: Array.from({ length: next() % 4 }, u64) };
    } else {
      data = { type: 'cleared' };
    }
    const event: RouterEvent = { workerId: u64(), event: { eventId: u64(), data } };
    if (next() % 2 === 0) event.event.dpRank = next() % 2 === 0 ? 0xffffffff : next() % 8;
    events.push(event);
  }
  return events;
}

describe('u64 decimal writer', () => {
  it('matches BigInt toString for random halves of every magnitude', () => {
    const next = rng(99);
    const buf = new Uint8Array(24);
    const wrong: string[] = [];
    for (let i = 0; i < 20000; i++) {
      const hi = next() >>> (i % 33);
      const lo = next() >>> ((i * 7) % 33);
      const end = writeU64Decimal(buf, 2, lo, hi);
      const want = ((BigInt(hi) << 32n) | BigInt(lo)).toString();
      if (text(buf.subarray(2, end)) !== want) wrong.push(want);
    }
    expect(wrong).toEqual([]);
  });

  it('prints the boundaries exactly', () => {
    const buf = new Uint8Array(24);
    const cases: [number, number][] = [[0, 0], [0xffffffff, 0xffffffff], [0, 0x200000], [0xffffffff, 0x1fffff], [99999999, 0]];
    for (const [lo, hi] of cases) {
      const end = writeU64Decimal(buf, 0, lo, hi);
      expect(text(buf.subarray(0, end))).toBe(((BigInt(hi) << 32n) | BigInt(lo)).toString());
    }
    const end = writeUintDecimal(buf, 0, Number.MAX_SAFE_INTEGER);
    expect(text(buf.subarray(0, end))).toBe(String(Number.MAX_SAFE_INTEGER));
  });
});

describe('jsonl snapshot layout', () => {
  it('writes a single-block Stored dump event as compact serde JSON', () => {
    const w = createSnapshotWriter('jsonl');
    w.beginStored(7, 0, false, 0, 0);
    w.block(100, 0, 1, 0);
    w.endStored();
    expect(text(w.finish())).toBe(
      '{"worker_id":7,"event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":100,"tokens_hash":1}]}}}}\n',
    );
  });

  it('writes the reference examples of Removed and Cleared, dp_rank only when given', () => {
    const worker = 7587889975016782855n;
    const bytes = encodeSnapshot(
      [
        { workerId: worker, event: { eventId: 43n, data: { type: 'removed', blockHashes: [4945711292740353085n] } } },
        { workerId: worker, event: { eventId: 44n, data: { type: 'cleared' }, dpRank: 3 } },
      ],
      'jsonl',
    );
    expect(text(bytes)).toBe(
      '{"worker_id":7587889975016782855,"event":{"event_id":43,"data":{"removed":{"block_hashes":[4945711292740353085]}}}}\n' +
        '{"worker_id":7587889975016782855,"event":{"event_id":44,"data":"cleared","dp_rank":3}}\n',
    );
  });

  it('writes a multi-block Stored event with a parent like the reference example', () => {
    const bytes = encodeSnapshot(
      [
        {
          workerId: 7587889975016782855n,
          event: {
            eventId: 42n,
            data: {
              type: 'stored',
              parentHash: 18446744073709551615n,
              blocks: [
                { blockHash: 14643705804678351452n, tokensHash: 14643705804678351452n },
                { blockHash: 4945711292740353085n, tokensHash: 16777012769546811212n },
              ],
            },
          },
        },
      ],
      'jsonl',
    );
    expect(text(bytes)).toBe(
      '{"worker_id":7587889975016782855,"event":{"event_id":42,"data":{"stored":{"parent_hash":18446744073709551615,' +
        '"blocks":[{"block_hash":14643705804678351452,"tokens_hash":14643705804678351452},' +
        '{"block_hash":4945711292740353085,"tokens_hash":16777012769546811212}]}}}}\n',
    );
  });

  it('every line equals formatRouterEvent of its event', () => {
    const events = randomEvents(5, 300);
    expect(text(encodeSnapshot(events, 'jsonl'))).toBe(events.map((e) => formatRouterEvent(e) + '\n').join(''));
  });

  it('an empty snapshot is the empty byte string', () => {
    expect(encodeSnapshot([], 'jsonl').length).toBe(0);
    expect(decodeSnapshot(new Uint8Array(0), 'jsonl')).toEqual([]);
  });
});

describe('jsonl round trips', () => {
  it('decode(encode(events)) equals events, hashes up to 2^64-1', () => {
    const events = randomEvents(6, 300);
    expect(decodeSnapshot(encodeSnapshot(events, 'jsonl'), 'jsonl')).toEqual(events);
  });

  it('iterateSnapshot yields the decoded events', () => {
    const bytes = encodeSnapshot(randomEvents(7, 40), 'jsonl');
    expect([...iterateSnapshot(bytes, 'jsonl')]).toEqual(decodeSnapshot(bytes, 'jsonl'));
  });

  it('accepts a last line without its newline and whitespace after the last event', () => {
    const events = randomEvents(8, 3);
    const full = text(encodeSnapshot(events, 'jsonl'));
    expect(decodeSnapshot(bytesOf(full.slice(0, -1)), 'jsonl')).toEqual(events);
    expect(decodeSnapshot(bytesOf(full + '\n'), 'jsonl')).toEqual(events);
    expect(decodeSnapshot(bytesOf(full + ' \r\n'), 'jsonl')).toEqual(events);
  });
});

describe('jsonl decode errors', () => {
  it('names the 1-based line of a malformed event and keeps the parser error as cause', () => {
    const lines = text(encodeSnapshot(randomEvents(9, 3), 'jsonl')).split('\n');
    lines[1] = lines[1]!.slice(0, 20);
    let caught: unknown;
    try {
      decodeSnapshot(bytesOf(lines.join('\n')), 'jsonl');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(EventParseError);
    const err = caught as EventParseError;
    expect(err.message).toMatch(/line 2\b/);
    expect(err.code).toBe(ErrorCode.InvalidJson);
    expect(err.cause).toBeInstanceOf(KvIndexError);
  });

  it('keeps the parser code for a bad field', () => {
    const bad = '{"worker_id":-1,"event":{"event_id":0,"data":"cleared"}}\n';
    expect(() => decodeSnapshot(bytesOf(bad), 'jsonl')).toThrow(expect.objectContaining({ code: ErrorCode.InvalidField }));
  });

  it('rejects a blank line between events', () => {
    const full = text(encodeSnapshot(randomEvents(10, 2), 'jsonl'));
    const [a, b] = full.split('\n');
    expect(() => decodeSnapshot(bytesOf(`${a}\n\n${b}\n`), 'jsonl')).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidJson, message: expect.stringMatching(/line 2\b/) }),
    );
  });
});
