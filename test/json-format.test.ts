import { describe, expect, it } from 'vitest';
import { ErrorCode, EventParseError } from '../src/errors.js';
import { formatRecorderLine, formatRouterEvent } from '../src/protocol/json-format.js';
import { parseRecorderLine, parseRouterEvent } from '../src/protocol/json-parse.js';
import type { KvCacheEventData, RouterEvent } from '../src/protocol/types.js';

// The three literal examples of the Dynamo reference, section 1.2 (serde_json output).
const EXAMPLES = [
  '{"worker_id":7587889975016782855,"event":{"event_id":42,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":14643705804678351452,"tokens_hash":14643705804678351452},{"block_hash":4945711292740353085,"tokens_hash":16777012769546811212}]}}}}',
  '{"worker_id":7587889975016782855,"event":{"event_id":43,"data":{"removed":{"block_hashes":[4945711292740353085]}}}}',
  '{"worker_id":7587889975016782855,"event":{"event_id":44,"data":"cleared"}}',
];

const U64_MAX = 18446744073709551615n;

function event(data: KvCacheEventData, dpRank?: number): RouterEvent {
  const inner = dpRank === undefined ? { eventId: 1n, data } : { eventId: 1n, data, dpRank };
  return { workerId: 2n, event: inner };
}

function formatError(e: RouterEvent): EventParseError {
  try {
    formatRouterEvent(e);
  } catch (err) {
    expect(err).toBeInstanceOf(EventParseError);
    return err as EventParseError;
  }
  throw new Error('expected a throw');
}

describe('formatRouterEvent', () => {
  it('round-trips the reference examples byte for byte', () => {
    for (const text of EXAMPLES) expect(formatRouterEvent(parseRouterEvent(text))).toBe(text);
  });

  it('writes the serde field order whatever the input order and spacing', () => {
    const messy =
      '{ "event" : { "data" : { "stored" : { "blocks" : [ { "tokens_hash" : 14643705804678351452 , "block_hash" : 14643705804678351452 },' +
      '{"mm_extra_info":null,"tokens_hash":16777012769546811212,"block_hash":4945711292740353085} ] } } , "event_id" : 42 } , "worker_id" : 7587889975016782855 }';
    expect(formatRouterEvent(parseRouterEvent(messy))).toBe(EXAMPLES[0]);
  });

  it('writes dp_rank after data only when dpRank is present', () => {
    expect(formatRouterEvent(event({ type: 'cleared' }))).toBe('{"worker_id":2,"event":{"event_id":1,"data":"cleared"}}');
    expect(formatRouterEvent(event({ type: 'cleared' }, 0))).toBe('{"worker_id":2,"event":{"event_id":1,"data":"cleared","dp_rank":0}}');
    expect(formatRouterEvent(event({ type: 'removed', blockHashes: [5n] }, 4294967295))).toBe(
      '{"worker_id":2,"event":{"event_id":1,"data":{"removed":{"block_hashes":[5]}},"dp_rank":4294967295}}',
    );
  });

  it('writes a parent hash and empty lists', () => {
    expect(formatRouterEvent(event({ type: 'stored', parentHash: 7n, blocks: [] }))).toBe(
      '{"worker_id":2,"event":{"event_id":1,"data":{"stored":{"parent_hash":7,"blocks":[]}}}}',
    );
    expect(formatRouterEvent(event({ type: 'removed', blockHashes: [] }))).toBe(
      '{"worker_id":2,"event":{"event_id":1,"data":{"removed":{"block_hashes":[]}}}}',
    );
  });

  it('round-trips 0, 2^53 + 1 and 2^64 - 1 in every field', () => {
    for (const v of [0n, 9007199254740993n, U64_MAX]) {
      const e: RouterEvent = {
        workerId: v,
        event: { eventId: v, data: { type: 'stored', parentHash: v, blocks: [{ blockHash: v, tokensHash: v }] } },
      };
      const text = formatRouterEvent(e);
      expect(text).toBe(
        `{"worker_id":${v},"event":{"event_id":${v},"data":{"stored":{"parent_hash":${v},"blocks":[{"block_hash":${v},"tokens_hash":${v}}]}}}}`,
      );
      expect(parseRouterEvent(text)).toStrictEqual(e);
    }
  });

  it('rejects out-of-range or non-bigint hashes with the field path', () => {
    const blocks = [
      { blockHash: 1n, tokensHash: 2n },
      { blockHash: 3n, tokensHash: U64_MAX + 1n },
    ];
    let e = formatError(event({ type: 'stored', parentHash: null, blocks }));
    expect(e.code).toBe(ErrorCode.InvalidField);
    expect(e.message).toMatch(/^event\.data\.stored\.blocks\[1\]\.tokens_hash: .*18446744073709551616n/);
    e = formatError({ workerId: -1n, event: { eventId: 1n, data: { type: 'cleared' } } });
    expect(e.message).toMatch(/^worker_id: /);
    e = formatError(event({ type: 'removed', blockHashes: [1n, 2 as unknown as bigint] }));
    expect(e.message).toMatch(/^event\.data\.removed\.block_hashes\[1\]: .*number 2/);
    e = formatError(event({ type: 'stored', parentHash: -3n, blocks: [] }));
    expect(e.message).toMatch(/^event\.data\.stored\.parent_hash: /);
    e = formatError({ workerId: 1n, event: { eventId: 2 as unknown as bigint, data: { type: 'cleared' } } });
    expect(e.message).toMatch(/^event\.event_id: /);
  });

  it('rejects a dpRank outside u32', () => {
    for (const rank of [-1, 1.5, 4294967296, Number.NaN]) {
      const e = formatError(event({ type: 'cleared' }, rank));
      expect(e.code).toBe(ErrorCode.InvalidField);
      expect(e.message).toMatch(/^event\.dp_rank: /);
    }
  });

  it('rejects an unknown data type', () => {
    const e = formatError(event({ type: 'moved' } as unknown as KvCacheEventData));
    expect(e.code).toBe(ErrorCode.InvalidField);
    expect(e.message).toMatch(/^event\.data\.type: unknown variant "moved"/);
  });
});

describe('formatRecorderLine', () => {
  it('writes the compact recorder layout and round-trips', () => {
    const line = { timestamp: 1500, event: parseRouterEvent(EXAMPLES[2]!) };
    const text = formatRecorderLine(line);
    expect(text).toBe(`{"timestamp":1500,"event":${EXAMPLES[2]}}`);
    expect(parseRecorderLine(text)).toStrictEqual(line);
  });

  it('rejects a negative or fractional timestamp', () => {
    const ev = parseRouterEvent(EXAMPLES[2]!);
    expect(() => formatRecorderLine({ timestamp: -1, event: ev })).toThrow(/^timestamp: /);
    expect(() => formatRecorderLine({ timestamp: 0.5, event: ev })).toThrow(EventParseError);
  });
});
