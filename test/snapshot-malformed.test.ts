import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError, SnapshotDecodeError } from '../src/errors.js';
import { mergeSnapshots } from '../src/protocol/snapshot-merge.js';
import { decodeSnapshot, iterateSnapshot } from '../src/protocol/snapshot-reader.js';
import { encodeSnapshot } from '../src/protocol/snapshot-writer.js';
import type { RouterEvent, SnapshotEncoding } from '../src/protocol/types.js';
import { xorshift32 as rng } from './support/rng.js';

const BINCODES = ['bincode', 'bincode-dp'] as const;


/** Every variant and option case: Stored root / with parent / two blocks, Removed, Cleared. */
const EVENTS: RouterEvent[] = [
  { workerId: 1n, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: [{ blockHash: 10n, tokensHash: 11n }] } } },
  {
    workerId: 2n ** 63n + 5n,
    event: {
      eventId: 1n,
      data: {
        type: 'stored',
        parentHash: 10n,
        blocks: [
          { blockHash: 2n ** 64n - 1n, tokensHash: 12n },
          { blockHash: 13n, tokensHash: 2n ** 53n + 1n },
        ],
      },
      dpRank: 2,
    },
  },
  { workerId: 3n, event: { eventId: 2n, data: { type: 'removed', blockHashes: [10n, 13n] } } },
  { workerId: 3n, event: { eventId: 3n, data: { type: 'cleared' }, dpRank: 1 } },
];

function u64le(v: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, v, true);
  return b;
}

function concat(...chunks: Uint8Array[]): Uint8Array {
  return Uint8Array.from(chunks.flatMap((c) => [...c]));
}

