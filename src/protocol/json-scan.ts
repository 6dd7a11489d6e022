/**
 * A single-pass JSON byte scanner: the shared low level of the RouterEvent parser, the recorder
 * line parser and the general lossless value parser (`json-parse.ts`).
 *
 * It reads UTF-8 bytes left to right with one cursor and never builds intermediate tokens.
 * Integers are accumulated in two exact halves held in plain numbers and become a `bigint` only
 * when the caller asks (`u64-text.ts` explains why that is ~10x cheaper than `BigInt(text)`).
 * Nothing recurses: skipping a nested value uses an explicit stack, so hostile nesting depth
 * cannot overflow the call stack.
 *
 * String input is first encoded into a reused scratch buffer with `TextEncoder.encodeInto`
 * (0.35 µs for a 5 kB event) and then scanned as bytes. A variant of this scanner reading the
 * string's `charCodeAt` directly was measured slower on 2,000 workload events (14.4 MB):
 * encode + byte scan 35-41 ms, char codes 43-49 ms on flat strings and 51-60 ms on sliced
 * ones (min of 25 passes, interleaved, Node 20, 2 shared cores).
 *
 * Errors: malformed JSON throws `EventParseError` with `InvalidJson` and the byte offset; a
 * well-formed value of the wrong type or range throws `InvalidField` with the field path.
 */

import { ErrorCode, EventParseError } from '../errors.js';
import { TWO_32, u64FromHalves } from './u64-text.js';

export const CH_QUOTE = 0x22;
export const CH_COMMA = 0x2c;
export const CH_MINUS = 0x2d;
export const CH_COLON = 0x3a;
export const CH_LBRACKET = 0x5b;
export const CH_BACKSLASH = 0x5c;
export const CH_RBRACKET = 0x5d;
export const CH_LBRACE = 0x7b;
export const CH_RBRACE = 0x7d;
const CH_DOT = 0x2e;
const CH_ZERO = 0x30;
const CH_E = 0x45;
const CH_LOWER_E = 0x65;
const CH_PLUS = 0x2b;

const EMPTY = new Uint8Array(0);
const encoder = new TextEncoder();
/** Scratch buffers above this size are used once and dropped, not kept for the next call. */
const MAX_KEPT_SCRATCH = 1 << 20;
/** 10^k for k = 0..5: the remaining digits after the first 15 of a u64. */
const POW10 = [1, 10, 100, 1000, 10000, 100000];

/** Kinds reported by `valueKindAt`, for "expected X, found Y" messages. */
export type ValueKind = 'object' | 'array' | 'string' | 'number' | 'boolean' | 'null';

/**
 * A JSON object key known to a parser: its bytes for the fast comparison and its text for keys
 * that were written with escapes (serde_json decodes escapes in keys, so `"dp\u005frank"` is
 * `dp_rank`).
 */
export class JsonKey {
  readonly text: string;
  readonly bytes: Uint8Array;

  constructor(text: string) {
    this.text = text;
    this.bytes = encoder.encode(text);
  }
}

/** The cursor over one input. One instance per parser module; not reentrant (nothing here calls back). */
export class JsonScanner {
  /** Input bytes; only `[0, end)` is meaningful. */
  b: Uint8Array = EMPTY;
  pos = 0;
  end = 0;
  /** Prepended to field paths in messages (`'event.'` inside a recorder line). */
  prefix = '';
  /** High and low 32-bit halves of the last integer read by `scanU64`. */
  hi = 0;
  lo = 0;
  /** Bounds of the last key read by `readKey` (without quotes). */
  keyStart = 0;
  keyEnd = 0;
  /** Decoded text of the last key when it contained escapes, else null. */
  keyText: string | null = null;
  private scratch: Uint8Array = new Uint8Array(16384);
  private skipStack: Uint8Array = new Uint8Array(64);

  /** Points the scanner at `text`, encoding a string to UTF-8 once. */
  load(text: string | Uint8Array): void {
    this.pos = 0;
    if (typeof text === 'string') {
      // ASCII needs one byte per UTF-16 unit; only when that does not fit, retry with the worst
      // case of 3 bytes per unit (a surrogate pair is 2 units for 4 bytes).
      const n = text.length;
      let buf = this.scratch.length >= n ? this.scratch : this.newScratch(n);
      let done = encoder.encodeInto(text, buf);
      if (done.read < n) {
        buf = this.newScratch(n * 3);
        done = encoder.encodeInto(text, buf);
      }
      this.b = buf;
      this.end = done.written;
    } else if (text instanceof Uint8Array) {
      this.b = text;
      this.end = text.length;
    } else {
      throw new EventParseError(ErrorCode.InvalidJson, 'input must be a string or a Uint8Array');
    }
  }

