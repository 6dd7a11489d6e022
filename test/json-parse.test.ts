import { describe, expect, it } from 'vitest';
import { ErrorCode, EventParseError, KvIndexError } from '../src/errors.js';
import { parseRecorderLine, parseRouterEvent } from '../src/protocol/json-parse.js';
import { parseJsonLossless, parseU64Array, type JsonObject } from '../src/protocol/json-value.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { parseU64Decimal } from '../src/protocol/u64-text.js';

// The three literal examples of the Dynamo reference, section 1.2.
const STORED =
  '{"worker_id":7587889975016782855,"event":{"event_id":42,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":14643705804678351452,"tokens_hash":14643705804678351452},{"block_hash":4945711292740353085,"tokens_hash":16777012769546811212}]}}}}';
const REMOVED =
  '{"worker_id":7587889975016782855,"event":{"event_id":43,"data":{"removed":{"block_hashes":[4945711292740353085]}}}}';
const CLEARED = '{"worker_id":7587889975016782855,"event":{"event_id":44,"data":"cleared"}}';

const W = 7587889975016782855n;
const U64_MAX = 18446744073709551615n;

function stored(parentHash: bigint | null, blocks: Array<[bigint, bigint]>, extra = ''): string {
  const list = blocks.map(([b, t]) => `{"block_hash":${b},"tokens_hash":${t}}`).join(',');
  return `{"worker_id":1,"event":{"event_id":0,"data":{"stored":{"parent_hash":${parentHash ?? 'null'},"blocks":[${list}]}}${extra}}}`;
}

/** The error thrown by `fn`, asserting it is an EventParseError. */
function thrown(fn: () => unknown): EventParseError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(EventParseError);
    expect(e).toBeInstanceOf(KvIndexError);
    return e as EventParseError;
  }
  throw new Error('expected a throw');
}

function expectError(text: string, code: string, message?: string | RegExp): void {
  const e = thrown(() => parseRouterEvent(text));
  expect(e.code, e.message).toBe(code);
  if (message !== undefined) expect(e.message).toMatch(message);
}

describe('parseRouterEvent: reference examples', () => {
  it('parses the stored example losslessly', () => {
    expect(parseRouterEvent(STORED)).toStrictEqual({
      workerId: W,
      event: {
        eventId: 42n,
        data: {
          type: 'stored',
          parentHash: null,
          blocks: [
            { blockHash: 14643705804678351452n, tokensHash: 14643705804678351452n },
            { blockHash: 4945711292740353085n, tokensHash: 16777012769546811212n },
          ],
        },
      },
    });
  });

  it('parses the removed example', () => {
    expect(parseRouterEvent(REMOVED)).toStrictEqual({
      workerId: W,
      event: { eventId: 43n, data: { type: 'removed', blockHashes: [4945711292740353085n] } },
    });
  });

  it('parses the cleared example', () => {
    expect(parseRouterEvent(CLEARED)).toStrictEqual({ workerId: W, event: { eventId: 44n, data: { type: 'cleared' } } });
  });

  it('gives the same result for string, Uint8Array and Buffer input', () => {
    for (const text of [STORED, REMOVED, CLEARED]) {
      const expected = parseRouterEvent(text);
      expect(parseRouterEvent(new TextEncoder().encode(text))).toStrictEqual(expected);
      expect(parseRouterEvent(Buffer.from(text))).toStrictEqual(expected);
    }
  });

  it('returns plain objects', () => {
    const e = parseRouterEvent(STORED);
    expect(Object.getPrototypeOf(e)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(e.event)).toBe(Object.prototype);
    const data = e.event.data;
    expect(Object.getPrototypeOf(data)).toBe(Object.prototype);
    if (data.type !== 'stored') throw new Error('stored expected');
    expect(Array.isArray(data.blocks)).toBe(true);
    expect(Object.getPrototypeOf(data.blocks[0])).toBe(Object.prototype);
    expect(Object.keys(e.event)).toEqual(['eventId', 'data']);
  });
});

