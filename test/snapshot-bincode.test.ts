import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import { createSnapshotWriter, encodeSnapshot } from '../src/protocol/snapshot-writer.js';
import { decodeSnapshot, iterateSnapshot } from '../src/protocol/snapshot-reader.js';
import type { RouterEvent, SnapshotEncoding } from '../src/protocol/types.js';
import { xorshift32 as rng } from './support/rng.js';

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
const lo = (v: bigint): number => Number(v & 0xffffffffn);
const hi = (v: bigint): number => Number(v >> 32n);

function stored(worker: bigint, id: bigint, parent: bigint | null, blocks: [bigint, bigint][]): RouterEvent {
  return {
    workerId: worker,
    event: {
      eventId: id,
      data: {
        type: 'stored',
        parentHash: parent,
        blocks: blocks.map(([blockHash, tokensHash]) => ({ blockHash, tokensHash })),
      },
    },
  };
}

/** The two-event example of Dynamo reference §1.3, 106 bytes. */
const EXAMPLE_EVENTS: RouterEvent[] = [
  stored(0n, 0n, null, [[100n, 1n]]),
  stored(0n, 1n, 100n, [[200n, 2n]]),
];
const EXAMPLE_HEX = [
  '0200000000000000',
  '0000000000000000 0000000000000000 00000000 00',
  '0100000000000000 6400000000000000 0100000000000000',
  '0000000000000000 0100000000000000 00000000 01 6400000000000000',
  '0100000000000000 c800000000000000 0200000000000000',
]
  .join('')
  .replaceAll(' ', '');


const SPECIAL = [0n, 1n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n, 2n ** 64n - 1n];

function randomEvents(seed: number, count: number, withDp: boolean): RouterEvent[] {
  const next = rng(seed);
  const u64 = (): bigint =>
    next() % 4 === 0 ? SPECIAL[next() % SPECIAL.length]! : (BigInt(next()) << 32n) | BigInt(next());
  const events: RouterEvent[] = [];
  for (let i = 0; i < count; i++) {
    const kind = next() % 3;
    const eventId = u64();
    let data: RouterEvent['event']['data'];
    if (kind === 0) {
      const n = next() % 4;
      data = {
        type: 'stored',
        parentHash: next() % 2 === 0 ? null : u64(),
        blocks: Array.from({ length: n }, () => ({ blockHash: u64(), tokensHash: u64() })),
      };
    } else if (kind === 1) {
      data = { type: 'removed', blockHashes: Array.from({ length: next() % 4 }, u64) };
    } else {
      data = { type: 'cleared' };
    }
    const event: RouterEvent = { workerId: u64(), event: { eventId, data } };
    if (withDp) event.event.dpRank = next() % 3 === 0 ? 0xffffffff : next() % 8;
    events.push(event);
  }
  return events;
}

function renumbered(events: RouterEvent[]): RouterEvent[] {
  return events.map((e, i) => ({ workerId: e.workerId, event: { ...e.event, eventId: BigInt(i) } }));
}