/** Runs `fn` and returns what it threw (undefined if it returned). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err;
  }
}

function codeOf(fn: () => unknown): string | undefined {
  const err = thrown(fn);
  expect(err).toBeInstanceOf(SnapshotDecodeError);
  return (err as SnapshotDecodeError).code;
}

describe('truncated bincode snapshots', () => {
  for (const encoding of BINCODES) {
    it(`${encoding}: every proper prefix fails with SnapshotTruncated or SnapshotBadCount`, () => {
      const bytes = encodeSnapshot(EVENTS, encoding);
      const codes = new Set<string | undefined>();
      for (let len = 0; len < bytes.length; len++) {
        const cut = bytes.subarray(0, len);
        codes.add(codeOf(() => decodeSnapshot(cut, encoding)));
        codes.add(codeOf(() => [...iterateSnapshot(cut, encoding)]));
        codes.add(codeOf(() => mergeSnapshots([cut], encoding)));
      }
      expect([...codes].sort()).toEqual([ErrorCode.SnapshotBadCount, ErrorCode.SnapshotTruncated].sort());
    });
  }

  it('names the field and the byte offset', () => {
    // Stored root (45 bytes at 8) then Cleared (20 bytes at 53): cut 2 bytes into its variant.
    const bytes = encodeSnapshot([EVENTS[0]!, EVENTS[3]!]);
    expect(() => decodeSnapshot(bytes.subarray(0, 71))).toThrow(
      'snapshot truncated at byte 69 reading data variant of event 1: need 4 bytes, 2 remain',
    );
  });
});

describe('trailing bytes', () => {
  for (const encoding of BINCODES) {
    it(`${encoding}: a byte after the last event is SnapshotTrailingBytes`, () => {
      const bytes = concat(encodeSnapshot(EVENTS, encoding), new Uint8Array([0]));
      expect(() => decodeSnapshot(bytes, encoding)).toThrow(
        expect.objectContaining({
          code: ErrorCode.SnapshotTrailingBytes,
          message: expect.stringContaining(`at byte ${bytes.length - 1}`),
        }),
      );
    });
  }

  it('a bincode-dp snapshot is not mistaken for plain bincode', () => {
    const bytes = encodeSnapshot(EVENTS, 'bincode-dp');
    expect(() => decodeSnapshot(bytes, 'bincode')).toThrow(SnapshotDecodeError);
  });
});

describe('counts that cannot fit', () => {
  const cases: [string, Uint8Array][] = [
    ['event count 2^40', concat(u64le(2n ** 40n), new Uint8Array(40))],
    ['event count 2^64-1', u64le(2n ** 64n - 1n)],
    // worker, id, Stored, None, block count 2^40
    ['block count 2^40', concat(u64le(1n), u64le(1n), u64le(0n), new Uint8Array([0, 0, 0, 0, 0]), u64le(2n ** 40n))],
    ['hash count 2^64-1', concat(u64le(1n), u64le(1n), u64le(0n), new Uint8Array([1, 0, 0, 0]), u64le(2n ** 64n - 1n))],
    // 3 blocks announced, 2 present
    ['block count 3 with 2 blocks', concat(u64le(1n), u64le(1n), u64le(0n), new Uint8Array(5), u64le(3n), new Uint8Array(32))],
  ];
  for (const [name, bytes] of cases) {
    // A decoder that believed the count would try to allocate for it and fail with a
    // RangeError (or run out of memory), not with this code: the code is the check.
    it(`${name} fails with SnapshotBadCount before allocating for the count`, () => {
      expect(codeOf(() => decodeSnapshot(bytes))).toBe(ErrorCode.SnapshotBadCount);
      expect(codeOf(() => mergeSnapshots([bytes], 'bincode'))).toBe(ErrorCode.SnapshotBadCount);
    });
  }

  it('the message gives the exact announced count and the offset', () => {
    const bytes = concat(u64le(1n), u64le(1n), u64le(0n), new Uint8Array([1, 0, 0, 0]), u64le(2n ** 64n - 1n));
    expect(() => decodeSnapshot(bytes)).toThrow(
      'snapshot bad count at byte 28 in block_hashes length of event 0: 18446744073709551615 elements',
    );
  });
});

describe('bad tags', () => {
  it('an unknown variant index is SnapshotBadTag at its offset', () => {
    for (const variant of [3, 0xffffffff]) {
      const bytes = concat(u64le(1n), u64le(1n), u64le(0n), new Uint8Array(new Uint32Array([variant]).buffer));
      expect(() => decodeSnapshot(bytes)).toThrow(
        expect.objectContaining({
          code: ErrorCode.SnapshotBadTag,
          message: `snapshot bad tag at byte 24 in data variant of event 0: ${variant}, expected 0 (Stored), 1 (Removed) or 2 (Cleared)`,
        }),
      );
    }
  });

  it('an option tag other than 0 or 1 is SnapshotBadTag at its offset', () => {
    const bytes = encodeSnapshot(EVENTS.slice(0, 1));
    bytes[28] = 2;
    expect(() => decodeSnapshot(bytes)).toThrow(
      expect.objectContaining({
        code: ErrorCode.SnapshotBadTag,
        message: 'snapshot bad tag at byte 28 in parent_hash option tag of event 0: 2, expected 0 or 1',
      }),
    );
  });
});

describe('fuzz: malformed input only ever throws KvIndexError', () => {
  /** Decodes and merges `bytes`; checks that failures are KvIndexErrors and that merge agrees. */
  function probe(bytes: Uint8Array, encoding: SnapshotEncoding): void {
    let decoded: RouterEvent[] | undefined;
    const decodeErr = thrown(() => (decoded = decodeSnapshot(bytes, encoding)));
    if (decodeErr !== undefined && !(decodeErr instanceof KvIndexError)) throw decodeErr;
    let merged: Uint8Array | undefined;
    const mergeErr = thrown(() => (merged = mergeSnapshots([bytes], encoding)));
    if (mergeErr !== undefined && !(mergeErr instanceof KvIndexError)) throw mergeErr;
    if (encoding !== 'jsonl') {
      // Same validation on both paths: both fail or both succeed, with the same events.
      expect(mergeErr === undefined).toBe(decodeErr === undefined);
      if (decoded !== undefined && merged !== undefined) {
        expect(decodeSnapshot(merged, encoding)).toEqual(
          decoded.map((e, i) => ({ workerId: e.workerId, event: { ...e.event, eventId: BigInt(i) } })),
        );
      }
    }
  }

  for (const encoding of BINCODES) {
    it(`${encoding}: 1000 random byte strings with plausible counts`, () => {
      const next = rng(encoding === 'bincode' ? 17 : 18);
      for (let i = 0; i < 1000; i++) {
        const bytes = new Uint8Array(next() % 96);
        for (let k = 0; k < bytes.length; k++) bytes[k] = next() & 0xff;
        // Small counts, variants and tags half the time, so the decoder gets past the header.
        if (next() % 2 === 0 && bytes.length >= 8) {
          bytes.fill(0, 0, 8);
          bytes[0] = next() % 4;
          if (bytes.length >= 29) {
            bytes.fill(0, 24, 28);
            bytes[24] = next() % 4;
            bytes[28] = next() % 3;
          }
        }
        probe(bytes, encoding);
      }
    });

    it(`${encoding}: 1000 mutations of a valid snapshot`, () => {
      const next = rng(encoding === 'bincode' ? 27 : 28);
      const valid = encodeSnapshot(EVENTS, encoding);
      for (let i = 0; i < 1000; i++) {
        const bytes = valid.slice(0, valid.length - (next() % 3 === 0 ? next() % 8 : 0));
        for (let m = 1 + (next() % 3); m > 0; m--) {
          const at = next() % bytes.length;
          bytes[at] = next() % 2 === 0 ? next() & 0xff : (bytes[at]! + 1) & 0xff;
        }
        probe(bytes, encoding);
      }
    });
  }

  it('jsonl: 1000 mutations of a valid snapshot', () => {
    const next = rng(37);
    const valid = encodeSnapshot(EVENTS, 'jsonl');
    const alphabet = new TextEncoder().encode('{}[]:,"0123456789-.eE \n\r\tnulltrue\\');
    for (let i = 0; i < 1000; i++) {
      const bytes = valid.slice(0, valid.length - (next() % 3 === 0 ? next() % 16 : 0));
      for (let m = 1 + (next() % 3); m > 0; m--) {
        bytes[next() % bytes.length] = next() % 4 === 0 ? next() & 0xff : alphabet[next() % alphabet.length]!;
      }
      probe(bytes, 'jsonl');
    }
  });
});

describe('bytes that are not a Uint8Array (untyped callers)', () => {
  it('is KVX_INVALID_OPTION for every encoding, before any event', () => {
    const jsonl = encodeSnapshot([{ workerId: 1n, event: { eventId: 0n, data: { type: 'cleared' } } }], 'jsonl');
    // An ArrayBuffer of a valid jsonl snapshot once decoded to no event at all.
    const inputs: unknown[] = [jsonl.buffer, new DataView(jsonl.buffer), 'text', null, [1, 2], Object.create(null)];
    for (const encoding of ['bincode', 'bincode-dp', 'jsonl'] as SnapshotEncoding[]) {
      for (const bytes of inputs) {
        for (const read of [() => decodeSnapshot(bytes as Uint8Array, encoding), () => iterateSnapshot(bytes as Uint8Array, encoding)]) {
          expect(read).toThrow(expect.objectContaining({ code: ErrorCode.InvalidOption }));
        }
      }
    }
    expect(decodeSnapshot(Buffer.from(jsonl), 'jsonl')).toHaveLength(1);
  });
});
