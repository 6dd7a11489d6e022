/**
 * A shard's tree reserves room for node records up to its whole id space: the 1 GiB that every
 * other shared array reserves stopped a shard at 67M nodes (a 2-shard 131M-pair fleet needs
 * 65.5M a shard, and the 1.25x growth step crossed the cap from ~54M). Growing to 4 GiB costs a
 * test too much memory, so this checks the reservation itself, and that the other arrays keep
 * theirs.
 */
import { describe, expect, it } from 'vitest';
import { MAX_SHARED_BYTES } from '../src/tree/array-store.js';
import { MAX_NODES, NODE_WORDS } from '../src/tree/node-store.js';
import { RadixTree } from '../src/tree/radix-tree.js';

describe('shared node records', () => {
  it('reserve the whole id space; parent and the rest keep 1 GiB', () => {
    const tree = new RadixTree({ shared: true });
    const recordBytes = (tree.nodes.node.buffer as SharedArrayBuffer).maxByteLength;
    expect(recordBytes).toBeGreaterThanOrEqual(MAX_NODES * NODE_WORDS * 4);
    expect((tree.nodes.parent.buffer as SharedArrayBuffer).maxByteLength).toBe(MAX_SHARED_BYTES);
    expect(MAX_NODES * 4).toBeLessThanOrEqual(MAX_SHARED_BYTES); // parent: 4 bytes a node fits
  });
});
