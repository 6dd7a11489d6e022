/**
 * A fast path from event JSON straight to batch words, with no event object and no bigint: it
 * reads only the exact compact layout serde writes (key order, no whitespace, no extra fields),
 *   {"worker_id":N,"event":{"event_id":N,"data":DATA[,"dp_rank":N]}}
 *   DATA: {"stored":{"parent_hash":N|null,"blocks":[{"block_hash":N,"tokens_hash":N},...]}}
 *       | {"removed":{"block_hashes":[N,...]}} | "cleared"
 * and declines anything else (returns false, writing nothing), for the caller to parse it with
 * `parseRouterEvent`, which accepts every layout serde accepts and names the field of an error.
 * So the fast path never decides what is valid: it only recognises text the full parser would
 * read to the same event.
 */
import { JsonScanner } from '../../protocol/json-scan.js';
import type { EventBatchWriter } from './event-batch.js';

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const HEAD = utf8('{"worker_id":');
const EVENT_ID = utf8(',"event":{"event_id":');
const DATA = utf8(',"data":');
const STORED = utf8('{"stored":{"parent_hash":');
const NULL = utf8('null');
const BLOCKS = utf8(',"blocks":[');
const BLOCK_HASH = utf8('{"block_hash":');
const TOKENS_HASH = utf8(',"tokens_hash":');
const REMOVED = utf8('{"removed":{"block_hashes":[');
const CLEARED = utf8('"cleared"');
const DP_RANK = utf8(',"dp_rank":');
const COMMA = 0x2c;
const RBRACKET = 0x5d;
const RBRACE = 0x7d;

/** Encodes canonical event JSON into an `EventBatchWriter`; one instance per thread. */
export class JsonEventEncoder {
  private readonly s = new JsonScanner();
  /** (lo, hi) words of the event's hashes, grown as needed. */
  private words = new Uint32Array(1024);

  /**
   * Appends the event in `bytes[start, end)` to `writer` and returns true, or returns false
   * (writing nothing) when the text is not in the canonical layout or not valid.
   */
  encode(bytes: Uint8Array, start: number, end: number, writer: EventBatchWriter): boolean {
    const s = this.s;
    s.b = bytes;
    s.pos = start;
    s.end = end;
    try {
      return this.read(writer);
    } catch {
      return false; // a number out of range, a syntax error: the full parser reports it
    } finally {
      s.release();
    }
  }

  private read(writer: EventBatchWriter): boolean {
    const s = this.s;
    if (!this.lit(HEAD)) return false;
    s.scanU64('worker_id', -1);
    const wLo = s.lo;
    const wHi = s.hi;
    if (!this.lit(EVENT_ID)) return false;
    s.scanU64('event.event_id', -1);
    if (!this.lit(DATA)) return false;
    let kind: 'stored' | 'removed' | 'cleared';
    let hasParent = false;
    let pLo = 0;
    let pHi = 0;
    let n = 0;
    if (this.lit(STORED)) {
      kind = 'stored';
      if (!this.lit(NULL)) {
        s.scanU64('parent_hash', -1);
        hasParent = true;
        pLo = s.lo;
        pHi = s.hi;
      }
      if (!this.lit(BLOCKS)) return false;
      if (!this.byte(RBRACKET)) {
        do {
          if (!this.lit(BLOCK_HASH)) return false;
          this.hash(n * 2);
          if (!this.lit(TOKENS_HASH)) return false;
          this.hash(n * 2 + 1);
          if (!this.byte(RBRACE)) return false;
          n++;
        } while (this.byte(COMMA));
        if (!this.byte(RBRACKET)) return false;
      }
      if (!this.byte(RBRACE) || !this.byte(RBRACE)) return false;
    } else if (this.lit(REMOVED)) {
      kind = 'removed';
      if (!this.byte(RBRACKET)) {
        do this.hash(n++);
        while (this.byte(COMMA));
        if (!this.byte(RBRACKET)) return false;
      }
      if (!this.byte(RBRACE) || !this.byte(RBRACE)) return false;
    } else if (this.lit(CLEARED)) {
      kind = 'cleared';
    } else {
      return false;
    }
    if (this.lit(DP_RANK)) {
      s.scanU64('event.dp_rank', -1);
      if (s.hi !== 0) return false;
    }
    if (!this.byte(RBRACE) || !this.byte(RBRACE) || s.pos !== s.end) return false;
    if (kind === 'stored') writer.pushStoredWords(wLo, wHi, hasParent, pLo, pHi, this.words, n);
    else if (kind === 'removed') writer.pushRemovedWords(wLo, wHi, this.words, n);
    else writer.pushClearedWords(wLo, wHi);
    return true;
  }

  /** Reads a u64 into hash slot `k` (words 2k, 2k + 1). */
  private hash(k: number): void {
    const s = this.s;
    s.scanU64('hash', -1);
    if (2 * k + 2 > this.words.length) {
      const grown = new Uint32Array(this.words.length * 2);
      grown.set(this.words);
      this.words = grown;
    }
    this.words[2 * k] = s.lo;
    this.words[2 * k + 1] = s.hi;
  }

  /** Consumes `bytes` when the input continues with exactly them. */
  private lit(bytes: Uint8Array): boolean {
    const s = this.s;
    const p = s.pos;
    if (p + bytes.length > s.end) return false;
    for (let i = 0; i < bytes.length; i++) if (s.b[p + i] !== bytes[i]) return false;
    s.pos = p + bytes.length;
    return true;
  }

  /** Consumes one byte `c` when it comes next. */
  private byte(c: number): boolean {
    const s = this.s;
    if (s.pos < s.end && s.b[s.pos] === c) {
      s.pos++;
      return true;
    }
    return false;
  }
}
