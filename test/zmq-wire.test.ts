/** vLLM's batch and event encodings decoded exactly, and malformed input as typed errors. */
import { Decoder, Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { decodeBatch, type EngineStored } from '../src/zmq/wire.js';
import { ZmqError } from '../src/zmq/errors.js';

const enc = new Encoder({ useBigInt64: true });
const dec = new Decoder({ useBigInt64: true });
// A real vLLM 0.26 hash above 2^53 (from a published batch).
const H = 15760518052499183552n;

const stored = (hashes: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  type: 'BlockStored',
  block_hashes: hashes,
  parent_block_hash: null,
  token_ids: [1, 2, 3, 4],
  block_size: 4,
  lora_id: null,
  medium: 'GPU',
  lora_name: null,
  extra_keys: [null],
  group_idx: 0,
  kv_cache_spec_kind: 'full_attention',
  ...extra,
});

describe('decodeBatch', () => {
  it('a default msgpack decoder rounds a real u64 hash; ours keeps it exact', () => {
    const bytes = enc.encode([1.5, [stored([H])], 0]);
    const rounded = ((new Decoder().decode(bytes) as unknown[])[1] as Array<{ block_hashes: number[] }>)[0]!.block_hashes[0]!;
    expect(BigInt(rounded)).not.toBe(H);
    const b = decodeBatch(dec, bytes);
    expect((b.events[0] as EngineStored).blockHashes).toEqual([H]);
    expect(b.dpRank).toBe(0);
    expect(b.ts).toBe(1.5);
  });

  it('reads the map and the array encodings of the same event alike, ignoring unknown keys and extra trailing fields', () => {
    const map = decodeBatch(dec, enc.encode([1, [stored([H, 7], { parent_block_hash: 5, future: { x: 1 } })]]));
    const arr = decodeBatch(dec, enc.encode([1, [['BlockStored', [H, 7], 5, [1, 2, 3, 4], 4, null, 'GPU', null, [null], 0, 'full_attention', null, 'extra']]]));
    expect(map.events).toEqual(arr.events);
    expect(map.dpRank).toBeNull();
    const e = map.events[0] as EngineStored;
    expect(e.parentHash).toBe(5n);
    expect([...e.tokenIds]).toEqual([1, 2, 3, 4]);
  });

  it('accepts SGLang-style positional stores that stop after lora_id', () => {
    const b = decodeBatch(dec, enc.encode([1, [['BlockStored', [1n], null, [9, 9], 2, null]]]));
    expect(b.events[0]).toMatchObject({ kind: 'stored', medium: null, specKind: null, blockSize: 2 });
  });

  it('reads signed i64 hashes as the same 64 bits and bytes as their last 8 bytes big-endian', () => {
    const digest = new Uint8Array(32).fill(0x11);
    new DataView(digest.buffer).setBigUint64(24, H);
    const b = decodeBatch(dec, enc.encode([1, [['BlockRemoved', [BigInt.asIntN(64, H), -1n, digest, 3], 'CPU']]]));
    expect(b.events[0]).toEqual({ kind: 'removed', blockHashes: [H, 2n ** 64n - 1n, H, 3n], medium: 'CPU', groupIdx: null });
  });

  it('decodes AllBlocksCleared in both encodings', () => {
    const b = decodeBatch(dec, enc.encode([1, [['AllBlocksCleared'], { type: 'AllBlocksCleared' }]]));
    expect(b.events).toEqual([{ kind: 'cleared' }, { kind: 'cleared' }]);
  });

  it('turns one malformed event into a BadEvent entry and keeps the others', () => {
    const b = decodeBatch(dec, enc.encode([1, [{ type: 'Nope' }, stored(['x']), stored([1n], { token_ids: [-1] }), stored([H])]]));
    expect(b.events.slice(0, 3).map((e) => (e as ZmqError).code)).toEqual(['KVX_ZMQ_BAD_EVENT', 'KVX_ZMQ_BAD_EVENT', 'KVX_ZMQ_BAD_EVENT']);
    expect((b.events[3] as EngineStored).blockHashes).toEqual([H]);
  });

  it.each([
    ['not msgpack', new Uint8Array([0xc1])],
    ['truncated msgpack', enc.encode([1, [stored([H])]]).subarray(0, 20)],
    ['not an array', enc.encode({ ts: 1 })],
    ['events not a list', enc.encode([1, 'x'])],
    ['a negative rank', enc.encode([1, [], -1])],
  ])('throws BadPayload for %s', (_what, bytes) => {
    expect(() => decodeBatch(dec, bytes)).toThrowError(expect.objectContaining({ code: 'KVX_ZMQ_BAD_PAYLOAD' }) as Error);
  });
});