describe('parseU64Array: every digit count', () => {
  // The scanner reads runs of four digits at once: every length from 1 to 25 digits, each digit
  // value in each position, a non-digit right after a run, and the u64 boundary.
  it('reads 1..20 digit numbers exactly and rejects 21+ digits as above 2^64-1', () => {
    for (let len = 1; len <= 25; len++) {
      for (const lead of ['1', '9']) {
        for (const fill of ['0', '5', '9']) {
          const text = lead + fill.repeat(len - 1);
          const v = BigInt(text);
          if (v <= U64_MAX) expect(parseU64Array(`[${text},${text}]`)).toStrictEqual(new BigUint64Array([v, v]));
          else expect(() => parseU64Array(`[${text}]`)).toThrow(/above 2\^64-1/);
        }
      }
    }
    for (let i = 0; i < 2000; i++) {
      const v = (BigInt(i) * 0x9e3779b97f4a7c15n + 0x1234567n) & U64_MAX;
      const shifted = v >> BigInt(i % 64);
      expect(parseU64Array(`[${shifted}]`)[0]).toBe(shifted);
    }
    expect(() => parseU64Array('[18446744073709551616]')).toThrow(/above 2\^64-1/);
    expect(() => parseU64Array('[99999999999999999999]')).toThrow(/above 2\^64-1/);
  });

  it('stops a run of digits at every kind of following byte', () => {
    for (const after of [':', '/', '.', 'e', 'E', ' ', ']', 'a', '\u00ff']) {
      for (let len = 1; len <= 20; len++) {
        const digits = '1' + '7'.repeat(len - 1); // 20 digits stay under 2^64
        const text = `[${digits}${after}`;
        if (after === ']') expect(parseU64Array(text)[0]).toBe(BigInt(digits));
        else if (after === ' ') expect(parseU64Array(`${text}]`)[0]).toBe(BigInt(digits));
        else expect(() => parseU64Array(`${text}1]`)).toThrow(EventParseError);
      }
    }
  });
});

describe('parseRouterEvent: u64 values', () => {
  const cases: Array<[string, bigint]> = [
    ['0', 0n],
    ['1', 1n],
    ['4294967295', 0xffffffffn],
    ['4294967296', 0x100000000n],
    ['999999999999999', 999999999999999n], // 15 digits: the number fast path
    ['1000000000000000', 1000000000000000n], // 16 digits
    ['9007199254740991', 9007199254740991n],
    ['9007199254740993', 9007199254740993n], // 2^53 + 1: JSON.parse would round it
    ['9999999999999999999', 9999999999999999999n], // 19 digits
    ['10000000000000000000', 10000000000000000000n], // 20 digits
    ['18446744073709551614', U64_MAX - 1n],
    ['18446744073709551615', U64_MAX],
  ];
  for (const [text, value] of cases) {
    it(`reads ${text} exactly in every u64 field`, () => {
      const e = parseRouterEvent(
        `{"worker_id":${text},"event":{"event_id":${text},"data":{"stored":{"parent_hash":${text},"blocks":[{"block_hash":${text},"tokens_hash":${text}}]}}}}`,
      );
      expect(e.workerId).toBe(value);
      expect(e.event.eventId).toBe(value);
      expect(e.event.data).toStrictEqual({ type: 'stored', parentHash: value, blocks: [{ blockHash: value, tokensHash: value }] });
      const r = parseRouterEvent(`{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[${text},${text}]}}}}`);
      expect(r.event.data).toStrictEqual({ type: 'removed', blockHashes: [value, value] });
    });
  }

  it('reads random u64 values exactly', () => {
    let x = 0x9e3779b97f4a7c15n;
    for (let i = 0; i < 2000; i++) {
      x = (x * 6364136223846793005n + 1442695040888963407n) & U64_MAX;
      const v = x >> BigInt(i % 64);
      expect(parseRouterEvent(stored(v, [[v, x]])).event.data).toStrictEqual({
        type: 'stored',
        parentHash: v,
        blocks: [{ blockHash: v, tokensHash: x }],
      });
    }
  });
});

