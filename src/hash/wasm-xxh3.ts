/**
 * The WebAssembly XXH3-64 (src/hash/wasm/xxh3.as.ts, built to xxh3.wasm beside it): loaded and
 * instantiated synchronously when this module is imported, so every hashing call stays
 * synchronous. The .wasm is committed and `test/wasm-build.test.ts` rebuilds it from the source
 * and checks the bytes are identical; `npm run build` only copies it into dist, so neither the
 * package nor its build needs the AssemblyScript toolchain.
 *
 * The module has no allocator. This file owns its memory: callers lay out inputs and outputs
 * from `HEAP` upwards, `ensureMemory` grows it (pages are never given back: a process hashes
 * prompts of similar sizes), and the views below are rebuilt after a growth, which detaches the
 * old buffer. Everything here is internal to src/hash/.
 *
 * WebAssembly memory is little-endian. On a little-endian host the typed-array views already
 * read and write it in that order; on a big-endian host the byte-order helpers (chosen once
 * below) swap in place or go through a `DataView`.
 */

import { readFileSync } from 'node:fs';
import { ErrorCode, KvIndexError } from '../errors.js';

/** The part of a `WebAssembly.Memory` used here. */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}

/**
 * The part of the `WebAssembly` global used here, typed locally: Node 20's types and the ES
 * libs do not declare it, and a global declaration in our .d.ts would clash with a consumer's
 * DOM lib.
 */
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { readonly exports: Record<string, unknown> };
  Memory: abstract new (...args: never[]) => WasmMemory;
}

/** The exports of xxh3.wasm (addresses and lengths in bytes; seeds as u32 halves). */
interface Xxh3Exports {
  readonly memory: WasmMemory;
  heapBase(): number;
  hashBytes(input: number, length: number, seedLo: number, seedHi: number, output: number): void;
  hashBlocks(input: number, blockBytes: number, count: number, seedLo: number, seedHi: number, output: number): void;
  sequenceHashes(input: number, count: number, output: number): void;
}

/** A u64 seed as the two u32 halves the module takes. */
export interface SeedHalves {
  readonly lo: number;
  readonly hi: number;
}

const EXPORTS = ['heapBase', 'hashBytes', 'hashBlocks', 'sequenceHashes'] as const;

function instantiate(): Xxh3Exports {
  const api = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
  const bytes = readFileSync(new URL('./wasm/xxh3.wasm', import.meta.url));
  const exports = new api.Instance(new api.Module(bytes), {}).exports;
  for (const name of EXPORTS) {
    if (typeof exports[name] !== 'function') throw new Error(`xxh3.wasm does not export ${name}()`);
  }
  if (!(exports['memory'] instanceof api.Memory)) throw new Error('xxh3.wasm does not export its memory');
  return exports as unknown as Xxh3Exports;
}

const wasm = instantiate();
const memory = wasm.memory;

/** The first free byte of the module's memory, 16-byte aligned. */
export const HEAP: number = wasm.heapBase();

const PAGE = 65_536;

/** Views of the module's memory, valid until the next `ensureMemory` that grows it. */
export let u8 = new Uint8Array(memory.buffer);
export let u32 = new Uint32Array(memory.buffer);
let u64 = new BigUint64Array(memory.buffer);
let view = new DataView(memory.buffer);

/** Grows the module's memory so that bytes below `end` (an address) exist. */
export function ensureMemory(end: number): void {
  const have = memory.buffer.byteLength;
  if (end <= have) return;
  if (end > MAX_LAYOUT_BYTES) throw tooLarge(end);
  memory.grow(Math.ceil((end - have) / PAGE));
  u8 = new Uint8Array(memory.buffer);
  u32 = new Uint32Array(memory.buffer);
  u64 = new BigUint64Array(memory.buffer);
  view = new DataView(memory.buffer);
}

/**
 * The end of what one call may lay out: addresses are computed with 32-bit integer operations
 * here, so a layout past 2 GiB wrapped around to a small address, passed the growth check and
 * failed inside `TypedArray.set` with "offset is out of bounds" (found by fuzzing: a trace
 * line of 2M blocks asked to hash 1G tokens).
 */
export const MAX_LAYOUT_BYTES = 0x7fff_0000;

