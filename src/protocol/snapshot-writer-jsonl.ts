/** The JSON-lines snapshot writer: one Dynamo serde-JSON RouterEvent per line, from u32 halves. */

import { HI, LO, SnapshotWriter, misuse, pair32, pair64, splitU64 } from './snapshot-writer-base.js';
import { U64_DECIMAL_MAX_BYTES, writeU64Decimal, writeUintDecimal } from './u64-decimal.js';

/**
 * An ASCII constant packed into little-endian u32 words. `put` stores it four bytes at a time
 * and may write up to 3 bytes of padding past its end, which the next write overwrites (every
 * capacity check below adds `PAD`). Measured on the 2-core dev box, writing the 113 constant
 * bytes of a single-block Stored line: u32 words ~115 ns, a byte loop ~205 ns,
 * `Uint8Array.prototype.set` per constant ~230 ns.
 */
interface Ascii {
  readonly words: Uint32Array;
  readonly length: number;
}

function ascii(text: string): Ascii {
  const bytes = new TextEncoder().encode(text);
  const padded = new Uint8Array(Math.ceil(bytes.length / 4) * 4);
  padded.set(bytes);
  const view = new DataView(padded.buffer);
  const words = new Uint32Array(padded.length / 4);
  for (let i = 0; i < words.length; i++) words[i] = view.getUint32(4 * i, true);
  return { words, length: bytes.length };
}

/** Bytes `put` may write past a constant's end. */
const PAD = 3;

function put(view: DataView, p: number, text: Ascii): number {
  const words = text.words;
  for (let i = 0; i < words.length; i++) view.setUint32(p + 4 * i, words[i]!, true);
  return p + text.length;
}

const J_WORKER = ascii('{"worker_id":');
const J_EVENT_ID = ascii(',"event":{"event_id":');
const J_STORED = ascii(',"data":{"stored":{"parent_hash":');
const J_NULL = ascii('null');
const J_BLOCKS = ascii(',"blocks":[');
const J_BLOCK_HASH = ascii('{"block_hash":');
const J_TOKENS_HASH = ascii(',"tokens_hash":');
const J_END_DATA = ascii(']}}');
const J_REMOVED = ascii(',"data":{"removed":{"block_hashes":[');
const J_CLEARED = ascii(',"data":"cleared"');
const J_DP_RANK = ascii(',"dp_rank":');
const J_END_EVENT = ascii('}}\n');
const COMMA = 0x2c;
const CLOSE_BRACE = 0x7d;

/** Bytes of `{"worker_id":W,"event":{"event_id":N` at most. */
const JSON_HEAD_MAX = J_WORKER.length + J_EVENT_ID.length + 2 * U64_DECIMAL_MAX_BYTES;
/** Bytes of `]}},"dp_rank":D}}\n` at most, padding included. */
const JSON_TAIL_MAX = J_END_DATA.length + J_DP_RANK.length + 10 + J_END_EVENT.length + PAD;
/** Bytes of `,{"block_hash":B,"tokens_hash":T}` at most, padding included. */
const JSON_BLOCK_MAX =
  1 + J_BLOCK_HASH.length + J_TOKENS_HASH.length + 2 * U64_DECIMAL_MAX_BYTES + 1 + PAD;

/**
 * JSON lines: one compact serde-JSON RouterEvent per line, `\n`-terminated, fields in Dynamo's
 * declaration order (Dynamo reference §1.2).
 */
export class JsonlWriter extends SnapshotWriter {
  constructor(initialBytes: number) {
    super('jsonl', initialBytes, 0);
  }

  /** Writes `{"worker_id":W,"event":{"event_id":N` at `p` (room checked by the caller). */
  private head(p: number, workerLo: number, workerHi: number, idLo: number, idHi: number): number {
    const buf = this.buf;
    const view = this.view;
    p = put(view, p, J_WORKER);
    p = writeU64Decimal(buf, p, workerLo, workerHi);
    p = put(view, p, J_EVENT_ID);
    return writeU64Decimal(buf, p, idLo, idHi);
  }