  private newScratch(size: number): Uint8Array {
    const buf = new Uint8Array(size);
    if (size <= MAX_KEPT_SCRATCH) this.scratch = buf;
    return buf;
  }

  /** Drops the reference to the caller's bytes so a large input is not kept alive. */
  release(): void {
    this.b = EMPTY;
    this.end = 0;
  }

  /** Throws `InvalidJson` describing a syntax error at the cursor. */
  syntaxError(expected: string): never {
    const at = this.pos;
    const found = at >= this.end ? 'end of input' : describeByte(this.b[at]!);
    throw new EventParseError(ErrorCode.InvalidJson, `expected ${expected} at byte ${at}, found ${found}`);
  }

  /** The dotted path of a field for messages; `#` in `label` is replaced by `index`. */
  path(label: string, index: number): string {
    const hash = index >= 0 ? label.lastIndexOf('#') : -1;
    const field = hash >= 0 ? label.slice(0, hash) + String(index) + label.slice(hash + 1) : label;
    if (field === '') return this.prefix === '' ? '(root)' : this.prefix.slice(0, -1);
    return this.prefix + field;
  }

  /** Throws `InvalidField` for `label` with `problem`. */
  fieldError(label: string, index: number, problem: string): never {
    throw new EventParseError(ErrorCode.InvalidField, `${this.path(label, index)}: ${problem}`);
  }

  /** Advances over JSON whitespace (space, tab, LF, CR). */
  skipWs(): void {
    const b = this.b;
    const end = this.end;
    let p = this.pos;
    while (p < end) {
      const c = b[p]!;
      if (c > 0x20 || (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09)) break;
      p++;
    }
    this.pos = p;
  }

  /** Skips whitespace and returns the next byte without consuming it, or -1 at the end. */
  peek(): number {
    this.skipWs();
    return this.pos < this.end ? this.b[this.pos]! : -1;
  }

  /** Fails unless only whitespace remains. */
  finish(): void {
    this.skipWs();
    if (this.pos !== this.end) this.syntaxError('end of input');
  }

  /** Consumes `ch` (after whitespace) or throws `InvalidJson` naming `what`. */
  expect(ch: number, what: string): void {
    this.skipWs();
    if (this.pos < this.end && this.b[this.pos] === ch) this.pos++;
    else this.syntaxError(what);
  }

  /**
   * Consumes `{` and reports whether the object has members (false for `{}`, whose `}` is then
   * consumed too). A well-formed non-object value throws `InvalidField` for `label`.
   */
  openObject(label: string, index: number): boolean {
    if (this.peek() !== CH_LBRACE) this.typeError(label, index, 'an object');
    this.pos++;
    if (this.peek() === CH_RBRACE) {
      this.pos++;
      return false;
    }
    return true;
  }

  /** Like `openObject` for arrays: consumes `[` and reports whether an element follows. */
  openArray(label: string, index: number): boolean {
    if (this.peek() !== CH_LBRACKET) this.typeError(label, index, 'an array');
    this.pos++;
    if (this.peek() === CH_RBRACKET) {
      this.pos++;
      return false;
    }
    return true;
  }

  /** After an object member: consumes `,` (true, another member follows) or `}` (false). */
  nextMember(): boolean {
    const c = this.peek();
    this.pos++;
    if (c === CH_COMMA) return true;
    if (c === CH_RBRACE) return false;
    this.pos--;
    return this.syntaxError("',' or '}'");
  }

  /** After an array element: consumes `,` (true) or `]` (false). */
  nextElement(): boolean {
    const c = this.peek();
    this.pos++;
    if (c === CH_COMMA) return true;
    if (c === CH_RBRACKET) return false;
    this.pos--;
    return this.syntaxError("',' or ']'");
  }