describe('parseRouterEvent: accepted variations', () => {
  it('accepts any JSON whitespace between tokens', () => {
    const text =
      ' \t\r\n{ "worker_id" :\n7587889975016782855 ,\r\n "event" : {\t"event_id": 42 , "data" : { "stored" : { "parent_hash" : null ,' +
      ' "blocks" : [ { "block_hash" : 14643705804678351452 , "tokens_hash" : 14643705804678351452 } ,\n' +
      '{"block_hash":4945711292740353085,"tokens_hash":16777012769546811212}\n ] } } } }\n\n';
    expect(parseRouterEvent(text)).toStrictEqual(parseRouterEvent(STORED));
  });

  it('accepts any key order', () => {
    const text =
      '{"event":{"data":{"stored":{"blocks":[{"tokens_hash":14643705804678351452,"block_hash":14643705804678351452},{"tokens_hash":16777012769546811212,"block_hash":4945711292740353085}],"parent_hash":null}},"event_id":42},"worker_id":7587889975016782855}';
    expect(parseRouterEvent(text)).toStrictEqual(parseRouterEvent(STORED));
  });

  it('treats a missing parent_hash as null', () => {
    const e = parseRouterEvent('{"worker_id":1,"event":{"event_id":2,"data":{"stored":{"blocks":[{"block_hash":3,"tokens_hash":4}]}}}}');
    expect(e.event.data).toStrictEqual({ type: 'stored', parentHash: null, blocks: [{ blockHash: 3n, tokensHash: 4n }] });
  });

  it('accepts empty blocks and block_hashes', () => {
    expect(parseRouterEvent(stored(null, [])).event.data).toStrictEqual({ type: 'stored', parentHash: null, blocks: [] });
    expect(parseRouterEvent('{"worker_id":1,"event":{"event_id":2,"data":{"removed":{"block_hashes":[ ]}}}}').event.data).toStrictEqual({
      type: 'removed',
      blockHashes: [],
    });
  });

  it('reads dp_rank into dpRank, and leaves dpRank absent without it', () => {
    const withRank = parseRouterEvent('{"worker_id":1,"event":{"event_id":2,"data":"cleared","dp_rank":3}}');
    expect(withRank.event).toStrictEqual({ eventId: 2n, data: { type: 'cleared' }, dpRank: 3 });
    const max = parseRouterEvent('{"worker_id":1,"event":{"dp_rank":4294967295,"event_id":2,"data":"cleared"}}');
    expect(max.event.dpRank).toBe(4294967295);
    const without = parseRouterEvent(CLEARED);
    expect('dpRank' in without.event).toBe(false);
  });

  it('skips mm_extra_info on blocks, null or not', () => {
    const text =
      '{"worker_id":1,"event":{"event_id":2,"data":{"stored":{"parent_hash":5,"blocks":[{"block_hash":3,"tokens_hash":4,"mm_extra_info":null},' +
      '{"block_hash":6,"mm_extra_info":{"mm_objects":[{"mm_hash":18446744073709551615,"offsets":[[0,4],[5,9]]}]},"tokens_hash":7}]}},"dp_rank":0}}';
    expect(parseRouterEvent(text).event).toStrictEqual({
      eventId: 2n,
      data: { type: 'stored', parentHash: 5n, blocks: [{ blockHash: 3n, tokensHash: 4n }, { blockHash: 6n, tokensHash: 7n }] },
      dpRank: 0,
    });
  });

  it('skips unknown keys with any value at every level', () => {
    const junk = '{"a":[1,-2.5e-3,true,false,null,{"b":{}},[],[[]]],"s":"q\\"uo\\\\te \\u00e9\\ud83d\\ude00 \\/\\b\\f\\n\\r\\t é 😀"}';
    const text =
      `{"x":${junk},"worker_id":1,"y":"str","event":{"z":[${junk}],"event_id":2,"data":{"stored":{"u":-1,"parent_hash":null,"v":1e400,` +
      `"blocks":[{"w":${junk},"block_hash":3,"tokens_hash":4,"k":"}"}]}},"tail":null},"t":true}`;
    expect(parseRouterEvent(text)).toStrictEqual({
      workerId: 1n,
      event: { eventId: 2n, data: { type: 'stored', parentHash: null, blocks: [{ blockHash: 3n, tokensHash: 4n }] } },
    });
    expect(parseRouterEvent(Buffer.from(text))).toStrictEqual(parseRouterEvent(text));
    const removed = `{"worker_id":1,"event":{"event_id":2,"data":{"removed":{"x":${junk},"block_hashes":[9],"y":[]}}}}`;
    expect(parseRouterEvent(removed).event.data).toStrictEqual({ type: 'removed', blockHashes: [9n] });
  });

  it('skips deeply nested unknown values without recursion', () => {
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    expect(parseRouterEvent(`{"deep":${deep},"worker_id":1,"event":{"event_id":2,"data":"cleared"}}`).workerId).toBe(1n);
    expectError(`{"deep":${'['.repeat(100_000)},"worker_id":1}`, ErrorCode.InvalidJson);
  });

  it('decodes escapes in keys, as serde does', () => {
    const text = '{"worker\\u005fid":1,"ev\\u0065nt":{"event_id":2,"d\\u0061ta":{"st\\u006fred":{"bl\\u006fcks":[{"block\\u005fhash":3,"tokens_hash":4}]}}}}';
    expect(parseRouterEvent(text).event.data).toStrictEqual({ type: 'stored', parentHash: null, blocks: [{ blockHash: 3n, tokensHash: 4n }] });
  });

  it('accepts {"cleared":null}, which serde_json accepts for a unit variant', () => {
    expect(parseRouterEvent('{"worker_id":1,"event":{"event_id":2,"data":{"cleared":null}}}').event.data).toStrictEqual({ type: 'cleared' });
  });
});

