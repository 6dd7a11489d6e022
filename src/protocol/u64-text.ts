/**
 * u64 <-> decimal helpers shared by the JSON codec.
 *
 * The JSON scanner accumulates a decimal in two exact halves held in ordinary numbers (see
 * `json-scan.ts`) and turns them into a `bigint` here, once, at the end. The conversion goes
 * through a one-element `BigUint64Array` aliased by a `Uint32Array`: storing the two halves and
 * loading the u64 costs about 7 ns on Node 20, against 19 ns for `BigInt(safeNumber)` and
 * 67 ns for `(BigInt(hi) << 32n) | BigInt(lo)` or `BigInt(decimalString)` (1,000 random u64s,
 * tinybench, 2-core x86-64). The parser creates two bigints per stored block; at 7 ns each they
 * are under 10% of the parse time of a workload event.
 */

import { ErrorCode, EventParseError } from '../errors.js';
import { U64_MAX } from './types.js';
import { showValue } from './show-value.js';

const pair64 = new BigUint64Array(1);
const pair32 = new Uint32Array(pair64.buffer);
// Typed arrays use the platform byte order; find where the low half lives once.
pair32[0] = 1;
const LO = pair64[0] === 1n ? 0 : 1;
const HI = 1 - LO;
pair64[0] = 0n;

/** 2^32 as a number, the radix of the two halves. */
export const TWO_32 = 4294967296;

/**
 * The u64 `hi * 2^32 + lo` as a bigint. `hi` and `lo` must be integers in [0, 2^32); the caller
 * guarantees it (out-of-range values would be reduced modulo 2^32 by the typed array).
 */
export function u64FromHalves(hi: number, lo: number): bigint {
  pair32[LO] = lo;
  pair32[HI] = hi;
  return pair64[0]!;
}

/**
 * Parses a canonical unsigned decimal (`0` or `[1-9][0-9]*`, no sign, no spaces) in the u64
 * range, for ids carried as JSON strings (workload `workers`, `expect` keys).
 * Throws `EventParseError` with `InvalidField`, naming `field`, otherwise.
 */
export function parseU64Decimal(text: string, field: string): bigint {
  const n = text.length;
  let ok = n > 0 && n <= 20 && (n === 1 || text.charCodeAt(0) !== 0x30);
  for (let i = 0; ok && i < n; i++) {
    const d = text.charCodeAt(i) - 0x30;
    ok = d >= 0 && d <= 9;
  }
  if (ok) {
    const value = BigInt(text);
    if (value <= U64_MAX) return value;
  }
  throw new EventParseError(
    ErrorCode.InvalidField,
    `${field}: expected an unsigned 64-bit decimal, found ${JSON.stringify(text.slice(0, 40))}`,
  );
}

/**
 * The decimal text of a u64, after checking the range. Throws `EventParseError` with
 * `InvalidField`, naming `field`, for anything that is not a bigint in [0, 2^64 - 1].
 */
export function formatU64(value: bigint, field: string): string {
  if (typeof value === 'bigint' && value >= 0n && value <= U64_MAX) return value.toString();
  throw new EventParseError(
    ErrorCode.InvalidField,
    `${field}: expected a u64 bigint in [0, 2^64-1], found ${describe(value)}`,
  );
}

function describe(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  return typeof value === 'number' ? `number ${value}` : showValue(value);
}

/**
 * Index of the low 32-bit word of element `i` in a `Uint32Array` aliasing a `BigUint64Array`
 * is `2 * i + U64_LOW_WORD` (platform byte order); the high word is the other one.
 */
export const U64_LOW_WORD = LO;