  /**
   * Reads an object key and the following `:` and returns 0, 1 or 2 when the key is `k0`, `k1`
   * or `k2`, -1 for any other key (then `readKey`'s fields describe it). Known keys are matched
   * in the same pass that scans them: this touches each key byte once instead of twice (scan,
   * then compare), and keys are about half the bytes of a stored block.
   */
  readKeyOf(k0: JsonKey, k1: JsonKey | null, k2: JsonKey | null): number {
    if (this.peek() !== CH_QUOTE) this.syntaxError('a string key');
    if (this.tryKey(k0)) return 0;
    if (k1 !== null && this.tryKey(k1)) return 1;
    if (k2 !== null && this.tryKey(k2)) return 2;
    this.readKey();
    // Without escapes the raw bytes already failed to match every candidate.
    if (this.keyText === null) return -1;
    if (this.keyIs(k0)) return 0;
    if (k1 !== null && this.keyIs(k1)) return 1;
    if (k2 !== null && this.keyIs(k2)) return 2;
    return -1;
  }

  /** If `"key"` starts at the cursor, consumes it and its ':' and returns true. */
  private tryKey(key: JsonKey): boolean {
    const kb = key.bytes;
    const n = kb.length;
    const b = this.b;
    const p = this.pos + 1;
    if (p + n >= this.end || b[p + n] !== CH_QUOTE) return false;
    for (let i = 0; i < n; i++) if (b[p + i] !== kb[i]) return false;
    const q = p + n + 1;
    if (q < this.end && b[q] === CH_COLON) {
      this.pos = q + 1;
    } else {
      this.pos = q;
      this.expect(CH_COLON, "':'");
    }
    this.keyText = null;
    this.keyStart = p;
    this.keyEnd = p + n;
    return true;
  }

  /**
   * Reads an object key and the following `:`. The key's raw bytes are left in
   * `[keyStart, keyEnd)`; if it had escapes its decoded text is in `keyText`. Compare with
   * `keyIs`.
   */
  readKey(): void {
    if (this.peek() !== CH_QUOTE) this.syntaxError('a string key');
    const b = this.b;
    const end = this.end;
    let p = this.pos + 1;
    const start = p;
    while (p < end) {
      const c = b[p]!;
      if (c === CH_QUOTE) break;
      if (c === CH_BACKSLASH || c < 0x20) {
        this.keyText = this.readString();
        this.keyStart = start;
        this.keyEnd = start;
        this.expect(CH_COLON, "':'");
        return;
      }
      p++;
    }
    if (p >= end) {
      this.pos = p;
      this.syntaxError('\'"\' closing a string');
    }
    this.keyStart = start;
    this.keyEnd = p;
    this.keyText = null;
    this.pos = p + 1;
    // The compact form always has ':' right after the key; take it without a call.
    if (this.pos < end && b[this.pos] === CH_COLON) this.pos++;
    else this.expect(CH_COLON, "':'");
  }

  /** True when the last key read equals `key`. */
  keyIs(key: JsonKey): boolean {
    if (this.keyText !== null) return this.keyText === key.text;
    const kb = key.bytes;
    const n = kb.length;
    const start = this.keyStart;
    if (this.keyEnd - start !== n) return false;
    const b = this.b;
    for (let i = 0; i < n; i++) if (b[start + i] !== kb[i]) return false;
    return true;
  }

  /** The last key read, as text (for messages and the generic value parser). */
  keyString(): string {
    return this.keyText ?? decodeUtf8(this.b, this.keyStart, this.keyEnd);
  }

