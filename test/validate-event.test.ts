/**
 * Structural validation of caller-built events (src/protocol/validate.ts): a bad u64 anywhere
 * in a Stored or Removed event throws KVX_INVALID_FIELD naming the field, and valid events pass.
 */
import { describe, expect, it } from 'vitest';
import { assertRouterEvent } from '../src/protocol/validate.js';

const stored = (blocks: unknown[]): unknown => ({ workerId: 1n, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks } } });
const removed = (blockHashes: unknown[]): unknown => ({ workerId: 1n, event: { eventId: 0n, data: { type: 'removed', blockHashes } } });
const ok = { blockHash: 5n, tokensHash: (1n << 64n) - 1n };

describe('assertRouterEvent', () => {
  it('accepts u64 bigints at both ends of the range', () => {
    expect(() => assertRouterEvent(stored([ok, { blockHash: 0n, tokensHash: 0n }]))).not.toThrow();
    expect(() => assertRouterEvent(removed([0n, (1n << 64n) - 1n]))).not.toThrow();
  });

  it.each([
    [stored([ok, { blockHash: -1n, tokensHash: 1n }]), 'event.data.stored.blocks[1].block_hash', 'outside the u64 range'],
    [stored([{ blockHash: 1n, tokensHash: 1n << 64n }]), 'event.data.stored.blocks[0].tokens_hash', 'outside the u64 range'],
    [stored([ok, ok, { blockHash: 3, tokensHash: 1n }]), 'event.data.stored.blocks[2].block_hash', 'got number'],
    [removed([1n, 2n, -5n]), 'event.data.removed.block_hashes[2]', 'outside the u64 range'],
    [removed(['7']), 'event.data.removed.block_hashes[0]', 'got string'],
  ])('names the bad field (%#)', (ev, path, what) => {
    expect(() => assertRouterEvent(ev)).toThrow(expect.objectContaining({ code: 'KVX_INVALID_FIELD', message: expect.stringContaining(path) as unknown }));
    expect(() => assertRouterEvent(ev)).toThrow(expect.objectContaining({ message: expect.stringContaining(what) as unknown }));
  });
});
