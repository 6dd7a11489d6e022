/**
 * A cursor over msgpack bytes for readers that build their result straight from the bytes
 * (direct-batch.ts). Every read checks the bytes left and reports what it cannot read as
 * `NO` / -1 / null / false rather than throwing: its callers then leave the payload to the
 * generic decoder, which says what is wrong with it.
 *
 * Integer formats are read as the generic decoder (`@msgpack/msgpack`, `useBigInt64: true`)
 * returns them: the 64-bit formats as bigint, the others as numbers.
 */

export const NIL = 0xc0;
export const BIN8 = 0xc4;
export const BIN16 = 0xc5;
export const BIN32 = 0xc6;
export const FLOAT32 = 0xca;
export const FLOAT64 = 0xcb;
export const UINT8 = 0xcc;
export const UINT16 = 0xcd;
export const UINT32 = 0xce;
export const UINT64 = 0xcf;
export const INT8 = 0xd0;
export const INT16 = 0xd1;
export const INT32 = 0xd2;
export const INT64 = 0xd3;
const STR8 = 0xd9;
const STR16 = 0xda;
const STR32 = 0xdb;
export const ARRAY16 = 0xdc;
export const ARRAY32 = 0xdd;
const MAP16 = 0xde;
const MAP32 = 0xdf;

/** Returned by the integer readers for a value they do not read. */
export const NO = -1;
/** A format byte no input has (a header kind without a fix or 8-bit form passes it). */
const NONE = -2;
/** Skipped values nested deeper than this are not skipped (`skip` returns false). */
const MAX_SKIP_DEPTH = 16;
const EMPTY = new Uint8Array(0);
const EMPTY_VIEW = new DataView(EMPTY.buffer);

export class MsgpackCursor {
  b: Uint8Array = EMPTY;
  view: DataView<ArrayBufferLike> = EMPTY_VIEW;
  p = 0;
  end = 0;