  /**
   * Reads an unsigned integer into `hi`/`lo` (each in [0, 2^32)). Negative, fractional,
   * exponent or above 2^64-1 numbers throw `InvalidField` for `label`; other well-formed values
   * throw `InvalidField` with their type; malformed text throws `InvalidJson`.
   */
  scanU64(label: string, index: number): void {
    this.skipWs();
    const b = this.b;
    const end = this.end;
    const start = this.pos;
    let p = start;
    let d = p < end ? b[p]! - CH_ZERO : -1;
    let hi = 0;
    let lo = 0;
    if (d > 0 && d <= 9) {
      // Up to 15 digits are exact in a double (10^15 < 2^53). Runs of four digits are checked
      // and combined at once in an int32 (fourDigits): 20-digit numbers scanned in 21 ns
      // against 38 ns a digit at a time (1M random u64s, 2-core dev VM). Two earlier variants
      // measured no faster: int32 chunks of 9 digits a digit at a time, and a single unsigned
      // compare as the digit test.
      let acc = d;
      let n = 1;
      p++;
      let q: number;
      while (n <= 11 && p + 4 <= end && (q = fourDigits(b, p)) >= 0) {
        acc = acc * 10000 + q;
        p += 4;
        n += 4;
      }
      while (n < 15 && p < end) {
        d = b[p]! - CH_ZERO;
        if (d < 0 || d > 9) break;
        acc = acc * 10 + d;
        p++;
        n++;
      }
      if (n === 15 && p < end && (d = b[p]! - CH_ZERO) >= 0 && d <= 9) {
        // 16..20 digits: value = acc * 10^k + rest, split into 32-bit halves exactly
        // (acc < 2^50, so accHi < 2^18 and every product below stays under 2^53). Digits past
        // the 20th only count in k (the number is then out of range).
        let rest = 0;
        let k = 0;
        if (p + 4 <= end && (q = fourDigits(b, p)) >= 0) {
          rest = q;
          k = 4;
          p += 4;
        }
        while (p < end && (d = b[p]! - CH_ZERO) >= 0 && d <= 9) {
          if (k < 5) rest = rest * 10 + d;
          k++;
          p++;
        }
        if (k <= 5) {
          const scale = POW10[k]!;
          const accHi = Math.floor(acc / TWO_32);
          const low = (acc - accHi * TWO_32) * scale + rest;
          const carry = Math.floor(low / TWO_32);
          lo = low - carry * TWO_32;
          hi = accHi * scale + carry;
        }
        if (k > 5 || hi >= TWO_32) {
          this.pos = start;
          this.scanNumber();
          this.fieldError(label, index, `${this.numberText(start)} is above 2^64-1`);
        }
      } else {
        lo = acc >>> 0;
        hi = (acc - lo) / TWO_32;
      }
    } else if (d === 0) {
      p++;
      if (p < end && (d = b[p]! - CH_ZERO) >= 0 && d <= 9) {
        this.pos = p;
        this.syntaxError("a number without leading zeros");
      }
    } else if (d === CH_MINUS - CH_ZERO) {
      this.scanNumber();
      this.fieldError(label, index, `expected an unsigned integer, found ${this.numberText(start)}`);
    } else {
      this.typeError(label, index, 'an unsigned integer');
    }
    if (p < end) {
      const c = b[p]!;
      if (c === CH_DOT || c === CH_LOWER_E || c === CH_E) {
        this.pos = start;
        this.scanNumber();
        this.fieldError(label, index, `expected an unsigned integer, found ${this.numberText(start)}`);
      }
    }
    this.pos = p;
    this.hi = hi;
    this.lo = lo;
  }

  /** Reads a u64 as a bigint (see `scanU64` for the errors). */
  readU64(label: string, index: number): bigint {
    this.scanU64(label, index);
    return u64FromHalves(this.hi, this.lo);
  }

  /** Reads an unsigned integer that must not exceed `max` (at most 2^53), as a number. */
  readUint(label: string, index: number, max: number): number {
    this.scanU64(label, index);
    const maxHi = Math.floor(max / TWO_32);
    const hi = this.hi;
    const lo = this.lo;
    if (hi < maxHi || (hi === maxHi && lo <= max - maxHi * TWO_32)) return hi * TWO_32 + lo;
    return this.fieldError(label, index, `${u64FromHalves(hi, lo)} is above ${max}`);
  }

  /**
   * Validates a JSON number at the cursor and moves past it. Returns true when it is an
   * integer (no fraction, no exponent).
   */
  scanNumber(): boolean {
    const b = this.b;
    const end = this.end;
    let p = this.pos;
    let integer = true;
    if (p < end && b[p] === CH_MINUS) p++;
    let d = p < end ? b[p]! - CH_ZERO : -1;
    if (d === 0) {
      p++;
    } else if (d > 0 && d <= 9) {
      p++;
      while (p < end && (d = b[p]! - CH_ZERO) >= 0 && d <= 9) p++;
    } else {
      this.pos = p;
      this.syntaxError('a digit');
    }
    if (p < end && b[p] === CH_DOT) {
      integer = false;
      p++;
      if (!(p < end && (d = b[p]! - CH_ZERO) >= 0 && d <= 9)) {
        this.pos = p;
        this.syntaxError('a digit after the decimal point');
      }
      while (p < end && (d = b[p]! - CH_ZERO) >= 0 && d <= 9) p++;
    }
    if (p < end && (b[p] === CH_LOWER_E || b[p] === CH_E)) {
      integer = false;
      p++;
      if (p < end && (b[p] === CH_PLUS || b[p] === CH_MINUS)) p++;
      if (!(p < end && (d = b[p]! - CH_ZERO) >= 0 && d <= 9)) {
        this.pos = p;
        this.syntaxError('a digit in the exponent');
      }
      while (p < end && (d = b[p]! - CH_ZERO) >= 0 && d <= 9) p++;
    }
    if (p < end && (d = b[p]! - CH_ZERO) >= 0 && d <= 9) {
      this.pos = p;
      this.syntaxError('a number without leading zeros');
    }
    this.pos = p;
    return integer;
  }

