import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../src/errors.js';
import { mergeSnapshots } from '../src/protocol/snapshot-merge.js';
import { decodeSnapshot } from '../src/protocol/snapshot-reader.js';
import { createSnapshotWriter, encodeSnapshot } from '../src/protocol/snapshot-writer.js';
import type { RouterEvent, SnapshotEncoding } from '../src/protocol/types.js';
import { xorshift32 as rng } from './support/rng.js';

const ENCODINGS: SnapshotEncoding[] = ['bincode', 'bincode-dp', 'jsonl'];
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');


/** Events as a shard dumps them: ids 0..count-1, big worker ids and hashes, all variants. */
function shardEvents(seed: number, count: number): RouterEvent[] {
  const next = rng(seed);
  const u64 = (): bigint => (BigInt(next()) << 32n) | BigInt(next());
  return Array.from({ length: count }, (_, i): RouterEvent => {
    const kind = next() % 3;
    const data: RouterEvent['event']['data'] =
      kind === 0
        ? { type: 'stored', parentHash: next() % 2 ? null : u64(), blocks: [{ blockHash: u64(), tokensHash: u64() }] }
        : kind === 1
          ? { type: 'removed', blockHashes: [u64(), u64()] }
          : { type: 'cleared' };
    return { workerId: u64(), event: { eventId: BigInt(i), data, dpRank: next() % 4 } };
  });
}

function renumbered(events: RouterEvent[]): RouterEvent[] {
  return events.map((e, i) => ({ workerId: e.workerId, event: { ...e.event, eventId: BigInt(i) } }));
}

describe('mergeSnapshots', () => {
  for (const encoding of ENCODINGS) {
    it(`${encoding}: zero parts give the empty snapshot`, () => {
      expect(hex(mergeSnapshots([], encoding))).toBe(hex(encodeSnapshot([], encoding)));
    });

    it(`${encoding}: one part is returned with the same bytes`, () => {
      const events = shardEvents(1, 25);
      const part = encodeSnapshot(events, encoding);
      expect(hex(mergeSnapshots([part], encoding))).toBe(hex(part));
    });

    it(`${encoding}: three parts equal the concatenated events renumbered 0..n-1`, () => {
      // 12 events in the middle part push merged ids from 1 to 2 digits in JSON lines.
      const shards = [shardEvents(2, 7), shardEvents(3, 12), shardEvents(4, 9)];
      const merged = mergeSnapshots(
        shards.map((s) => encodeSnapshot(s, encoding)),
        encoding,
      );
      expect(hex(merged)).toBe(hex(encodeSnapshot(renumbered(shards.flat()), encoding)));
    });

    it(`${encoding}: empty parts in between contribute nothing`, () => {
      const a = shardEvents(5, 3);
      const b = shardEvents(6, 4);
      const empty = encodeSnapshot([], encoding);
      const merged = mergeSnapshots([empty, encodeSnapshot(a, encoding), empty, encodeSnapshot(b, encoding)], encoding);
      expect(hex(merged)).toBe(hex(encodeSnapshot(renumbered([...a, ...b]), encoding)));
    });
  }

  it('merges writer dumps whose ids each restart at 0', () => {
    const parts = [0, 1].map((shard) => {
      const w = createSnapshotWriter('bincode');
      for (let i = 0; i < 3; i++) {
        w.beginStored(shard, 0, false, 0, 0);
        w.block(i, 0, i, 0);
        w.endStored();
      }
      return w.finish();
    });
    const events = decodeSnapshot(mergeSnapshots(parts, 'bincode'));
    expect(events.map((e) => e.event.eventId)).toEqual([0n, 1n, 2n, 3n, 4n, 5n]);
    expect(events.map((e) => e.workerId)).toEqual([0n, 0n, 0n, 1n, 1n, 1n]);
  });
});

describe('mergeSnapshots on malformed parts', () => {
  it('bincode: names the part of a truncated snapshot', () => {
    // The last event is a Cleared one, so the cut lands in its variant index (a cut inside a
    // block list would be reported as a count that does not fit: SnapshotBadCount).
    const good = encodeSnapshot([...shardEvents(7, 3), { workerId: 1n, event: { eventId: 3n, data: { type: 'cleared' } } }]);
    expect(() => mergeSnapshots([good, good.subarray(0, good.length - 1)], 'bincode')).toThrow(
      expect.objectContaining({ code: ErrorCode.SnapshotTruncated, message: expect.stringMatching(/^part 1: /) }),
    );
    expect(() => mergeSnapshots([good.subarray(0, 5)], 'bincode')).toThrow(
      expect.objectContaining({ code: ErrorCode.SnapshotTruncated }),
    );
  });

  it('bincode: rejects trailing bytes and bad tags in a part', () => {
    const good = encodeSnapshot([{ workerId: 1n, event: { eventId: 0n, data: { type: 'cleared' } } }]);
    const trailing = new Uint8Array(good.length + 1);
    trailing.set(good);
    expect(() => mergeSnapshots([trailing], 'bincode')).toThrow(
      expect.objectContaining({ code: ErrorCode.SnapshotTrailingBytes }),
    );
    const badTag = good.slice();
    badTag[24] = 9;
    expect(() => mergeSnapshots([good, badTag], 'bincode')).toThrow(
      expect.objectContaining({ code: ErrorCode.SnapshotBadTag, message: expect.stringMatching(/part 1.*byte 24/) }),
    );
  });

  it('bincode-dp: a plain bincode part does not pass as bincode-dp', () => {
    const plain = encodeSnapshot(shardEvents(8, 4), 'bincode');
    expect(() => mergeSnapshots([plain], 'bincode-dp')).toThrow(/snapshot/);
  });

  it('jsonl: rejects a part without its final newline', () => {
    const good = encodeSnapshot(shardEvents(9, 2), 'jsonl');
    expect(() => mergeSnapshots([good, good.subarray(0, good.length - 1)], 'jsonl')).toThrow(
      expect.objectContaining({ code: ErrorCode.SnapshotTruncated, message: expect.stringMatching(/^part 1: /) }),
    );
  });

  it('jsonl: rejects a line that does not start the way the writer writes', () => {
    const cases = [
      '{"event":{"event_id":0,"data":"cleared"},"worker_id":1}\n',
      '{"worker_id":1,"event":{"event_id":"0","data":"cleared"}}\n',
      '{"worker_id": 1,"event":{"event_id":0,"data":"cleared"}}\n',
      '{"worker_id":1,"event":{"event_id":123456789012345678901,"data":"cleared"}}\n',
      '\n',
    ];
    for (const line of cases) {
      expect(() => mergeSnapshots([new TextEncoder().encode(line)], 'jsonl'), line).toThrow(
        expect.objectContaining({ code: ErrorCode.InvalidJson, message: expect.stringMatching(/part 0: .*line 1/) }),
      );
    }
  });

  it('rejects an unknown encoding', () => {
    expect(() => mergeSnapshots([], 'xml' as SnapshotEncoding)).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidOption }),
    );
  });
});
