/**
 * The tree bench's per-pair format (bench/per-pair-sink.ts): kvindex's dump walk writing one
 * single-block Stored event per (worker, block) pair must hold the same events as the JS port
 * of Dynamo's per-pair dump on the Map reference tree, in the same number of snapshot bytes;
 * otherwise the bench's format / implementation split would compare different work.
 */
import { describe, expect, it } from 'vitest';
import { dumpPerPair, MapRadixTree } from '../bench/reference/map-radix-tree.js';
import { PerPairSink } from '../bench/per-pair-sink.js';
import { decodeSnapshot } from '../src/protocol/snapshot-reader.js';
import { createSnapshotWriter, encodeSnapshot } from '../src/protocol/snapshot-writer.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples } from './support/compare.js';
import { generateStream } from './support/event-gen.js';

describe('PerPairSink', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8])('writes the per-pair events of the Map reference dump (seed %i)', (seed) => {
    const stream = generateStream(seed, 300);
    const ours = new RadixTree();
    const ref = new MapRadixTree();
    for (const op of stream.ops) {
      if (op.kind === 'event') {
        ours.applyEvent(op.event);
        ref.applyEvent(op.event);
      } else if (op.kind === 'removeWorker') {
        ours.removeWorker(op.workerId);
        ref.removeWorker(op.workerId);
      }
    }
    const writer = createSnapshotWriter('bincode');
    ours.dumpTo(new PerPairSink(writer));
    const bytes = writer.finish();
    const events = decodeSnapshot(bytes, 'bincode');
    expect(ours.size).toBeGreaterThan(0);
    expect(events).toHaveLength(ours.size);
    for (const e of events) expect(e.event.data.type === 'stored' && e.event.data.blocks.length).toBe(1);
    const refEvents = dumpPerPair(ref);
    expect(dumpTuples(events)).toEqual(dumpTuples(refEvents));
    expect(bytes.length).toBe(encodeSnapshot(refEvents, 'bincode').length);
  });
});