describe('parseRouterEvent: malformed JSON -> InvalidJson', () => {
  const cases: Array<[string, string]> = [
    ['empty input', ''],
    ['whitespace only', ' \n'],
    ['not JSON', 'hello'],
    ['trailing garbage', `${CLEARED}x`],
    ['a second value', `${CLEARED}{}`],
    ['a trailing comma in an object', '{"worker_id":1,}'],
    ['a trailing comma in an array', stored(null, [[1n, 2n]]).replace(']', ',]')],
    ['a missing colon', '{"worker_id" 1}'],
    ['a single-quoted key', "{'worker_id':1}"],
    ['an unquoted key', '{worker_id:1}'],
    ['a leading zero', '{"worker_id":01,"event":{}}'],
    ['a lone minus', '{"worker_id":-,"event":{}}'],
    ['a dot without digits', '{"worker_id":1.,"event":{}}'],
    ['a leading dot', '{"worker_id":.5,"event":{}}'],
    ['a plus sign', '{"worker_id":+1,"event":{}}'],
    ['an empty exponent', '{"worker_id":1e,"event":{}}'],
    ['a misspelt literal', '{"x":nul,"worker_id":1}'],
    ['a raw control character in a string', '{"x":"a\tb","worker_id":1}'],
    ['a bad escape', '{"x":"\\x41","worker_id":1}'],
    ['a short unicode escape', '{"x":"\\u12","worker_id":1}'],
    ['an unterminated string', '{"x":"abc'],
    ['a byte order mark', `\ufeff${CLEARED}`],
    ['NaN', '{"x":NaN,"worker_id":1}'],
  ];
  for (const [name, text] of cases) {
    it(`rejects ${name}`, () => expectError(text, ErrorCode.InvalidJson, /at byte \d+/));
  }

  it('rejects every truncation of the examples', () => {
    for (const text of [STORED, REMOVED, CLEARED]) {
      for (let n = 0; n < text.length; n++) expectError(text.slice(0, n), ErrorCode.InvalidJson);
    }
  });

  it('rejects invalid UTF-8 in a decoded string', () => {
    const bytes = Buffer.concat([Buffer.from('{"worker_id":1,"event":{"event_id":2,"data":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}}')]);
    expect(thrown(() => parseRouterEvent(bytes)).code).toBe(ErrorCode.InvalidJson);
  });

  it('rejects input that is neither a string nor bytes', () => {
    expect(thrown(() => parseRouterEvent(42 as unknown as string)).code).toBe(ErrorCode.InvalidJson);
  });
});

