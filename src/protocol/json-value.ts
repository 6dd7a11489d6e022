/**
 * General JSON values read losslessly (workload and trace lines, NATS query bodies): integers
 * become `bigint` (never rounded through a double, as `JSON.parse` would above 2^53), and arrays
 * of u64 go straight into a `BigUint64Array`. Over the byte scanner of `json-scan.ts`.
 */

import { CH_LBRACE, CH_LBRACKET, CH_MINUS, CH_QUOTE, CH_RBRACE, CH_RBRACKET, JsonScanner, syntaxFirst } from './json-scan.js';
import { U64_LOW_WORD } from './u64-text.js';

/** A JSON value read by `parseJsonLossless`. Integers are bigints, other numbers are numbers. */
export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | JsonObject;

/** A JSON object as a plain object with a null prototype (so `__proto__` is an ordinary key). */
export interface JsonObject {
  [key: string]: JsonValue;
}

const L_ROOT = '';

const sc: JsonScanner = new JsonScanner();

/**
 * Parses any JSON value losslessly: integers (no fraction, no exponent) become `bigint`, other
 * numbers `number`; objects are null-prototype plain objects (last duplicate key wins, as with
 * `JSON.parse`; integer-like keys below 2^32-1 are enumerated first in ascending order, as for
 * any JS object; worker-id keys are far above that). Nesting depth is bounded only by memory.
 * Throws `EventParseError` with `InvalidJson`.
 */
export function parseJsonLossless(text: string | Uint8Array): JsonValue {
  sc.load(text);
  sc.prefix = '';
  try {
    const value = readValueTree(sc);
    sc.finish();
    return value;
  } finally {
    sc.release();
  }
}

function readValueTree(s: JsonScanner): JsonValue {
  const stack: Array<JsonValue[] | JsonObject> = [];
  let root: JsonValue = null;
  let key = '';
  for (;;) {
    const c = s.peek();
    let value: JsonValue;
    let open: JsonValue[] | JsonObject | null = null;
    if (c === CH_LBRACE) {
      s.pos++;
      const object = Object.create(null) as JsonObject;
      value = object;
      if (s.peek() === CH_RBRACE) s.pos++;
      else open = object;
    } else if (c === CH_LBRACKET) {
      s.pos++;
      const array: JsonValue[] = [];
      value = array;
      if (s.peek() === CH_RBRACKET) s.pos++;
      else open = array;
    } else if (c === CH_QUOTE) {
      value = s.readString();
    } else if (c === CH_MINUS || (c >= 0x30 && c <= 0x39)) {
      value = readNumberValue(s);
    } else {
      const lit = s.scanLiteral();
      value = lit === 0x74 ? true : lit === 0x66 ? false : null;
    }
    const depth = stack.length;
    if (depth === 0) {
      root = value;
    } else {
      const top = stack[depth - 1]!;
      if (Array.isArray(top)) top.push(value);
      else top[key] = value;
    }
    if (open !== null) {
      stack.push(open);
      if (!Array.isArray(open)) {
        s.readKey();
        key = s.keyString();
      }
      continue;
    }
    // After a value: close finished containers until one continues with ','.
    for (;;) {
      const top = stack[stack.length - 1];
      if (top === undefined) return root;
      if (Array.isArray(top)) {
        if (s.nextElement()) break;
      } else if (s.nextMember()) {
        s.readKey();
        key = s.keyString();
        break;
      }
      stack.pop();
    }
  }
}

/** Longest integer text made a bigint: 20 digits and a sign, with room to name it in errors. */
const MAX_BIGINT_TEXT = 40;

function readNumberValue(s: JsonScanner): number | bigint {
  const start = s.pos;
  const integer = s.scanNumber();
  // A non-negative integer of at most 19 digits is below 10^19 < 2^64: take the fast u64 path.
  if (integer && s.b[start] !== CH_MINUS && s.pos - start <= 19) {
    s.pos = start;
    return s.readU64(L_ROOT, -1);
  }
  const text = s.numberText(start);
  // No field takes an integer of more than 20 digits (u64 and i64 have at most 20): a longer
  // one stays a number (lossy, often Infinity), which every integer field rejects. BigInt of
  // text grows faster than its length: an 8 MiB integer in a /query_by_hash body held the
  // event loop for 3.4 s before the range check refused it (found by fuzzing).
  return integer && text.length <= MAX_BIGINT_TEXT ? BigInt(text) : Number(text);
}

/**
 * Parses a JSON array of u64 integers into a `BigUint64Array` without creating a bigint per
 * element. With `key`, the input must be an object and the array is the value of that
 * top-level key (other keys are skipped), e.g. `parseU64Array(line, 'seq')` for a workload
 * `match` line. Throws `EventParseError` (`InvalidJson`; `InvalidField` naming `key[i]`).
 */
export function parseU64Array(text: string | Uint8Array, key?: string): BigUint64Array {
  sc.load(text);
  sc.prefix = '';
  try {
    let result: BigUint64Array | null = null;
    if (key === undefined) {
      result = readU64Array(sc, L_ROOT);
    } else if (sc.openObject(L_ROOT, -1)) {
      do {
        sc.readKey();
        if (sc.keyString() === key) {
          if (result !== null) sc.fieldError(key, -1, 'duplicate field');
          result = readU64Array(sc, key);
        } else {
          sc.skipValue();
        }
      } while (sc.nextMember());
    }
    if (result === null) return sc.fieldError(key ?? L_ROOT, -1, 'missing field');
    sc.finish();
    return result;
  } catch (error) {
    throw syntaxFirst(sc, error);
  } finally {
    sc.release();
  }
}

function readU64Array(s: JsonScanner, label: string): BigUint64Array {
  const element = `${label === L_ROOT ? '(root)' : label}[#]`;
  let out = new BigUint64Array(128);
  let words = new Uint32Array(out.buffer);
  let n = 0;
  if (s.openArray(label, -1)) {
    do {
      if (n === out.length) {
        const grown = new BigUint64Array(n * 2);
        grown.set(out);
        out = grown;
        words = new Uint32Array(out.buffer);
      }
      s.scanU64(element, n);
      words[2 * n + U64_LOW_WORD] = s.lo;
      words[2 * n + 1 - U64_LOW_WORD] = s.hi;
      n++;
    } while (s.nextElement());
  }
  return out.slice(0, n);
}
