/**
 * Deterministic synthetic tokens for trace blocks, as the shared workloads' generator makes them
 * (shared/workloads/README.md, "Hashes"): token k (0..511) of the 512-token trace block with id
 * `h` is `splitmix64(h*512 + k + seed*0x9E3779B97F4A7C15) mod vocab`, where splitmix64(x) adds
 * the golden gamma to x and applies the usual finaliser. Checked against those
 * workloads: their lookups (`seq`) and events are reproduced bit for bit (test
 * sim-workload-equivalence).
 *
 * A trace replay generates ~512 tokens per trace block (150 M for the whole conversation trace),
 * so the u64 arithmetic is done on u32 halves with doubles kept below 2^53, never with bigint
 * (measured on this 2-core machine under load: bigint splitmix 200-250 ns per token, this
 * 14-15 ns).
 */
import { ErrorCode, KvIndexError } from '../errors.js';

const TWO_32 = 4294967296;
const INV_2_32 = 1 / TWO_32;
const U64_MASK = (1n << 64n) - 1n;

/** The golden gamma 0x9E3779B97F4A7C15 of splitmix64. */
const GAMMA = 0x9e3779b97f4a7c15n;
const GAMMA_LO = 0x7f4a7c15;
const GAMMA_HI = 0x9e3779b9;
const M1_LO = 0x1ce4e5b9; // 0xBF58476D1CE4E5B9
const M1_HI = 0xbf58476d;
const M2_LO = 0x133111eb; // 0x94D049BB133111EB
const M2_HI = 0x94d049bb;
const M1_K0 = M1_LO & 0xffff;
const M1_K1 = M1_LO >>> 16;
const M2_K0 = M2_LO & 0xffff;
const M2_K1 = M2_LO >>> 16;

/** Tokens of one trace block (the Mooncake block size). */
export const TRACE_BLOCK_TOKENS = 512;

/** splitmix64 on bigints: the reference tests compare `fill` with, and the worker-id mixer. */
export function splitmix64(x: bigint): bigint {
  let z = (x + GAMMA) & U64_MASK;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & U64_MASK;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & U64_MASK;
  return z ^ (z >> 31n);
}

/** Generator of the synthetic tokens of trace blocks for one seed and vocabulary. */
export class SyntheticTokens {
  readonly vocab: number;
  private readonly seedLo: number;
  private readonly seedHi: number;
  /** 2^32 mod vocab, to reduce a u64 (hi, lo) without bigint. */
  private readonly wrap: number;

  /** `seed` is a u64; `vocab` an integer in 1..2^21 (so the reduction stays exact). */
  constructor(seed: bigint, vocab: number) {
    if (!Number.isInteger(vocab) || vocab < 1 || vocab > 2 ** 21) {
      throw new KvIndexError(ErrorCode.InvalidOption, `vocab: expected an integer in 1..2097152, got ${String(vocab)}`);
    }
    const s = (seed * GAMMA) & U64_MASK;
    this.seedLo = Number(s & 0xffffffffn);
    this.seedHi = Number(s >> 32n);
    this.vocab = vocab;
    this.wrap = TWO_32 % vocab;
  }

  /**
   * Writes tokens `from .. from+count-1` (within 0..511) of the trace block whose u64 id has
   * halves (`idLo`, `idHi`) into `out` starting at `pos`.
   */
  fill(idLo: number, idHi: number, from: number, count: number, out: Uint32Array, pos: number): void {
    // base = id*512 + seed*GAMMA (mod 2^64)
    const shLo = (idLo << 9) >>> 0;
    const shHi = ((idHi << 9) | (idLo >>> 23)) >>> 0;
    const s0 = shLo + this.seedLo;
    const baseLo = s0 >>> 0;
    const baseHi = (shHi + this.seedHi + (s0 >= TWO_32 ? 1 : 0)) >>> 0;
    const vocab = this.vocab;
    const wrap = this.wrap;
    const inv = 1 / vocab;
    for (let k = from, end = from + count; k < end; k++) {
      // x = base + k, then z = x + GAMMA
      let sum = baseLo + k;
      let hi = baseHi + (sum >= TWO_32 ? 1 : 0);
      sum = (sum >>> 0) + GAMMA_LO;
      let lo = sum >>> 0;
      hi = (hi + GAMMA_HI + (sum >= TWO_32 ? 1 : 0)) >>> 0;
      // z = (z ^ (z >> 30)) * M1, inlined mul64 (see above): a call through R costs 2x here.
      let aLo = (lo ^ ((lo >>> 30) | (hi << 2))) >>> 0;
      let aHi = hi ^ (hi >>> 30);
      let a0 = aLo & 0xffff;
      let a1 = aLo >>> 16;
      let t = a0 * M1_K0 + (a1 * M1_K0 + a0 * M1_K1) * 65536;
      lo = t >>> 0;
      hi = (a1 * M1_K1 + (t - lo) * INV_2_32 + Math.imul(aLo, M1_HI) + Math.imul(aHi, M1_LO)) >>> 0;
      // z = (z ^ (z >> 27)) * M2
      aLo = (lo ^ ((lo >>> 27) | (hi << 5))) >>> 0;
      aHi = hi ^ (hi >>> 27);
      a0 = aLo & 0xffff;
      a1 = aLo >>> 16;
      t = a0 * M2_K0 + (a1 * M2_K0 + a0 * M2_K1) * 65536;
      lo = t >>> 0;
      hi = (a1 * M2_K1 + (t - lo) * INV_2_32 + Math.imul(aLo, M2_HI) + Math.imul(aHi, M2_LO)) >>> 0;
      // z ^= z >> 31; token = z mod vocab
      const zLo = (lo ^ ((lo >>> 31) | (hi << 1))) >>> 0;
      const zHi = (hi ^ (hi >>> 31)) >>> 0;
      // Reduce by multiplying with 1/vocab instead of `%` on non-Smi doubles (fmod): the whole
      // loop took 23 vs 43 ns per token in one A/B run here. Operands stay below 2^50, so each
      // floored quotient is off by at most one and one correction step makes the result exact.
      let r = zHi - Math.floor(zHi * inv) * vocab;
      const v = r * wrap + zLo;
      r = v - Math.floor(v * inv) * vocab;
      out[pos++] = r < 0 ? r + vocab : r >= vocab ? r - vocab : r;
    }
  }
}