describe('parseRouterEvent: wrong fields -> InvalidField with the path', () => {
  const cases: Array<[string, string, string]> = [
    ['a root array', '[1]', '(root): expected an object, found an array'],
    ['a root number', '42', '(root): expected an object, found a number'],
    ['a string worker_id', '{"worker_id":"1","event":{}}', 'worker_id: expected an unsigned integer, found a string'],
    ['a negative worker_id (i64-era ids are rejected)', '{"worker_id":-5,"event":{}}', 'worker_id: expected an unsigned integer, found -5'],
    ['a fractional worker_id', '{"worker_id":1.5,"event":{}}', 'worker_id: expected an unsigned integer, found 1.5'],
    ['an integral float worker_id', '{"worker_id":1.0,"event":{}}', 'worker_id: expected an unsigned integer, found 1.0'],
    ['an exponent', '{"worker_id":1e3,"event":{}}', 'worker_id: expected an unsigned integer, found 1e3'],
    ['an upper-case exponent', '{"worker_id":1E+3,"event":{}}', 'worker_id: expected an unsigned integer, found 1E+3'],
    ['2^64', '{"worker_id":18446744073709551616,"event":{}}', 'worker_id: 18446744073709551616 is above 2^64-1'],
    ['a 20-digit value above 2^64', '{"worker_id":99999999999999999999,"event":{}}', 'worker_id: 99999999999999999999 is above 2^64-1'],
    ['21 digits', '{"worker_id":100000000000000000000,"event":{}}', 'worker_id: 100000000000000000000 is above 2^64-1'],
    ['a null event', '{"worker_id":1,"event":null}', 'event: expected an object, found a null'],
    ['a boolean event_id', '{"worker_id":1,"event":{"event_id":true,"data":"cleared"}}', 'event.event_id: expected an unsigned integer, found a boolean'],
    ['a numeric data', '{"worker_id":1,"event":{"event_id":1,"data":5}}', 'event.data: expected a variant name or a single-key object, found a number'],
    ['an empty data object', '{"worker_id":1,"event":{"event_id":1,"data":{}}}', 'event.data: expected a single-key object'],
    ['two variants', '{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[]},"cleared":null}}}', 'event.data: expected a single-key object naming the variant, found more keys'],
    ['a unit-form stored', '{"worker_id":1,"event":{"event_id":1,"data":"stored"}}', 'event.data: variant "stored" needs a payload'],
    ['a cleared with a payload', '{"worker_id":1,"event":{"event_id":1,"data":{"cleared":{}}}}', 'event.data.cleared: expected null, found an object'],
    ['a null dp_rank', '{"worker_id":1,"event":{"event_id":1,"data":"cleared","dp_rank":null}}', 'event.dp_rank: expected an unsigned integer, found a null'],
    ['a dp_rank above u32', '{"worker_id":1,"event":{"event_id":1,"data":"cleared","dp_rank":4294967296}}', 'event.dp_rank: 4294967296 is above 4294967295'],
    ['a negative dp_rank', '{"worker_id":1,"event":{"event_id":1,"data":"cleared","dp_rank":-1}}', 'event.dp_rank: expected an unsigned integer, found -1'],
    ['a string parent_hash', '{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":"1","blocks":[]}}}}', 'event.data.stored.parent_hash: expected an unsigned integer, found a string'],
    ['an object blocks', '{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":{}}}}}', 'event.data.stored.blocks: expected an array, found an object'],
    ['a number as a block', '{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1,"tokens_hash":2},7]}}}}', 'event.data.stored.blocks[1]: expected an object, found a number'],
    ['a null block_hash', stored(null, [[1n, 2n], [3n, 4n], [5n, 6n], [7n, 8n]]).replace('"block_hash":7', '"block_hash":null'), 'event.data.stored.blocks[3].block_hash: expected an unsigned integer, found a null'],
    ['a negative tokens_hash', stored(null, [[1n, 2n], [3n, -4n]]), 'event.data.stored.blocks[1].tokens_hash: expected an unsigned integer, found -4'],
    ['an oversized tokens_hash', stored(null, [[1n, 18446744073709551616n]]), 'event.data.stored.blocks[0].tokens_hash: 18446744073709551616 is above 2^64-1'],
    ['a string in block_hashes', '{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[1,"2"]}}}}', 'event.data.removed.block_hashes[1]: expected an unsigned integer, found a string'],
    ['a fraction in block_hashes', '{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[1,2,3.25]}}}}', 'event.data.removed.block_hashes[2]: expected an unsigned integer, found 3.25'],
  ];
  for (const [name, text, message] of cases) {
    it(`rejects ${name}`, () => {
      const e = thrown(() => parseRouterEvent(text));
      expect(e.code, e.message).toBe(ErrorCode.InvalidField);
      expect(e.message.startsWith(message), e.message).toBe(true);
    });
  }

  it('reports a malformed value of the wrong type as InvalidJson, not InvalidField', () => {
    expectError('{"worker_id":"abc', ErrorCode.InvalidJson);
    expectError('{"worker_id":tru}', ErrorCode.InvalidJson);
    expectError('{"worker_id":[1,}', ErrorCode.InvalidJson);
  });

  const missing: Array<[string, string]> = [
    ['{"event":{"event_id":1,"data":"cleared"}}', 'worker_id'],
    ['{"worker_id":1}', 'event'],
    ['{"worker_id":1,"event":{"data":"cleared"}}', 'event.event_id'],
    ['{"worker_id":1,"event":{"event_id":1}}', 'event.data'],
    ['{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":null}}}}', 'event.data.stored.blocks'],
    ['{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1,"tokens_hash":2},{"tokens_hash":2}]}}}}', 'event.data.stored.blocks[1].block_hash'],
    ['{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{}]}}}}', 'event.data.stored.blocks[0].block_hash'],
    ['{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1}]}}}}', 'event.data.stored.blocks[0].tokens_hash'],
    ['{"worker_id":1,"event":{"event_id":1,"data":{"removed":{}}}}', 'event.data.removed.block_hashes'],
  ];
  for (const [text, path] of missing) {
    it(`rejects a missing ${path}`, () => expectError(text, ErrorCode.InvalidField, `${path}: missing field`));
  }

  const duplicates: Array<[string, string]> = [
    ['{"worker_id":1,"worker_id":1,"event":{"event_id":1,"data":"cleared"}}', 'worker_id'],
    ['{"worker_id":1,"event":{"event_id":1,"data":"cleared"},"event":{}}', 'event'],
    ['{"worker_id":1,"event":{"event_id":1,"event_id":1,"data":"cleared"}}', 'event.event_id'],
    ['{"worker_id":1,"event":{"event_id":1,"data":"cleared","data":"cleared"}}', 'event.data'],
    ['{"worker_id":1,"event":{"event_id":1,"data":"cleared","dp_rank":0,"dp_rank":0}}', 'event.dp_rank'],
    ['{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":null,"parent_hash":1,"blocks":[]}}}}', 'event.data.stored.parent_hash'],
    ['{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[],"blocks":[]}}}}', 'event.data.stored.blocks'],
    ['{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1,"tokens_hash":2,"block_hash":1}]}}}}', 'event.data.stored.blocks[0].block_hash'],
    ['{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[],"block_hashes":[]}}}}', 'event.data.removed.block_hashes'],
  ];
  for (const [text, path] of duplicates) {
    it(`rejects a duplicate ${path}, as serde does`, () => expectError(text, ErrorCode.InvalidField, `${path}: duplicate field`));
  }

  it('accepts duplicate unknown keys', () => {
    expect(parseRouterEvent('{"x":1,"x":2,"worker_id":1,"event":{"event_id":1,"data":"cleared"}}').workerId).toBe(1n);
  });
});