  /** The ASCII text from `start` to the cursor (a number just scanned), for messages and values. */
  numberText(start: number): string {
    let s = '';
    const b = this.b;
    for (let i = start; i < this.pos; i++) s += String.fromCharCode(b[i]!);
    return s;
  }

  /** The kind of the value starting at the cursor (after whitespace), or null if none does. */
  valueKindAt(): ValueKind | null {
    const c = this.peek();
    if (c === CH_LBRACE) return 'object';
    if (c === CH_LBRACKET) return 'array';
    if (c === CH_QUOTE) return 'string';
    if (c === CH_MINUS || (c >= CH_ZERO && c <= CH_ZERO + 9)) return 'number';
    if (c === 0x74 || c === 0x66) return 'boolean';
    if (c === 0x6e) return 'null';
    return null;
  }

  /**
   * Throws for a value of the wrong type at the cursor: `InvalidField` naming `label` and the
   * type found when the value is well-formed, `InvalidJson` when it is not.
   */
  typeError(label: string, index: number, expected: string): never {
    const kind = this.valueKindAt();
    if (kind === null) this.syntaxError('a value');
    this.skipValue();
    return this.fieldError(label, index, `expected ${expected}, found ${kind === 'object' || kind === 'array' ? 'an' : 'a'} ${kind}`);
  }

  /** Consumes one of the literals `true`, `false`, `null` at the cursor; returns its first byte. */
  scanLiteral(): number {
    const c = this.peek();
    const word = c === 0x74 ? 'true' : c === 0x66 ? 'false' : c === 0x6e ? 'null' : '';
    if (word === '') this.syntaxError('a value');
    const b = this.b;
    const p = this.pos;
    for (let i = 1; i < word.length; i++) {
      if (p + i >= this.end || b[p + i] !== word.charCodeAt(i)) {
        this.pos = p + i;
        this.syntaxError(`'${word}'`);
      }
    }
    this.pos = p + word.length;
    return c;
  }

  /** Skips a string at the cursor (which must be `"`), validating escapes and control bytes. */
  skipString(): void {
    const b = this.b;
    const end = this.end;
    let p = this.pos + 1;
    while (p < end) {
      const c = b[p]!;
      if (c === CH_QUOTE) {
        this.pos = p + 1;
        return;
      }
      if (c === CH_BACKSLASH) {
        p = this.escapeEnd(p);
      } else if (c < 0x20) {
        this.pos = p;
        this.syntaxError('no control characters in a string');
      } else {
        p++;
      }
    }
    this.pos = p;
    this.syntaxError('\'"\' closing a string');
  }

  /** Validates the escape starting at `p` (a backslash) and returns the index after it. */
  private escapeEnd(p: number): number {
    const b = this.b;
    const c = p + 1 < this.end ? b[p + 1]! : -1;
    if (c === 0x75) {
      for (let i = 2; i < 6; i++) {
        if (p + i >= this.end || hexValue(b[p + i]!) < 0) {
          this.pos = p + i;
          this.syntaxError('4 hex digits after \\u');
        }
      }
      return p + 6;
    }
    // " \ / b f n r t
    if (c === 0x22 || c === 0x5c || c === 0x2f || c === 0x62 || c === 0x66 || c === 0x6e || c === 0x72 || c === 0x74) {
      return p + 2;
    }
    this.pos = p + 1;
    return this.syntaxError('a valid escape');
  }

  /** Reads a string at the cursor (after whitespace) and returns its decoded text. */
  readString(): string {
    if (this.peek() !== CH_QUOTE) this.syntaxError("'\"'");
    const b = this.b;
    const end = this.end;
    let p = this.pos + 1;
    let runStart = p;
    let out = '';
    while (p < end) {
      const c = b[p]!;
      if (c === CH_QUOTE) {
        this.pos = p + 1;
        return out + decodeUtf8(b, runStart, p);
      }
      if (c === CH_BACKSLASH) {
        out += decodeUtf8(b, runStart, p);
        const next = this.escapeEnd(p);
        const e = b[p + 1]!;
        if (e === 0x75) {
          out += String.fromCharCode(
            (hexValue(b[p + 2]!) << 12) | (hexValue(b[p + 3]!) << 8) | (hexValue(b[p + 4]!) << 4) | hexValue(b[p + 5]!),
          );
        } else {
          out += ESCAPES[e]!;
        }
        p = next;
        runStart = p;
      } else if (c < 0x20) {
        this.pos = p;
        this.syntaxError('no control characters in a string');
      } else {
        p++;
      }
    }
    this.pos = p;
    return this.syntaxError('\'"\' closing a string');
  }