describe('bincode snapshot layout', () => {
  it('encodeSnapshot reproduces the reference hex example byte for byte', () => {
    const bytes = encodeSnapshot(EXAMPLE_EVENTS, 'bincode');
    expect(bytes.length).toBe(106);
    expect(hex(bytes)).toBe(EXAMPLE_HEX);
  });

  it('the writer API reproduces the reference hex example byte for byte', () => {
    const w = createSnapshotWriter('bincode');
    w.beginStored(0, 0, false, 0, 0);
    w.block(100, 0, 1, 0);
    w.endStored();
    w.beginStored(0, 0, true, 100, 0);
    w.block(200, 0, 2, 0);
    w.endStored();
    expect(w.eventCount).toBe(2);
    expect(hex(w.finish())).toBe(EXAMPLE_HEX);
  });

  it('decodes the reference hex example', () => {
    expect(decodeSnapshot(Buffer.from(EXAMPLE_HEX, 'hex'))).toEqual(EXAMPLE_EVENTS);
  });

  it('writes a Removed payload as variant 1, u64 count, u64 hashes', () => {
    const bytes = encodeSnapshot([
      { workerId: 0n, event: { eventId: 0n, data: { type: 'removed', blockHashes: [100n, 200n] } } },
    ]);
    expect(hex(bytes.subarray(24))).toBe('01000000' + '0200000000000000' + '6400000000000000' + 'c800000000000000');
  });

  it('writes a Cleared payload as variant 2 alone', () => {
    const bytes = encodeSnapshot([{ workerId: 0n, event: { eventId: 0n, data: { type: 'cleared' } } }]);
    expect(bytes.length).toBe(28);
    expect(hex(bytes.subarray(24))).toBe('02000000');
  });

  it('writes worker_id and event_id as u64 little-endian', () => {
    const bytes = encodeSnapshot([
      { workerId: 0x694d99badb9f7c07n, event: { eventId: 0x0102030405060708n, data: { type: 'cleared' } } },
    ]);
    expect(hex(bytes)).toBe('0100000000000000' + '077c9fdbba994d69' + '0807060504030201' + '02000000');
  });

  it('bincode-dp appends dp_rank u32 LE after data in every event', () => {
    const first = stored(0n, 0n, null, [[100n, 1n]]);
    first.event.dpRank = 5;
    const events: RouterEvent[] = [first, { workerId: 0n, event: { eventId: 1n, data: { type: 'cleared' } } }];
    const bytes = encodeSnapshot(events, 'bincode-dp');
    expect(hex(bytes)).toBe(
      '0200000000000000' +
        '0000000000000000 0000000000000000 00000000 00 0100000000000000 6400000000000000 0100000000000000 05000000'.replaceAll(' ', '') +
        '0000000000000000 0100000000000000 02000000 00000000'.replaceAll(' ', ''),
    );
  });

  it('plain bincode drops dpRank and decodes without it', () => {
    const withDp = randomEvents(3, 20, true);
    const decoded = decodeSnapshot(encodeSnapshot(withDp, 'bincode'), 'bincode');
    for (const e of decoded) expect('dpRank' in e.event).toBe(false);
    const withoutDp = withDp.map((e) => ({
      workerId: e.workerId,
      event: { eventId: e.event.eventId, data: e.event.data },
    }));
    expect(decoded).toEqual(withoutDp);
  });

  it('bincode-dp decodes dpRank on every event, 0 when the event had none', () => {
    const events = randomEvents(4, 10, false);
    const decoded = decodeSnapshot(encodeSnapshot(events, 'bincode-dp'), 'bincode-dp');
    expect(decoded.map((e) => e.event.dpRank)).toEqual(events.map(() => 0));
  });
});

describe('bincode round trips', () => {
  for (const encoding of ['bincode', 'bincode-dp'] as const) {
    it(`${encoding}: decode(encode(events)) equals events, hashes up to 2^64-1`, () => {
      const events = randomEvents(7, 300, encoding === 'bincode-dp');
      expect(decodeSnapshot(encodeSnapshot(events, encoding), encoding)).toEqual(events);
    });

    it(`${encoding}: iterateSnapshot yields the decoded events`, () => {
      const bytes = encodeSnapshot(randomEvents(8, 50, true), encoding);
      expect([...iterateSnapshot(bytes, encoding)]).toEqual(decodeSnapshot(bytes, encoding));
    });
  }

  it('an empty snapshot is a zero count', () => {
    expect(hex(encodeSnapshot([]))).toBe('0000000000000000');
    expect(decodeSnapshot(new Uint8Array(8))).toEqual([]);
  });

  it('decodes from a Buffer view at a non-zero byteOffset', () => {
    const bytes = encodeSnapshot(EXAMPLE_EVENTS);
    const backing = new Uint8Array(bytes.length + 3);
    backing.set(bytes, 3);
    expect(decodeSnapshot(backing.subarray(3))).toEqual(EXAMPLE_EVENTS);
  });
});

/** Drives the low-level writer API with the events' fields, ids assigned by the writer. */
function writeLowLevel(encoding: SnapshotEncoding, events: RouterEvent[], initialBytes?: number): Uint8Array {
  const w = createSnapshotWriter(encoding, initialBytes);
  for (const { workerId, event } of events) {
    const d = event.data;
    if (d.type === 'stored') {
      const p = d.parentHash;
      w.beginStored(lo(workerId), hi(workerId), p !== null, p === null ? 0 : lo(p), p === null ? 0 : hi(p));
      for (const b of d.blocks) w.block(lo(b.blockHash), hi(b.blockHash), lo(b.tokensHash), hi(b.tokensHash));
      w.endStored(event.dpRank);
    } else if (d.type === 'removed') {
      w.removed(lo(workerId), hi(workerId), d.blockHashes, event.dpRank);
    } else {
      w.cleared(lo(workerId), hi(workerId), event.dpRank);
    }
  }
  return w.finish();
}