describe('parseRouterEvent: unknown variants -> UnknownVariant', () => {
  it('rejects an unknown tagged variant', () => {
    expectError('{"worker_id":1,"event":{"event_id":1,"data":{"moved":{"block_hashes":[]}}}}', ErrorCode.UnknownVariant, 'event.data: unknown variant "moved"');
  });

  it('rejects an unknown unit variant', () => {
    expectError('{"worker_id":1,"event":{"event_id":1,"data":"foo"}}', ErrorCode.UnknownVariant, 'event.data: unknown variant "foo"');
  });

  it('is case-sensitive, like serde', () => {
    expectError('{"worker_id":1,"event":{"event_id":1,"data":"Cleared"}}', ErrorCode.UnknownVariant);
  });
});

describe('parseRecorderLine', () => {
  it('parses a recorder line with whitespace', () => {
    const line: { timestamp: number; event: RouterEvent } = parseRecorderLine(`{"timestamp": 1234, "event": ${STORED}}`);
    expect(line).toStrictEqual({ timestamp: 1234, event: parseRouterEvent(STORED) });
  });

  it('accepts the keys in any order and skips unknown ones', () => {
    expect(parseRecorderLine(`{"event":${CLEARED},"x":[1],"timestamp":0}`)).toStrictEqual({ timestamp: 0, event: parseRouterEvent(CLEARED) });
  });

  it('accepts a timestamp of 2^53 and rejects 2^53 + 1', () => {
    expect(parseRecorderLine(`{"timestamp":9007199254740992,"event":${CLEARED}}`).timestamp).toBe(2 ** 53);
    const e = thrown(() => parseRecorderLine(`{"timestamp":9007199254740993,"event":${CLEARED}}`));
    expect(e.code).toBe(ErrorCode.InvalidField);
    expect(e.message).toMatch(/^timestamp: 9007199254740993 is above/);
  });

  it('rejects a fractional or missing timestamp', () => {
    expect(thrown(() => parseRecorderLine(`{"timestamp":1.5,"event":${CLEARED}}`)).message).toMatch(/^timestamp: expected an unsigned integer/);
    expect(thrown(() => parseRecorderLine(`{"event":${CLEARED}}`)).message).toBe('timestamp: missing field');
    expect(thrown(() => parseRecorderLine('{"timestamp":1}')).message).toBe('event: missing field');
  });

  it('prefixes paths inside the event with event.', () => {
    const e = thrown(() => parseRecorderLine(`{"timestamp":1,"event":${stored(null, [[1n, -2n]])}}`));
    expect(e.message).toMatch(/^event\.event\.data\.stored\.blocks\[0\]\.tokens_hash: /);
    expect(thrown(() => parseRecorderLine('{"timestamp":1,"event":[]}')).message).toMatch(/^event: expected an object/);
  });

  it('rejects trailing garbage', () => {
    expect(thrown(() => parseRecorderLine(`{"timestamp":1,"event":${CLEARED}}}`)).code).toBe(ErrorCode.InvalidJson);
  });
});

