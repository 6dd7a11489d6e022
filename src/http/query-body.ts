/**
 * The `/query` body read straight from its bytes, for the shape clients send:
 * `{"token_ids":[u32,...],"model_name":"...","tenant_id":"..."|null,"lora_name":"..."|null}`
 * in any key order, with JSON whitespace. Tokens land in a reused Uint32Array and nothing is
 * built per token. `JSON.parse` of the UTF-8 text made a string of the body, an array of numbers
 * and then the Uint32Array: 18-30 kB left for the collector per 1,024-token body, against 0.2 kB
 * here, and 15.8-16.8 -> 8.2-9.8 us per body (bench/query-body.bench.ts, three runs). On
 * `kvindex serve --http` at 1,000 requests/s with quiet engines that was about all of the young
 * generation's intake (~5 scavenges/s of ~7 MB each, 0.4-1.5 ms apiece, each one stalling
 * the requests behind it).
 *
 * Anything else returns null and the caller reads the body the general way (`JSON.parse`, then
 * `readQuery`), which gives the same result or the same error as before: a key this reader does
 * not know, a key twice, a string with an escape or a non-ASCII byte, a number that is not a
 * plain decimal u32 (`1.0`, `1e3`, `-1`, `01`, 2^32), a missing or empty `model_name`, or any
 * syntax error. test/query-body.test.ts checks that on valid, edge and mutated bodies: wherever
 * this reader answers, its answer equals the general path's.
 */

import { DEFAULT_TENANT, type QueryRequest } from './requests.js';

const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACKET = 0x5b;
const BACKSLASH = 0x5c;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const ZERO = 0x30;
const NINE = 0x39;

/** Token scratch: its first size, and the largest kept between reads (256k tokens, 1 MiB). */
const INITIAL_TOKENS = 4096;
const MAX_KEPT_TOKENS = 1 << 18;
const U32_MAX = 0xffff_ffff;
const EMPTY = Buffer.alloc(0);

/** Keys, as the bytes between the quotes. */
const KEY_TOKENS = Buffer.from('token_ids');
const KEY_MODEL = Buffer.from('model_name');
const KEY_TENANT = Buffer.from('tenant_id');
const KEY_LORA = Buffer.from('lora_name');

/**
 * Reads `/query` bodies into one reused token array: the `tokenIds` of an answer is a view of
 * it, valid until the next `read`. The `/query` route hashes them at once, before any `await`.
 */
export class QueryBodyReader {
  private tokens: Uint32Array = new Uint32Array(INITIAL_TOKENS);
  private b: Buffer = EMPTY;
  private p = 0;
  private end = 0;

  /** The request, or null when the body is not in the shape above (read it the general way). */
  read(body: Buffer): QueryRequest | null {
    this.b = body;
    this.p = 0;
    this.end = body.length;
    try {
      return this.object();
    } finally {
      this.b = EMPTY; // do not keep a large body alive
      // A large body's tokens stay with its answer (a view of this array); the next read starts
      // from a small scratch again.
      if (this.tokens.length > MAX_KEPT_TOKENS) this.tokens = new Uint32Array(INITIAL_TOKENS);
    }
  }

  private object(): QueryRequest | null {
    if (this.next() !== LBRACE) return null;
    this.p++;
    let count = -1;
    let model: string | null = null;
    let tenant: string | null | undefined;
    let lora: string | null | undefined;
    if (this.next() === RBRACE) return null; // no model_name: the general path says so
    for (;;) {
      if (this.next() !== QUOTE) return null;
      const k0 = this.p + 1;
      const k1 = this.stringEnd();
      if (k1 < 0) return null;
      if (this.next() !== COLON) return null;
      this.p++;
      if (this.is(k0, k1, KEY_TOKENS)) {
        if (count >= 0) return null;
        count = this.tokenList();
        if (count < 0) return null;
      } else if (this.is(k0, k1, KEY_MODEL)) {
        if (model !== null) return null;
        model = this.string();
        if (model === null || model === '') return null;
      } else if (this.is(k0, k1, KEY_TENANT)) {
        if (tenant !== undefined) return null;
        tenant = this.stringOrNull();
        if (tenant === undefined) return null;
      } else if (this.is(k0, k1, KEY_LORA)) {
        if (lora !== undefined) return null;
        lora = this.stringOrNull();
        if (lora === undefined) return null;
      } else {
        return null;
      }
      const c = this.next();
      this.p++;
      if (c === RBRACE) break;
      if (c !== COMMA) return null;
    }
    if (this.next() !== -1) return null;
    if (count < 0 || model === null) return null;
    return { tokenIds: this.tokens.subarray(0, count), modelName: model, tenantId: tenant ?? DEFAULT_TENANT, loraName: lora ?? null };
  }

