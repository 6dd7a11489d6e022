/**
 * An open-addressing hash map from u64 keys, given as u32 halves, to non-negative int32 values:
 * the block lookup of one simulated worker cache (sequence hash -> cache slot). Linear probing
 * at a load factor of at most 1/2, deletion by backward shift (no tombstones), so a cache that
 * churns millions of blocks through a fixed capacity never degrades. Keys are xxh3 outputs,
 * already uniform, so the low bits of a cheap mix index the table.
 */

const EMPTY = -1;

export class U64SlotMap {
  private keyLo: Uint32Array;
  private keyHi: Uint32Array;
  private vals: Int32Array;
  private mask: number;
  private count = 0;

  /** `expected`: the number of keys it should hold without growing. */
  constructor(expected: number) {
    let cap = 16;
    while (cap < expected * 2) cap *= 2;
    this.keyLo = new Uint32Array(cap);
    this.keyHi = new Uint32Array(cap);
    this.vals = new Int32Array(cap).fill(EMPTY);
    this.mask = cap - 1;
  }

  get size(): number {
    return this.count;
  }

  /** Bytes of the backing arrays. */
  get bytes(): number {
    return this.vals.length * 12;
  }

  /** The value of (lo, hi), or -1 when absent. */
  get(lo: number, hi: number): number {
    const mask = this.mask;
    const vals = this.vals;
    for (let i = home(lo, hi, mask); ; i = (i + 1) & mask) {
      const v = vals[i]!;
      if (v === EMPTY) return EMPTY;
      if (this.keyLo[i] === lo && this.keyHi[i] === hi) return v;
    }
  }

  /** Sets (lo, hi) to `value` (>= 0), replacing any previous value. */
  set(lo: number, hi: number, value: number): void {
    if ((this.count + 1) * 2 > this.vals.length) this.grow();
    const mask = this.mask;
    const vals = this.vals;
    for (let i = home(lo, hi, mask); ; i = (i + 1) & mask) {
      const v = vals[i]!;
      if (v === EMPTY) {
        this.keyLo[i] = lo;
        this.keyHi[i] = hi;
        vals[i] = value;
        this.count++;
        return;
      }
      if (this.keyLo[i] === lo && this.keyHi[i] === hi) {
        vals[i] = value;
        return;
      }
    }
  }

  /** Removes (lo, hi); returns whether it was present. */
  delete(lo: number, hi: number): boolean {
    const mask = this.mask;
    const vals = this.vals;
    const keyLo = this.keyLo;
    const keyHi = this.keyHi;
    let i = home(lo, hi, mask);
    for (; ; i = (i + 1) & mask) {
      if (vals[i] === EMPTY) return false;
      if (keyLo[i] === lo && keyHi[i] === hi) break;
    }
    // Backward shift: move later members of the probe run into the hole when their home
    // position does not lie cyclically in (hole, j].
    let hole = i;
    for (let j = (i + 1) & mask; vals[j] !== EMPTY; j = (j + 1) & mask) {
      const h = home(keyLo[j]!, keyHi[j]!, mask);
      const stays = hole <= j ? hole < h && h <= j : hole < h || h <= j;
      if (stays) continue;
      keyLo[hole] = keyLo[j]!;
      keyHi[hole] = keyHi[j]!;
      vals[hole] = vals[j]!;
      hole = j;
    }
    vals[hole] = EMPTY;
    this.count--;
    return true;
  }

  /** Removes every key, keeping the capacity. */
  clear(): void {
    this.vals.fill(EMPTY);
    this.count = 0;
  }

  private grow(): void {
    const { keyLo, keyHi, vals } = this;
    const cap = vals.length * 2;
    this.keyLo = new Uint32Array(cap);
    this.keyHi = new Uint32Array(cap);
    this.vals = new Int32Array(cap).fill(EMPTY);
    this.mask = cap - 1;
    this.count = 0;
    for (let i = 0; i < vals.length; i++) if (vals[i] !== EMPTY) this.set(keyLo[i]!, keyHi[i]!, vals[i]!);
  }
}

function home(lo: number, hi: number, mask: number): number {
  const h = Math.imul(lo ^ hi, 0x9e3779b1);
  return (h ^ (h >>> 15)) & mask;
}