describe('parseJsonLossless', () => {
  it('reads integers as bigint and other numbers as number', () => {
    expect(parseJsonLossless('[0,-0,1,-1,18446744073709551615,-9223372036854775808,123456789012345678901234567890,1.5,-2e3,1E-2,0.0]')).toStrictEqual([
      0n,
      0n,
      1n,
      -1n,
      18446744073709551615n,
      -9223372036854775808n,
      123456789012345678901234567890n,
      1.5,
      -2000,
      0.01,
      0,
    ]);
  });

  it('reads integers of more than 40 characters as numbers, never as bigints', () => {
    // No field takes one; BigInt of an 8 MiB integer took 3.4 s before its range check.
    expect(parseJsonLossless(`[${'9'.repeat(40)},${'9'.repeat(41)},-${'1'.repeat(60)}]`)).toStrictEqual([BigInt('9'.repeat(40)), 1e41, -Number('1'.repeat(60))]);
    const huge = parseJsonLossless(`{"block_hashes":[${'7'.repeat(8 << 20)}]}`) as JsonObject;
    expect(huge['block_hashes']).toEqual([Infinity]);
  });

  it('reads strings with every escape and non-ASCII text', () => {
    const text = '"a\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\\u00e9\\ud83d\\ude00 é 😀 \\ud800"';
    const expected = 'a"b\\c/d\be\ff\ng\rh\ti\u00e9\ud83d\ude00 é 😀 \ud800';
    expect(parseJsonLossless(text)).toBe(expected);
    expect(parseJsonLossless(new TextEncoder().encode(text))).toBe(expected);
  });

  it('reads objects as null-prototype objects, last duplicate winning', () => {
    const value = parseJsonLossless('{"a":{"b":[true,false,null]},"a2":{},"__proto__":1,"x":1,"x":2}') as JsonObject;
    expect(Object.getPrototypeOf(value)).toBe(null);
    expect(Object.keys(value)).toEqual(['a', 'a2', '__proto__', 'x']);
    expect(value['__proto__']).toBe(1n);
    expect(value['x']).toBe(2n);
    expect(value['a']).toStrictEqual(Object.assign(Object.create(null), { b: [true, false, null] }));
  });

  it('reads a workload match line', () => {
    const line = '{"op":"match","seq":[7722776227898372305,1402310473445588831],"expect":{"716632666546416052":2,"3458162621981714465":1}}';
    const value = parseJsonLossless(line) as JsonObject;
    expect(value['op']).toBe('match');
    expect(value['seq']).toStrictEqual([7722776227898372305n, 1402310473445588831n]);
    expect({ ...(value['expect'] as JsonObject) }).toStrictEqual({ '716632666546416052': 2n, '3458162621981714465': 1n });
  });

  it('reads scalars at the root and deep nesting without recursion', () => {
    expect(parseJsonLossless(' null ')).toBe(null);
    expect(parseJsonLossless('"x"')).toBe('x');
    let deep = parseJsonLossless('['.repeat(50_000) + '7' + ']'.repeat(50_000));
    for (let i = 0; i < 50_000; i++) deep = (deep as unknown[])[0] as typeof deep;
    expect(deep).toBe(7n);
  });

  it('rejects malformed JSON with InvalidJson', () => {
    for (const text of ['', '[1,]', '{"a"}', '{"a":1,}', '[1 2]', '01', '"\\u00"', 'tru', '[', '{"a":1}}', '1 2']) {
      expect(thrown(() => parseJsonLossless(text)).code, text).toBe(ErrorCode.InvalidJson);
    }
    expect(thrown(() => parseJsonLossless(Buffer.from([0x22, 0xc3, 0x28, 0x22]))).code).toBe(ErrorCode.InvalidJson);
  });
});

