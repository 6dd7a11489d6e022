/**
 * Hostile payloads: mutated and truncated real batches never escape `decodeBatch` as anything
 * but a `ZmqError`, and whatever decodes converts without throwing.
 */
import { Decoder, Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { EventConverter } from '../src/zmq/convert.js';
import { ZmqError } from '../src/zmq/errors.js';
import { decodeBatch } from '../src/zmq/wire.js';

const enc = new Encoder({ useBigInt64: true });
const dec = new Decoder({ useBigInt64: true });

const seed = [
  enc.encode([1.5, [{ type: 'BlockStored', block_hashes: [2n ** 64n - 1n, 5n], parent_block_hash: -7n, token_ids: [1, 2, 3, 4, 5, 6, 7, 8], block_size: 4, medium: 'GPU', lora_name: 'x', extra_keys: [['a'.repeat(64), 0], null], group_idx: 0, kv_cache_spec_kind: 'full_attention' }], 2]),
  enc.encode([1.5, [['BlockStored', [new Uint8Array(32).fill(3)], null, [9, 9, 9, 9], 4, null], ['BlockRemoved', [1n, -1n], 'CPU'], ['AllBlocksCleared']]]),
];

describe('decodeBatch on hostile bytes', () => {
  it('throws only ZmqError, and decoded events convert without throwing (4,000 mutations)', () => {
    let x = 12345;
    const rnd = (n: number): number => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) % n);
    const cv = new EventConverter(4);
    let decoded = 0;
    for (let i = 0; i < 4000; i++) {
      const base = seed[i % seed.length]!;
      const b = Uint8Array.from(base.subarray(0, rnd(4) === 0 ? rnd(base.length) : base.length));
      for (let k = rnd(4); k >= 0 && b.length > 0; k--) b[rnd(b.length)] = rnd(256);
      let batch;
      try {
        batch = decodeBatch(dec, b);
      } catch (err) {
        expect(err).toBeInstanceOf(ZmqError);
        expect((err as ZmqError).code).toBe('KVX_ZMQ_BAD_PAYLOAD');
        continue;
      }
      decoded++;
      for (const e of batch.events) {
        if (e instanceof ZmqError) expect(e.code).toBe('KVX_ZMQ_BAD_EVENT');
        else cv.convert(e);
      }
    }
    expect(decoded).toBeGreaterThan(100);
  });
});