/**
 * `address` rounded up to a multiple of 16. Throws `KvIndexError` `InvalidField` past
 * `MAX_LAYOUT_BYTES` (every layout goes through here before `ensureMemory`).
 */
export function align16(address: number): number {
  if (address > MAX_LAYOUT_BYTES) throw tooLarge(address);
  return (address + 15) & ~15;
}

function tooLarge(bytes: number): KvIndexError {
  return new KvIndexError(ErrorCode.InvalidField, `input too large to hash in one call: it needs ${Math.ceil(bytes / 2 ** 20)} MiB of the hasher's memory, at most ${MAX_LAYOUT_BYTES >>> 20}`);
}

/** XXH3-64 of `count` inputs of `blockBytes` bytes from `input`; hash i as a u64 at output + 8i. */
export function hashBlocksAt(input: number, blockBytes: number, count: number, seed: SeedHalves, output: number): void {
  wasm.hashBlocks(input, blockBytes, count, seed.lo, seed.hi, output);
}

/** XXH3-64 of `length` bytes at `input`, as a u64 at `output`. */
export function hashBytesAt(input: number, length: number, seed: SeedHalves, output: number): void {
  wasm.hashBytes(input, length, seed.lo, seed.hi, output);
}

/** Dynamo's rolling sequence hash (seed 1337) of `count` u64s at `input`, to `output`. */
export function sequenceHashesAt(input: number, count: number, output: number): void {
  wasm.sequenceHashes(input, count, output);
}

/** The u64 at `address` (8-byte aligned). */
export function readU64(address: number): bigint {
  return view.getBigUint64(address, true);
}

const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

function noop(): void {}

/** Byte-swaps `count` u32 words from `address` in place: host order <-> little-endian. */
export function swapWordsPortable(address: number, count: number): void {
  for (let a = address, end = address + 4 * count; a < end; a += 4) view.setUint32(a, view.getUint32(a, false), true);
}

/** `count` u64s from `address` (8-byte aligned) copied out, read little-endian with a `DataView`. */
export function copyU64sPortable(address: number, count: number): BigUint64Array {
  const out = new BigUint64Array(count);
  for (let i = 0; i < count; i++) out[i] = view.getBigUint64(address + 8 * i, true);
  return out;
}

/** `values` written little-endian from `address` (4-byte aligned) with a `DataView`. */
export function writeU64sPortable(values: BigUint64Array, address: number): void {
  for (let i = 0; i < values.length; i++) view.setBigUint64(address + 8 * i, values[i]!, true);
}

function copyU64sNative(address: number, count: number): BigUint64Array {
  return u64.slice(address >>> 3, (address >>> 3) + count);
}

function writeU64sNative(values: BigUint64Array, address: number): void {
  if ((address & 7) === 0) {
    u64.set(values, address >>> 3);
    return;
  }
  const words = new Uint32Array(values.buffer, values.byteOffset, 2 * values.length);
  u32.set(words, address >>> 2);
}

/**
 * Words written through `u32` (host order) made little-endian, in place: nothing to do on a
 * little-endian host.
 */
export const wordsToLittleEndian: (address: number, count: number) => void = LITTLE_ENDIAN ? noop : swapWordsPortable;

/** `count` u64s at `address` (8-byte aligned) copied into a new array. */
export const copyU64s: (address: number, count: number) => BigUint64Array = LITTLE_ENDIAN
  ? copyU64sNative
  : copyU64sPortable;

/** The u64 at `address` (8-byte aligned) stored into `out[0]` (no bigint made on a little-endian host). */
export function readU64Into(address: number, out: BigUint64Array): void {
  if (LITTLE_ENDIAN) out[0] = u64[address >>> 3]!;
  else out[0] = view.getBigUint64(address, true);
}

/** `count` u64s at `address` (8-byte aligned) stored into `out` from index `at`. */
export function readU64sInto(address: number, count: number, out: BigUint64Array, at: number): void {
  if (LITTLE_ENDIAN) {
    out.set(u64.subarray(address >>> 3, (address >>> 3) + count), at);
    return;
  }
  for (let i = 0; i < count; i++) out[at + i] = view.getBigUint64(address + 8 * i, true);
}

/** `values` stored from `address` (4-byte aligned) as little-endian u64s. */
export const writeU64s: (values: BigUint64Array, address: number) => void = LITTLE_ENDIAN
  ? writeU64sNative
  : writeU64sPortable;
