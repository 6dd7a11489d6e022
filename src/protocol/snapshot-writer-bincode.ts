/** Bincode snapshot writers: Dynamo's PR-era bincode-1 layout, and the same with `dp_rank`. */

import type { SnapshotEncoding } from './types.js';
import { HI, LO, SnapshotWriter, TWO_32, misuse, pair32, splitU64 } from './snapshot-writer-base.js';

/** Most bytes of a Stored event before its blocks: 8 + 8 + 4 + 1 + 8 + 8. */
const BINCODE_STORED_HEAD = 37;

/** Dynamo PR-era bincode-1 fixint little-endian layout, without `dp_rank`. */
export class BincodeWriter extends SnapshotWriter {
  constructor(encoding: SnapshotEncoding, initialBytes: number) {
    super(encoding, initialBytes, 8);
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
    if (this.pos + BINCODE_STORED_HEAD > this.buf.length) this.grow(BINCODE_STORED_HEAD);
    const v = this.view;
    let p = this.pos;
    v.setUint32(p, workerLo, true);
    v.setUint32(p + 4, workerHi, true);
    v.setUint32(p + 8, idLo, true);
    v.setUint32(p + 12, idHi, true);
    v.setUint32(p + 16, 0, true); // variant Stored
    if (hasParent) {
      this.buf[p + 20] = 1;
      v.setUint32(p + 21, parentLo, true);
      v.setUint32(p + 25, parentHi, true);
      p += 29;
    } else {
      this.buf[p + 20] = 0;
      p += 21;
    }
    this.openAt = p; // the block count, patched by endStored
    this.pos = p + 8;
  }

  block(blockLo: number, blockHi: number, tokensLo: number, tokensHi: number): void {
    if (this.openAt < 0) throw misuse('block with no open Stored event');
    const p = this.pos;
    if (p + 16 > this.buf.length) this.grow(16);
    const v = this.view;
    v.setUint32(p, blockLo, true);
    v.setUint32(p + 4, blockHi, true);
    v.setUint32(p + 8, tokensLo, true);
    v.setUint32(p + 12, tokensHi, true);
    this.pos = p + 16;
  }

  endStored(dpRank?: number): void {
    const at = this.openAt;
    if (at < 0) throw misuse('endStored with no open Stored event');
    const n = (this.pos - at - 8) / 16;
    this.view.setUint32(at, n, true);
    this.view.setUint32(at + 4, 0, true); // a buffer below 64 GiB holds fewer than 2^32 blocks
    this.openAt = -1;
    this.writeDpRank(dpRank);
    this.count++;
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
    const need = 28 + 8 * n;
    if (this.pos + need > this.buf.length) this.grow(need);
    const v = this.view;
    let p = this.pos;
    v.setUint32(p, workerLo, true);
    v.setUint32(p + 4, workerHi, true);
    v.setUint32(p + 8, idLo, true);
    v.setUint32(p + 12, idHi, true);
    v.setUint32(p + 16, 1, true); // variant Removed
    v.setUint32(p + 20, n, true);
    v.setUint32(p + 24, 0, true);
    p += 28;
    if (hashes instanceof BigUint64Array) {
      for (let i = 0; i < n; i++, p += 8) v.setBigUint64(p, hashes[i]!, true);
    } else {
      for (let i = 0; i < n; i++, p += 8) {
        const h = hashes[i];
        splitU64(h, `blockHashes[${i}]`);
        v.setUint32(p, pair32[LO]!, true);
        v.setUint32(p + 4, pair32[HI]!, true);
      }
    }
    this.pos = p;
    this.writeDpRank(dpRank);
    this.count++;
  }

  protected writeCleared(
    workerLo: number,
    workerHi: number,
    idLo: number,
    idHi: number,
    dpRank: number | undefined,
  ): void {
    if (this.openAt >= 0) throw misuse('cleared while a Stored event is open');
    if (this.pos + 20 > this.buf.length) this.grow(20);
    const v = this.view;
    const p = this.pos;
    v.setUint32(p, workerLo, true);
    v.setUint32(p + 4, workerHi, true);
    v.setUint32(p + 8, idLo, true);
    v.setUint32(p + 12, idHi, true);
    v.setUint32(p + 16, 2, true); // variant Cleared
    this.pos = p + 20;
    this.writeDpRank(dpRank);
    this.count++;
  }

  /** Plain bincode has no dp_rank field. */
  protected writeDpRank(_dpRank: number | undefined): void {}

  protected finishHeader(): void {
    const n = this.count;
    const lo = n >>> 0;
    this.view.setUint32(0, lo, true);
    this.view.setUint32(4, (n - lo) / TWO_32, true);
  }
}

/** Bincode after Dynamo `f978f4d1` (2025-10-15): `dp_rank` u32 LE after `data`. */
export class BincodeDpWriter extends BincodeWriter {
  protected override writeDpRank(dpRank: number | undefined): void {
    if (this.pos + 4 > this.buf.length) this.grow(4);
    this.view.setUint32(this.pos, dpRank ?? 0, true);
    this.pos += 4;
  }
}