  /** Writes `]}}` when `closeData`, the optional dp_rank and `}}\n`; counts the event. */
  private tail(closeData: boolean, dpRank: number | undefined): void {
    if (this.pos + JSON_TAIL_MAX > this.buf.length) this.grow(JSON_TAIL_MAX);
    const view = this.view;
    let p = this.pos;
    if (closeData) p = put(view, p, J_END_DATA);
    if (dpRank !== undefined) {
      p = put(view, p, J_DP_RANK);
      p = writeUintDecimal(this.buf, p, dpRank);
    }
    this.pos = put(view, p, J_END_EVENT);
    this.count++;
  }

  protected openStored(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    hasParent: boolean,
    parentLo: number,
    parentHi: number,
  ): void {
    if (this.openAt >= 0) throw misuse('beginStored while a Stored event is open');
    const need = JSON_HEAD_MAX + J_STORED.length + U64_DECIMAL_MAX_BYTES + J_BLOCKS.length + PAD;
    if (this.pos + need > this.buf.length) this.grow(need);
    const view = this.view;
    let p = this.head(this.pos, workerLo, workerHi, idLo, idHi);
    p = put(view, p, J_STORED);
    p = hasParent ? writeU64Decimal(this.buf, p, parentLo, parentHi) : put(view, p, J_NULL);
    p = put(view, p, J_BLOCKS);
    this.openAt = p; // a block written here is the first one: no comma before it
    this.pos = p;
  }

  block(blockLo: number, blockHi: number, tokensLo: number, tokensHi: number): void {
    const at = this.openAt;
    if (at < 0) throw misuse('block with no open Stored event');
    if (this.pos + JSON_BLOCK_MAX > this.buf.length) this.grow(JSON_BLOCK_MAX);
    const buf = this.buf;
    const view = this.view;
    let p = this.pos;
    if (p !== at) buf[p++] = COMMA;
    p = put(view, p, J_BLOCK_HASH);
    p = writeU64Decimal(buf, p, blockLo, blockHi);
    p = put(view, p, J_TOKENS_HASH);
    p = writeU64Decimal(buf, p, tokensLo, tokensHi);
    buf[p] = CLOSE_BRACE;
    this.pos = p + 1;
  }

  endStored(dpRank?: number): void {
    if (this.openAt < 0) throw misuse('endStored with no open Stored event');
    this.openAt = -1;
    this.tail(true, dpRank);
  }

  protected writeRemoved(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    hashes: BigUint64Array | readonly bigint[],
    dpRank: number | undefined,
  ): void {
    if (this.openAt >= 0) throw misuse('removed while a Stored event is open');
    const n = hashes.length;
    const need = JSON_HEAD_MAX + J_REMOVED.length + n * (U64_DECIMAL_MAX_BYTES + 1) + PAD;
    if (this.pos + need > this.buf.length) this.grow(need);
    const buf = this.buf;
    let p = put(this.view, this.head(this.pos, workerLo, workerHi, idLo, idHi), J_REMOVED);
    for (let i = 0; i < n; i++) {
      if (i > 0) buf[p++] = COMMA;
      // A BigUint64Array element is always in range; a plain array element is checked.
      if (hashes instanceof BigUint64Array) pair64[0] = hashes[i]!;
      else splitU64(hashes[i], `blockHashes[${i}]`);
      p = writeU64Decimal(buf, p, pair32[LO]!, pair32[HI]!);
    }
    this.pos = p;
    this.tail(true, dpRank);
  }

  protected writeCleared(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    dpRank: number | undefined,
  ): void {
    if (this.openAt >= 0) throw misuse('cleared while a Stored event is open');
    const need = JSON_HEAD_MAX + J_CLEARED.length + PAD;
    if (this.pos + need > this.buf.length) this.grow(need);
    this.pos = put(this.view, this.head(this.pos, workerLo, workerHi, idLo, idHi), J_CLEARED);
    this.tail(false, dpRank);
  }

  protected finishHeader(): void {}
}