describe('parseU64Array', () => {
  it('reads a bare array without bigint loss', () => {
    expect(parseU64Array(' [0, 1,9007199254740993 ,18446744073709551615] ')).toStrictEqual(
      new BigUint64Array([0n, 1n, 9007199254740993n, 18446744073709551615n]),
    );
    expect(parseU64Array('[]')).toStrictEqual(new BigUint64Array(0));
  });

  it('reads the array under a top-level key, skipping the others', () => {
    const line = '{"op":"match","expect":{"1":[2]},"seq":[7722776227898372305,1402310473445588831],"z":"seq"}';
    expect(Array.from(parseU64Array(line, 'seq'))).toEqual([7722776227898372305n, 1402310473445588831n]);
  });

  it('grows past its initial capacity', () => {
    const values = Array.from({ length: 1000 }, (_, i) => (BigInt(i) * 0x9e3779b97f4a7c15n) & U64_MAX);
    expect(Array.from(parseU64Array(`{"seq":[${values.join(',')}]}`, 'seq'))).toEqual(values);
  });

  it('names the element in InvalidField errors', () => {
    const e = thrown(() => parseU64Array('{"seq":[1,2,-3]}', 'seq'));
    expect(e.code).toBe(ErrorCode.InvalidField);
    expect(e.message).toMatch(/^seq\[2\]: expected an unsigned integer, found -3/);
    expect(thrown(() => parseU64Array('{"other":[]}', 'seq')).message).toBe('seq: missing field');
    expect(thrown(() => parseU64Array('[18446744073709551616]')).message).toMatch(/^\(root\)\[0\]: /);
  });
});

describe('string input', () => {
  it('encodes long non-ASCII strings completely', () => {
    const filler = 'é😀'.repeat(20_000);
    const text = `{"pad":"${filler}","worker_id":1,"event":{"event_id":2,"data":"cleared"},"pad2":"${filler}"}`;
    expect(parseRouterEvent(text).workerId).toBe(1n);
    expect(parseJsonLossless(`["${filler}"]`)).toStrictEqual([filler]);
  });

  it('is not affected by a previous longer input', () => {
    parseRouterEvent(`{"pad":"${'x'.repeat(100_000)}","worker_id":1,"event":{"event_id":2,"data":"cleared"}}`);
    expect(thrown(() => parseRouterEvent('{"worker_id":1')).code).toBe(ErrorCode.InvalidJson);
    expect(parseRouterEvent(CLEARED).workerId).toBe(W);
  });
});

describe('parseU64Decimal', () => {
  it('reads canonical decimals in the u64 range', () => {
    expect(parseU64Decimal('0', 'w')).toBe(0n);
    expect(parseU64Decimal('716632666546416052', 'w')).toBe(716632666546416052n);
    expect(parseU64Decimal('18446744073709551615', 'w')).toBe(U64_MAX);
  });

  it('rejects anything else with InvalidField naming the field', () => {
    for (const text of ['', '-1', '+1', '01', '1.0', ' 1', '1e3', '0x10', '18446744073709551616', '123456789012345678901']) {
      const e = thrown(() => parseU64Decimal(text, 'meta.workers[2]'));
      expect(e.code, text).toBe(ErrorCode.InvalidField);
      expect(e.message).toMatch(/^meta\.workers\[2\]: /);
    }
  });
});