  /** Points the cursor at the start of `bytes`. */
  load(bytes: Uint8Array): void {
    this.b = bytes;
    this.p = 0;
    this.end = bytes.length;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Drops the reference to the bytes, so that a large payload is not kept alive. */
  release(): void {
    this.b = EMPTY;
    this.view = EMPTY_VIEW; // no new view per batch just to let go of the payload
    this.end = 0;
  }

  /** The format byte at the cursor, or -1 at the end. */
  byte(): number {
    return this.p < this.end ? this.b[this.p]! : -1;
  }

  /** Moves past a nil at the cursor: whether there was one. */
  nil(): boolean {
    if (this.byte() !== NIL) return false;
    this.p++;
    return true;
  }

  u8(at: number): number {
    return at + 1 <= this.end ? this.b[at]! : -1;
  }

  u16(at: number): number {
    return at + 2 <= this.end ? this.view.getUint16(at) : -1;
  }

  u32(at: number): number {
    return at + 4 <= this.end ? this.view.getUint32(at) : -1;
  }

  /** Length of a string at the cursor (moved past its header), or -1. */
  strHeader(): number {
    const len = this.header(0xe0, 0xa0, 0x1f, STR8, STR16, STR32);
    return len >= 0 && this.p + len <= this.end ? len : -1;
  }

  /** Element count of an array at the cursor (moved past its header), or -1. */
  arrayHeader(): number {
    const n = this.header(0xf0, 0x90, 0x0f, NONE, ARRAY16, ARRAY32);
    // Every element takes a byte at least: a count beyond the bytes left is malformed (and
    // would otherwise size an allocation).
    return n >= 0 && this.p + n <= this.end ? n : -1;
  }

  /** Entry count of a map at the cursor (moved past its header), or -1. */
  mapHeader(): number {
    const n = this.header(0xf0, 0x80, 0x0f, NONE, MAP16, MAP32);
    return n >= 0 && this.p + 2 * n <= this.end ? n : -1;
  }

  /** Length of a bin value at the cursor (moved past its header), or -1. */
  binHeader(): number {
    const len = this.header(0, NONE, 0, BIN8, BIN16, BIN32);
    return len >= 0 && this.p + len <= this.end ? len : -1;
  }

  /**
   * The length or count of a header at the cursor: a fix format (`c & fixMask === fixTag`, the
   * count in `c & countMask`) or one with a 1-, 2- or 4-byte big-endian count. Moves past the
   * header; -1 for another format or a truncated header.
   */
  private header(fixMask: number, fixTag: number, countMask: number, op8: number, op16: number, op32: number): number {
    const c = this.byte();
    if (c < 0) return -1;
    const p = this.p;
    let n: number;
    if ((c & fixMask) === fixTag) {
      this.p = p + 1;
      return c & countMask;
    }
    if (c === op8) n = this.u8(p + 1);
    else if (c === op16) n = this.u16(p + 1);
    else if (c === op32) n = this.u32(p + 1);
    else return -1;
    if (n >= 0) this.p = p + (c === op8 ? 2 : c === op16 ? 3 : 5);
    return n;
  }

  /** Whether bytes [at, at + len) are the ASCII `text`. */
  bytesAre(at: number, len: number, text: string): boolean {
    if (len !== text.length) return false;
    const b = this.b;
    for (let i = 0; i < len; i++) if (b[at + i] !== text.charCodeAt(i)) return false;
    return true;
  }

  /** Whether bytes [at, at + len) are printable ASCII (0x20-0x7e). */
  printable(at: number, len: number): boolean {
    const b = this.b;
    for (let i = at; i < at + len; i++) if (b[i]! > 0x7e || b[i]! < 0x20) return false;
    return true;
  }

  /**
   * A printable ASCII string at the cursor: one of `known` when it is one (no new string), else
   * a new one; null for any other value or string.
   */
  ascii(known: readonly string[]): string | null {
    const len = this.strHeader();
    if (len < 0) return null;
    const at = this.p;
    this.p += len;
    for (let k = 0; k < known.length; k++) if (this.bytesAre(at, len, known[k]!)) return known[k]!;
    if (!this.printable(at, len)) return null;
    let s = '';
    for (let i = at; i < at + len; i++) s += String.fromCharCode(this.b[i]!);
    return s;
  }

  /**
   * A non-negative integer of a 32-bit-or-smaller format (what the generic decoder gives as a
   * number), or NO: negative values, floats and the 64-bit formats (bigints there) are not.
   */
  smallUint(): number {
    const c = this.byte();
    const p = this.p;
    if (c < 0) return NO;
    if (c <= 0x7f) {
      this.p++;
      return c;
    }
    let v: number;
    switch (c) {
      case UINT8: v = this.u8(p + 1); this.p += 2; break;
      case UINT16: v = this.u16(p + 1); this.p += 3; break;
      case UINT32: v = this.u32(p + 1); this.p += 5; break;
      case INT8: v = p + 2 <= this.end ? this.view.getInt8(p + 1) : NO; this.p += 2; break;
      case INT16: v = p + 3 <= this.end ? this.view.getInt16(p + 1) : NO; this.p += 3; break;
      case INT32: v = p + 5 <= this.end ? this.view.getInt32(p + 1) : NO; this.p += 5; break;
      default: return NO;
    }
    return v < 0 || this.p > this.end ? NO : v;
  }

  /** Any integer or float as a number (a 64-bit integer as `Number(bigint)`); null otherwise. */
  number(): number | null {
    const c = this.byte();
    const p = this.p;
    if (c < 0) return null;
    if (c <= 0x7f || c >= 0xe0) {
      this.p++;
      return c <= 0x7f ? c : c - 0x100;
    }
    const size = c === FLOAT32 ? 4 : c === FLOAT64 ? 8 : intSize(c);
    if (size <= 0 || p + 1 + size > this.end) return null;
    this.p += 1 + size;
    const v = this.view;
    switch (c) {
      case FLOAT32: return v.getFloat32(p + 1);
      case FLOAT64: return v.getFloat64(p + 1);
      case UINT8: return v.getUint8(p + 1);
      case UINT16: return v.getUint16(p + 1);
      case UINT32: return v.getUint32(p + 1);
      case UINT64: return Number(v.getBigUint64(p + 1));
      case INT8: return v.getInt8(p + 1);
      case INT16: return v.getInt16(p + 1);
      case INT32: return v.getInt32(p + 1);
      default: return Number(v.getBigInt64(p + 1));
    }
  }

  /**
   * Moves past one value: false for what the generic decoder might read differently or reject
   * (ext values, strings with non-ASCII bytes, map keys that are not printable ASCII strings or
   * are `__proto__`), for truncation, and below MAX_SKIP_DEPTH levels of nesting.
   */
  skip(depth = 0): boolean {
    if (depth > MAX_SKIP_DEPTH) return false;
    const c = this.byte();
    const p = this.p;
    if (c < 0) return false;
    if (c <= 0x7f || c >= 0xe0 || c === NIL || c === 0xc2 || c === 0xc3) {
      this.p++;
      return true;
    }
    if ((c & 0xe0) === 0xa0 || c === STR8 || c === STR16 || c === STR32) {
      const len = this.strHeader();
      if (len < 0) return false;
      for (let i = this.p; i < this.p + len; i++) if (this.b[i]! > 0x7f) return false;
      this.p += len;
      return true;
    }
    if ((c & 0xf0) === 0x90 || c === ARRAY16 || c === ARRAY32) {
      const n = this.arrayHeader();
      if (n < 0) return false;
      for (let i = 0; i < n; i++) if (!this.skip(depth + 1)) return false;
      return true;
    }
    if ((c & 0xf0) === 0x80 || c === MAP16 || c === MAP32) {
      const n = this.mapHeader();
      if (n < 0) return false;
      for (let i = 0; i < n; i++) if (!this.skipKey() || !this.skip(depth + 1)) return false;
      return true;
    }
    const size = c === FLOAT32 ? 4 : c === FLOAT64 ? 8 : intSize(c);
    if (size > 0) {
      if (p + 1 + size > this.end) return false;
      this.p += 1 + size;
      return true;
    }
    const len = this.binHeader();
    if (len < 0) return false; // ext (and 0xc1, never used)
    this.p += len;
    return true;
  }

  /** Moves past a map key that is a printable ASCII string other than `__proto__`. */
  skipKey(): boolean {
    const len = this.strHeader();
    if (len < 0) return false;
    const at = this.p;
    this.p += len;
    return this.printable(at, len) && !this.bytesAre(at, len, '__proto__');
  }
}

/** Payload bytes of an integer format (uint8..int64), else 0. */
export function intSize(c: number): number {
  switch (c) {
    case UINT8: case INT8: return 1;
    case UINT16: case INT16: return 2;
    case UINT32: case INT32: return 4;
    case UINT64: case INT64: return 8;
    default: return 0;
  }
}