  /** `[u32, ...]` into the token scratch: the count, or -1 for anything else. */
  private tokenList(): number {
    if (this.next() !== LBRACKET) return -1;
    this.p++;
    if (this.next() === RBRACKET) {
      this.p++;
      return 0;
    }
    // One loop over locals: the cursor lives in `p` until the list ends (through this.next()
    // per token it measured 16 us per 1,024-token body, as slow as JSON.parse).
    const b = this.b;
    const end = this.end;
    let tokens = this.tokens;
    let p = this.p;
    let n = 0;
    for (;;) {
      let c = p < end ? b[p]! : -1;
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++p < end ? b[p]! : -1;
      if (c < ZERO || c > NINE) return -1;
      let v = c - ZERO;
      p++;
      // After a leading 0 the next byte must be a separator ("01" fails there, below).
      if (v !== 0) {
        while (p < end && b[p]! >= ZERO && b[p]! <= NINE) {
          v = v * 10 + (b[p]! - ZERO);
          if (v > U32_MAX) return -1;
          p++;
        }
      }
      if (n === tokens.length) tokens = this.grow();
      tokens[n++] = v;
      c = p < end ? b[p]! : -1;
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++p < end ? b[p]! : -1;
      p++;
      if (c === RBRACKET) break;
      if (c !== COMMA) return -1; // '.', 'e' or 'E' after the digits: not a plain u32
    }
    this.p = p;
    return n;
  }

  private grow(): Uint32Array {
    const next = new Uint32Array(this.tokens.length * 2);
    next.set(this.tokens);
    this.tokens = next;
    return next;
  }

  /** A string value without escapes or non-ASCII bytes, or null. */
  private string(): string | null {
    if (this.next() !== QUOTE) return null;
    const s0 = this.p + 1;
    const s1 = this.stringEnd();
    return s1 < 0 ? null : this.b.toString('latin1', s0, s1);
  }

  /** A string as `string`, `null` as null; undefined for anything else. */
  private stringOrNull(): string | null | undefined {
    const c = this.next();
    if (c === QUOTE) return this.string() ?? undefined;
    const b = this.b;
    const p = this.p;
    if (p + 4 <= this.end && b[p] === 0x6e && b[p + 1] === 0x75 && b[p + 2] === 0x6c && b[p + 3] === 0x6c) {
      this.p = p + 4;
      return null;
    }
    return undefined;
  }

  /**
   * At an opening quote: moves past the closing one and returns its position, or -1 when the
   * string holds an escape, a control character or a non-ASCII byte, or does not end.
   */
  private stringEnd(): number {
    const b = this.b;
    for (let p = this.p + 1; p < this.end; p++) {
      const c = b[p]!;
      if (c === QUOTE) {
        this.p = p + 1;
        return p;
      }
      if (c === BACKSLASH || c < 0x20 || c > 0x7e) return -1;
    }
    return -1;
  }

  /** Whether bytes [k0, k1) are `key`. */
  private is(k0: number, k1: number, key: Uint8Array): boolean {
    if (k1 - k0 !== key.length) return false;
    const b = this.b;
    for (let i = 0; i < key.length; i++) if (b[k0 + i] !== key[i]) return false;
    return true;
  }

  /** Skips JSON whitespace; the byte there, or -1 at the end. */
  private next(): number {
    const b = this.b;
    let p = this.p;
    while (p < this.end) {
      const c = b[p]!;
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      p++;
    }
    this.p = p;
    return p < this.end ? b[p]! : -1;
  }
}