  /**
   * Skips one complete value of any type at the cursor, validating its syntax. Iterative: the
   * nesting depth is bounded only by memory.
   */
  skipValue(): void {
    let stack = this.skipStack;
    let depth = 0;
    for (;;) {
      // At the start of a value.
      const c = this.peek();
      let opened = false;
      if (c === CH_LBRACE || c === CH_LBRACKET) {
        this.pos++;
        const close = c === CH_LBRACE ? CH_RBRACE : CH_RBRACKET;
        if (this.peek() === close) {
          this.pos++;
        } else {
          if (depth === stack.length) {
            const grown = new Uint8Array(depth * 2);
            grown.set(stack);
            stack = grown;
          }
          stack[depth++] = c;
          opened = true;
          if (c === CH_LBRACE) this.readKey();
        }
      } else if (c === CH_QUOTE) {
        this.skipString();
      } else if (c === CH_MINUS || (c >= CH_ZERO && c <= CH_ZERO + 9)) {
        this.scanNumber();
      } else {
        this.scanLiteral();
      }
      if (opened) continue;
      // After a value: close containers until one continues with ','.
      for (;;) {
        if (depth === 0) return;
        const open = stack[depth - 1]!;
        if (open === CH_LBRACE) {
          if (!this.nextMember()) {
            depth--;
            continue;
          }
          this.readKey();
        } else if (!this.nextElement()) {
          depth--;
          continue;
        }
        break;
      }
    }
  }
}

const ESCAPES: Record<number, string> = {
  0x22: '"',
  0x5c: '\\',
  0x2f: '/',
  0x62: '\b',
  0x66: '\f',
  0x6e: '\n',
  0x72: '\r',
  0x74: '\t',
};

/**
 * The error to report for `error`: a field error (wrong type, range, missing, unknown variant)
 * found before a syntax error later in the input gives way to the syntax error, so that
 * `InvalidJson` means exactly "not JSON" whatever the order. Costs nothing on success.
 */
export function syntaxFirst(s: JsonScanner, error: unknown): unknown {
  if (!(error instanceof EventParseError) || error.code === ErrorCode.InvalidJson) return error;
  try {
    s.pos = 0;
    s.skipValue();
    s.finish();
  } catch (syntax) {
    return syntax;
  }
  return error;
}

/**
 * The value of the four decimal digits at `b[p..p+3]`, or -1 when one of them is not a digit.
 * SWAR in an int32: byte i holds digit i; the nibble checks accept exactly 0x30..0x39; pairs
 * then combine (d0 * 10 + d1, d2 * 10 + d3) and the pairs into the 4-digit value.
 */
function fourDigits(b: Uint8Array, p: number): number {
  const v = b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24);
  if ((v & 0xf0f0f0f0) !== 0x30303030 || ((v + 0x06060606) & 0xf0f0f0f0) !== 0x30303030) return -1;
  let d = v & 0x0f0f0f0f;
  d = (d * 10 + (d >>> 8)) & 0x00ff00ff;
  return (d & 0xff) * 100 + (d >>> 16);
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  if (l >= 0x61 && l <= 0x66) return l - 0x61 + 10;
  return -1;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Decodes `b[start, end)`: short ASCII runs by char codes (cheaper than a decoder call for
 * typical 4-12 byte keys), anything else with a fatal UTF-8 decoder (invalid UTF-8 throws
 * `InvalidJson`).
 */
export function decodeUtf8(b: Uint8Array, start: number, end: number): string {
  if (end - start <= 16) {
    let s = '';
    let i = start;
    for (; i < end; i++) {
      const c = b[i]!;
      if (c >= 0x80) break;
      s += String.fromCharCode(c);
    }
    if (i === end) return s;
  }
  try {
    return utf8.decode(b.subarray(start, end));
  } catch (cause) {
    throw new EventParseError(ErrorCode.InvalidJson, `invalid UTF-8 in a string at bytes ${start}..${end}`, { cause });
  }
}

function describeByte(c: number): string {
  if (c >= 0x21 && c < 0x7f) return `'${String.fromCharCode(c)}'`;
  return `byte 0x${c.toString(16).padStart(2, '0')}`;
}
