/** showValue: a short text of any value for error messages, never throwing. */
import { describe, expect, it } from 'vitest';
import { clipText, ECHO_MAX_CHARS, showValue } from '../src/protocol/show-value.js';

describe('showValue', () => {
  it('shows scalars, quotes and cuts strings, names containers', () => {
    expect(showValue(18446744073709551615n)).toBe('18446744073709551615');
    expect(showValue(10n ** 1000n)).toBe('10000000000000000000... (1001 digits)');
    expect(showValue(-1.5)).toBe('-1.5');
    expect(showValue(true)).toBe('true');
    expect(showValue(undefined)).toBe('undefined');
    expect(showValue(null)).toBe('null');
    expect(showValue('a"b')).toBe('"a\\"b"');
    expect(showValue('x'.repeat(100))).toBe(`"${'x'.repeat(40)}"... (100 bytes)`);
    expect(showValue([1, 2])).toBe('an array of 2');
    expect(showValue({ a: 1 })).toBe('an object');
    expect(showValue(Symbol('s'))).toBe('a symbol');
    expect(showValue(() => 1)).toBe('a function');
  });

  it('does not throw where String() does', () => {
    const bare = Object.create(null) as object;
    expect(() => String(bare)).toThrow(TypeError);
    expect(showValue(bare)).toBe('an object');
    let deep: unknown[] = [];
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(() => String(deep)).toThrow(RangeError);
    expect(showValue(deep)).toBe('an array of 1');
    const hostile = { toString: () => { throw new Error('no'); } };
    expect(showValue(hostile)).toBe('an object');
  });

  it('clipText: short text unchanged, long text cut with its UTF-8 length, never half a surrogate pair', () => {
    expect(clipText('tcp://127.0.0.1:5557')).toBe('tcp://127.0.0.1:5557');
    expect(clipText('x'.repeat(ECHO_MAX_CHARS))).toBe('x'.repeat(ECHO_MAX_CHARS));
    const big = 'x'.repeat(5 * 1024 * 1024);
    expect(clipText(big)).toBe(`${'x'.repeat(ECHO_MAX_CHARS)}... (5242880 bytes)`);
    // 'é' is 2 bytes in UTF-8; an emoji is 2 UTF-16 units and 4 bytes.
    expect(clipText('é'.repeat(10), 4)).toBe('éééé... (20 bytes)');
    expect(clipText(`abc${'\u{1F600}'.repeat(3)}`, 4)).toBe('abc... (15 bytes)');
  });
});