describe('SnapshotWriter', () => {
  for (const encoding of ['bincode', 'bincode-dp', 'jsonl'] as const) {
    it(`${encoding}: low-level calls give the bytes encodeSnapshot gives, ids from 0`, () => {
      const events = renumbered(randomEvents(11, 200, true));
      expect(hex(writeLowLevel(encoding, events))).toBe(hex(encodeSnapshot(events, encoding)));
    });

    it(`${encoding}: grows from the smallest buffer without corrupting earlier events`, () => {
      const events = renumbered(randomEvents(12, 500, true));
      expect(hex(writeLowLevel(encoding, events, 0))).toBe(hex(encodeSnapshot(events, encoding)));
    });
  }

  it('takes Removed hashes as a BigUint64Array', () => {
    const hashes = [5n, 2n ** 64n - 1n, 2n ** 53n + 1n];
    for (const encoding of ['bincode', 'bincode-dp', 'jsonl'] as const) {
      const a = createSnapshotWriter(encoding);
      a.removed(7, 1, BigUint64Array.from(hashes), 3);
      const b = createSnapshotWriter(encoding);
      b.removed(7, 1, hashes, 3);
      expect(hex(a.finish())).toBe(hex(b.finish()));
    }
  });

  it('writeEvent keeps the event id; beginStored numbers by eventCount', () => {
    const w = createSnapshotWriter('bincode');
    w.writeEvent({ workerId: 1n, event: { eventId: 42n, data: { type: 'cleared' } } });
    w.cleared(1, 0);
    expect(decodeSnapshot(w.finish()).map((e) => e.event.eventId)).toEqual([42n, 1n]);
  });

  it('finish resets the writer for the next dump', () => {
    const w = createSnapshotWriter('bincode');
    w.cleared(1, 0);
    w.finish();
    expect(w.eventCount).toBe(0);
    w.cleared(2, 0);
    expect(decodeSnapshot(w.finish())).toEqual([{ workerId: 2n, event: { eventId: 0n, data: { type: 'cleared' } } }]);
  });

  it('finish returns a tight copy whose buffer holds only the snapshot', () => {
    const w = createSnapshotWriter('bincode', 4096);
    w.cleared(1, 0);
    const bytes = w.finish();
    expect(bytes.byteOffset).toBe(0);
    expect(bytes.buffer.byteLength).toBe(28);
  });

  it('finishShared returns a view of the writer buffer that the next dump reuses', () => {
    const w = createSnapshotWriter('bincode');
    w.cleared(1, 0);
    const shared = w.finishShared();
    expect(decodeSnapshot(shared)).toEqual([{ workerId: 1n, event: { eventId: 0n, data: { type: 'cleared' } } }]);
    w.cleared(2, 0);
    w.finishShared();
    expect(shared[8]).toBe(2); // overwritten in place: the caller must be done with it
  });

  it('rejects out-of-order calls with InvalidOption', () => {
    const w = createSnapshotWriter('bincode');
    expect(() => w.block(1, 0, 1, 0)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
    expect(() => w.endStored()).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
    w.beginStored(1, 0, false, 0, 0);
    expect(() => w.beginStored(1, 0, false, 0, 0)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
    expect(() => w.cleared(1, 0)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
    expect(() => w.finish()).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
  });

  it('writeEvent rejects a hash outside u64 and leaves the writer unchanged', () => {
    for (const encoding of ['bincode', 'jsonl'] as const) {
      const w = createSnapshotWriter(encoding);
      w.cleared(1, 0);
      const bad = stored(1n, 0n, null, [[1n, 1n], [2n ** 64n, 1n]]);
      expect(() => w.writeEvent(bad)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidField }));
      expect(() => w.writeEvent({ workerId: -1n, event: { eventId: 0n, data: { type: 'cleared' } } })).toThrow(
        /workerId/,
      );
      expect(() =>
        w.writeEvent({ workerId: 1n, event: { eventId: 0n, data: { type: 'cleared' }, dpRank: 1.5 } }),
      ).toThrow(/dpRank/);
      w.cleared(2, 0);
      expect(decodeSnapshot(w.finish(), encoding)).toEqual([
        { workerId: 1n, event: { eventId: 0n, data: { type: 'cleared' } } },
        { workerId: 2n, event: { eventId: 1n, data: { type: 'cleared' } } },
      ]);
    }
  });

  it('rejects an unknown encoding or a bad initial size', () => {
    expect(() => createSnapshotWriter('xml' as SnapshotEncoding)).toThrow(KvIndexError);
    expect(() => createSnapshotWriter('bincode', -1)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
    expect(() => decodeSnapshot(new Uint8Array(8), 'xml' as SnapshotEncoding)).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidOption }),
    );
  });
});
