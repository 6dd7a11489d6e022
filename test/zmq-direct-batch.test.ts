/**
 * The direct batch reader (src/zmq/direct-batch.ts) against the generic msgpack path: wherever
 * the reader answers, its batch equals the generic one, on generated batches (both event
 * encodings, every integer width, bytes hashes, unknown keys, the fields the reader leaves to
 * the generic path) and on mutated ones; and it answers for the shapes engines send.
 */
import { Decoder, Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { DirectBatchReader } from '../src/zmq/direct-batch.js';
import { decodeBatchGeneric, type EngineBatch } from '../src/zmq/wire.js';
import { unitRandom as rng } from './support/rng.js';

const enc = new Encoder({ useBigInt64: true });
const dec = new Decoder({ useBigInt64: true });

function generic(payload: Uint8Array): EngineBatch | string {
  try {
    return decodeBatchGeneric(dec, payload);
  } catch (err) {
    return `error: ${(err as Error).message}`;
  }
}

function check(reader: DirectBatchReader, payload: Uint8Array): EngineBatch | null {
  const direct = reader.read(payload);
  if (direct !== null) expect(direct).toEqual(generic(payload));
  return direct;
}


/** A hash in one of the encodings engines use (u64, i64, small ints, negative ints, bytes). */
function hashValue(r: () => number): unknown {
  const k = r();
  if (k < 0.4) return (BigInt(Math.floor(r() * 2 ** 32)) << 32n) | BigInt(Math.floor(r() * 2 ** 32)) | 1n << 63n;
  if (k < 0.55) return -BigInt(Math.floor(r() * 2 ** 40)) - 1n;
  if (k < 0.75) return [0, 1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1][Math.floor(r() * 9)]!;
  if (k < 0.85) return -[1, 32, 33, 128, 129, 32_768, 32_769, 2 ** 31][Math.floor(r() * 8)]!;
  return new Uint8Array(Math.floor(r() * 40)).map(() => Math.floor(r() * 256)); // may be empty: generic path
}

/** An event the way vLLM (array or map) or SGLang sends it, sometimes with what the reader leaves. */
function eventValue(r: () => number, odd: boolean): unknown {
  const kind = r();
  const hashes = Array.from({ length: Math.floor(r() * 6) }, () => hashValue(r));
  const medium = [null, 'GPU', 'CPU', 'STORAGE', odd ? 'GPU\u00e9' : 'x'][Math.floor(r() * 5)];
  const group = r() < 0.5 ? null : Math.floor(r() * (r() < 0.1 ? 2 ** 32 : 4));
  if (kind < 0.15) return r() < 0.5 ? ['BlockRemoved', hashes, medium, group] : { type: 'BlockRemoved', block_hashes: hashes, medium, group_idx: group };
  if (kind < 0.2) return r() < 0.5 ? ['AllBlocksCleared'] : { type: 'AllBlocksCleared' };
  if (odd && kind < 0.23) return ['Unknown', []];
  const bs = 4;
  const tokens = Array.from({ length: Math.floor(r() * 20) }, () => (r() < 0.1 ? Math.floor(r() * 2 ** 32) : Math.floor(r() * 300)));
  if (odd && r() < 0.1) tokens.push(-1);
  const parent = r() < 0.5 ? null : hashValue(r);
  const extra = odd && r() < 0.2 ? [['a'.repeat(64), 0]] : null;
  const spec = [null, 'full_attention', odd ? 'sliding_window' : 'full_attention'][Math.floor(r() * 3)];
  const lora = r() < 0.8 ? null : 'adapter-1';
  if (r() < 0.5) {
    const a: unknown[] = ['BlockStored', hashes, parent, tokens, bs, r() < 0.5 ? null : 3, medium, lora, extra, group, spec];
    return a.slice(0, r() < 0.3 ? 5 + Math.floor(r() * 6) : 11).concat(odd && r() < 0.1 ? [{ later: [1, 'x'] }] : []);
  }
  const m: Record<string, unknown> = { type: 'BlockStored', block_hashes: hashes, parent_block_hash: parent, token_ids: tokens, block_size: bs, lora_id: null, medium, lora_name: lora, extra_keys: extra, group_idx: group, kv_cache_spec_kind: spec };
  if (odd && r() < 0.2) m.future_field = { nested: [1, 2, { deep: null }], f: 1.5 };
  return m;
}

function batchPayload(r: () => number, odd: boolean): Uint8Array {
  const events = Array.from({ length: Math.floor(r() * 5) }, () => eventValue(r, odd));
  const ts = r() < 0.7 ? 1_700_000_000 + r() : Math.floor(r() * 1000);
  const rank = r() < 0.3 ? undefined : r() < 0.5 ? null : Math.floor(r() * 4);
  return enc.encode(rank === undefined ? [ts, events] : [ts, events, rank]);
}

describe('DirectBatchReader', () => {
  it('reads the usual batches (both encodings, every integer width), equal to the generic path', () => {
    const reader = new DirectBatchReader();
    const r = rng(3);
    let answered = 0;
    for (let i = 0; i < 3_000; i++) {
      const payload = batchPayload(r, false);
      if (check(reader, payload) !== null) answered++;
    }
    // Only empty bytes hashes go the generic way here.
    expect(answered).toBeGreaterThan(2_000);
  });

  it('answers the shape the engines of the benchmark send', () => {
    const hashes = [2n ** 63n + 5n, 2n ** 63n + 6n];
    const stored = { type: 'BlockStored', block_hashes: hashes, parent_block_hash: null, token_ids: Array.from({ length: 32 }, (_, i) => i * 1000), block_size: 16, lora_id: null, medium: 'GPU', lora_name: null, extra_keys: null, group_idx: 0, kv_cache_spec_kind: 'full_attention' };
    const payload = enc.encode([1.5, [stored, stored, { type: 'BlockRemoved', block_hashes: hashes, medium: 'GPU', group_idx: 0 }], 0]);
    const got = check(new DirectBatchReader(), payload);
    expect(got).not.toBeNull();
    expect(got!.events.length).toBe(3);
  });

  it('leaves to the generic path what it does not read, and agrees wherever it answers', () => {
    const reader = new DirectBatchReader();
    const r = rng(5);
    for (let i = 0; i < 3_000; i++) check(reader, batchPayload(r, true));
    const left = [
      enc.encode([1.5, [['BlockStored', [1n], null, [1, 2, 3, 4], 4, null, null, null, [['a'.repeat(64), 0]]]]]), // extra keys
      enc.encode([1.5, [['BlockStored', [1n], null, [1n, 2, 3, 4], 4]]]), // a token as u64
      enc.encode([1.5, [['BlockStored', [1.5], null, [1, 2, 3, 4], 4]]]), // a float hash
      enc.encode([1.5, [['BlockStored', [1n], null, [1, 2, 3, 4], 4.0 + 0.5]]]), // a float block size
      enc.encode([1.5, [['BlockRemoved', [1n], 'GPU\u00e9']]]), // not ASCII
      enc.encode([1.5, [{ type: 'BlockRemoved', block_hashes: [1n], medium: 'GPU' }], 2n]), // a u64 rank
      enc.encode([1.5, [{ type: 'BlockRemoved', block_hashes: [1n] }], -1]), // a negative rank
      enc.encode([1.5, [['AllBlocksCleared']], 0, 'extra']), // a fourth element
      enc.encode(['1.5', []]), // ts not a number
      enc.encode([1.5, ['BlockStored']]), // an event that is a string
      Uint8Array.from([...enc.encode([1.5, []]), 0]), // trailing bytes
      enc.encode([1.5, [['BlockRemoved', [new Uint8Array(0)]]]]), // empty bytes
      enc.encode([1.5, [{ type: 'BlockRemoved', block_hashes: [1n], note: ['ok', 'caf\u00e9'] }]]), // not ASCII, even ignored
      // A repeated key (the generic decoder keeps the last): {type, block_hashes, block_hashes}.
      Uint8Array.from([0x93, ...enc.encode(1.5), 0x91, 0x83, ...['type', 'BlockRemoved', 'block_hashes'].flatMap((x) => [...enc.encode(x)]),
        ...enc.encode([1n]), ...enc.encode('block_hashes'), ...enc.encode([2n]), 0xc0]),
    ];
    expect(generic(left[left.length - 1]!)).toMatchObject({ events: [{ kind: 'removed', blockHashes: [2n] }] });
    for (const payload of left) expect(reader.read(payload)).toBeNull();
  });

  it('reads ts in every number format as the generic path does', () => {
    const reader = new DirectBatchReader();
    const f32 = new DataView(new ArrayBuffer(4));
    f32.setFloat32(0, 1.7e9 + 0.25);
    const heads = [
      [0xca, ...new Uint8Array(f32.buffer)], [0xcb, ...enc.encode(1.5).subarray(1)], [0x05], [0xff], [0xcc, 200],
      [0xcd, 1, 2], [0xce, 1, 2, 3, 4], [0xcf, 0xff, 0, 0, 0, 0, 0, 0, 1], [0xd0, 0x80], [0xd1, 0x80, 0],
      [0xd2, 0x80, 0, 0, 0], [0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe],
    ];
    for (const head of heads) {
      const payload = Uint8Array.from([0x92, ...head, 0x90]);
      expect(check(reader, payload), head.join(',')).not.toBeNull();
    }
  });

  it('never throws on mutated batches, and agrees wherever it answers (20,000 mutations)', () => {
    const reader = new DirectBatchReader();
    const r = rng(9);
    let answered = 0;
    for (let i = 0; i < 20_000; i++) {
      const b = Uint8Array.from(batchPayload(r, r() < 0.3));
      const cut = r() < 0.2 ? Math.floor(r() * b.length) : b.length;
      const m = b.subarray(0, cut);
      for (let k = Math.floor(r() * 3); k >= 0 && m.length > 0; k--) m[Math.floor(r() * m.length)] = Math.floor(r() * 256);
      if (check(reader, m) !== null) answered++;
    }
    expect(answered).toBeGreaterThan(1_000);
  });
});
