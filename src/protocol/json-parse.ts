/**
 * Lossless parsers for Dynamo's serde JSON (reference §1.2, §1.4): `RouterEvent` and recorder
 * lines, over the byte scanner in `json-scan.ts` (general JSON values: `json-value.ts`). `JSON.parse` is never used on event text: it rounds integers above 2^53, and
 * real hashes and worker ids are almost all above that.
 *
 * Accepted input follows what `serde_json::from_slice::<RouterEvent>` accepts:
 * - any JSON whitespace and any key order; unknown keys with any value are skipped (`mm_extra_info`,
 *   future fields); keys written with escapes are decoded before matching, as serde does;
 * - a missing `parent_hash` means null; `dp_rank` is an optional u32 (absent -> no `dpRank`);
 * - `data` is externally tagged: `{"stored":{...}}`, `{"removed":{...}}`, `"cleared"`, and also
 *   `{"cleared":null}`, which serde_json accepts for a unit variant.
 * - Duplicate known fields are rejected with `InvalidField`, like serde's derive ("duplicate
 *   field"); duplicate unknown keys are skipped like any unknown key.
 * - `worker_id` must be a u64: a negative value is rejected with `InvalidField`. Dynamo's PR-era
 *   `WorkerId` was an i64, but it always held a positive etcd lease id and became `u64` in
 *   commit 7731b024 (2025-10-23); a negative id cannot come from a real producer, and accepting
 *   it would need a sign convention (two's complement?) the format never defined.
 * - Invalid UTF-8 inside skipped strings is not checked (serde_json's ignore path does not check
 *   it either); strings that are decoded (escaped keys, variant names, `parseJsonLossless`) must
 *   be valid UTF-8.
 *
 * Errors are `EventParseError`: `InvalidJson` when the input is not JSON at all (with the byte
 * offset; it wins over any field error, wherever it is), `InvalidField` for a missing, duplicate,
 * mistyped or out-of-range field in valid JSON (the message starts with its path, e.g.
 * `event.data.stored.blocks[3].block_hash`), `UnknownVariant` for an unknown `data` variant.
 */

import { ErrorCode, EventParseError } from '../errors.js';
import { CH_LBRACE, CH_QUOTE, CH_RBRACE, JsonKey, JsonScanner, syntaxFirst } from './json-scan.js';
import type { KvCacheEvent, KvCacheEventData, RouterEvent, StoredBlock } from './types.js';

/** A parsed recorder line (reference §1.4). */
export interface RecorderLine {
  /** Milliseconds since the recorder started (u64 on the wire, at most 2^53 here). */
  timestamp: number;
  event: RouterEvent;
}

const K_WORKER_ID = new JsonKey('worker_id');
const K_EVENT = new JsonKey('event');
const K_EVENT_ID = new JsonKey('event_id');
const K_DATA = new JsonKey('data');
const K_DP_RANK = new JsonKey('dp_rank');
const K_STORED = new JsonKey('stored');
const K_REMOVED = new JsonKey('removed');
const K_CLEARED = new JsonKey('cleared');
const K_PARENT_HASH = new JsonKey('parent_hash');
const K_BLOCKS = new JsonKey('blocks');
const K_BLOCK_HASH = new JsonKey('block_hash');
const K_TOKENS_HASH = new JsonKey('tokens_hash');
const K_BLOCK_HASHES = new JsonKey('block_hashes');
const K_TIMESTAMP = new JsonKey('timestamp');

// Field paths for messages; '#' is replaced by the array index.
const L_ROOT = '';
const L_WORKER_ID = 'worker_id';
const L_EVENT = 'event';
const L_EVENT_ID = 'event.event_id';
const L_DATA = 'event.data';
const L_DP_RANK = 'event.dp_rank';
const L_STORED = 'event.data.stored';
const L_PARENT_HASH = 'event.data.stored.parent_hash';
const L_BLOCKS = 'event.data.stored.blocks';
const L_BLOCK = 'event.data.stored.blocks[#]';
const L_BLOCK_HASH = 'event.data.stored.blocks[#].block_hash';
const L_TOKENS_HASH = 'event.data.stored.blocks[#].tokens_hash';
const L_REMOVED = 'event.data.removed';
const L_BLOCK_HASHES = 'event.data.removed.block_hashes';
const L_REMOVED_HASH = 'event.data.removed.block_hashes[#]';
const L_CLEARED = 'event.data.cleared';
const L_TIMESTAMP = 'timestamp';

const U32_MAX = 0xffff_ffff;
const TWO_53 = 2 ** 53;
const CH_N = 0x6e;

const sc: JsonScanner = new JsonScanner();

/*
 * Result objects are built by constructor functions whose prototype is Object.prototype, and
 * arrays by filling a reused scratch array and slicing it, instead of `{...}` and `[]` literals.
 * Literals carry V8 allocation sites: once a caller keeps many parsed events alive (a test, a
 * bench, a replay that pre-parses its trace), V8 pretenures those sites, every later result is
 * allocated in old space, the bigints it points to survive scavenges, and parsing runs 3-4x
 * slower for the rest of the process (2,000 events: 43 ms -> 130-200 ms; the same with
 * `--no-allocation-site-pretenuring` stays at 43 ms). Constructor calls and `slice` carry no
 * allocation site. The instances are still plain objects (`Object.getPrototypeOf(e) ===
 * Object.prototype`), so `toStrictEqual` against literals holds.
 */
const blockScratch: StoredBlock[] = [];
const hashScratch: bigint[] = [];

function plain<A extends unknown[], T>(init: (this: T, ...args: A) => void): new (...args: A) => T {
  init.prototype = Object.prototype;
  return init as unknown as new (...args: A) => T;
}

type Stored = Extract<KvCacheEventData, { type: 'stored' }>;
type Removed = Extract<KvCacheEventData, { type: 'removed' }>;
type Cleared = Extract<KvCacheEventData, { type: 'cleared' }>;

const PlainBlock = plain(function (this: StoredBlock, blockHash: bigint, tokensHash: bigint) {
  this.blockHash = blockHash;
  this.tokensHash = tokensHash;
});
const PlainStored = plain(function (this: Stored, parentHash: bigint | null, blocks: StoredBlock[]) {
  this.type = 'stored';
  this.parentHash = parentHash;
  this.blocks = blocks;
});
const PlainRemoved = plain(function (this: Removed, blockHashes: bigint[]) {
  this.type = 'removed';
  this.blockHashes = blockHashes;
});
const PlainCleared = plain(function (this: Cleared) {
  this.type = 'cleared';
});
const PlainKvEvent = plain(function (this: KvCacheEvent, eventId: bigint, data: KvCacheEventData) {
  this.eventId = eventId;
  this.data = data;
});
const PlainKvEventDp = plain(function (this: KvCacheEvent, eventId: bigint, data: KvCacheEventData, dpRank: number) {
  this.eventId = eventId;
  this.data = data;
  this.dpRank = dpRank;
});
const PlainRouterEvent = plain(function (this: RouterEvent, workerId: bigint, event: KvCacheEvent) {
  this.workerId = workerId;
  this.event = event;
});
const PlainRecorderLine = plain(function (this: RecorderLine, timestamp: number, event: RouterEvent) {
  this.timestamp = timestamp;
  this.event = event;
});

/**
 * Parses one `RouterEvent` in Dynamo's serde JSON, losslessly (all u64 fields as bigint).
 * `text` is a string or UTF-8 bytes (e.g. a NATS message payload).
 * Throws `EventParseError` (`InvalidJson`, `InvalidField`, `UnknownVariant`).
 */
export function parseRouterEvent(text: string | Uint8Array): RouterEvent {
  sc.load(text);
  sc.prefix = '';
  try {
    const event = readRouterEvent(sc);
    sc.finish();
    return event;
  } catch (error) {
    throw syntaxFirst(sc, error);
  } finally {
    sc.release();
  }
}

/**
 * Parses one line of Dynamo's KV recorder JSONL: `{"timestamp": ms, "event": <RouterEvent>}`.
 * The timestamp must be an unsigned integer of at most 2^53 ms. Unknown keys are skipped.
 * Throws `EventParseError`; paths inside the event start with `event.`.
 */
export function parseRecorderLine(text: string | Uint8Array): RecorderLine {
  sc.load(text);
  sc.prefix = '';
  try {
    let timestamp = -1;
    let event: RouterEvent | null = null;
    if (sc.openObject(L_ROOT, -1)) {
      do {
        const key = sc.readKeyOf(K_TIMESTAMP, K_EVENT, null);
        if (key === 0) {
          if (timestamp !== -1) sc.fieldError(L_TIMESTAMP, -1, 'duplicate field');
          timestamp = sc.readUint(L_TIMESTAMP, -1, TWO_53);
        } else if (key === 1) {
          if (event !== null) sc.fieldError(L_EVENT, -1, 'duplicate field');
          sc.prefix = 'event.';
          event = readRouterEvent(sc);
          sc.prefix = '';
        } else {
          sc.skipValue();
        }
      } while (sc.nextMember());
    }
    if (timestamp === -1) sc.fieldError(L_TIMESTAMP, -1, 'missing field');
    if (event === null) sc.fieldError(L_EVENT, -1, 'missing field');
    sc.finish();
    return new PlainRecorderLine(timestamp, event);
  } catch (error) {
    throw syntaxFirst(sc, error);
  } finally {
    sc.release();
  }
}

/**
 * Reads one `RouterEvent` at `s`'s cursor (for parsers of documents that hold events, such as
 * an indexer's `/dump`); throws `EventParseError` as `parseRouterEvent`.
 */
export function readRouterEvent(s: JsonScanner): RouterEvent {
  let workerId: bigint | null = null;
  let event: KvCacheEvent | null = null;
  if (s.openObject(L_ROOT, -1)) {
    do {
      const key = s.readKeyOf(K_WORKER_ID, K_EVENT, null);
      if (key === 0) {
        if (workerId !== null) s.fieldError(L_WORKER_ID, -1, 'duplicate field');
        workerId = s.readU64(L_WORKER_ID, -1);
      } else if (key === 1) {
        if (event !== null) s.fieldError(L_EVENT, -1, 'duplicate field');
        event = readKvEvent(s);
      } else {
        s.skipValue();
      }
    } while (s.nextMember());
  }
  if (workerId === null) return s.fieldError(L_WORKER_ID, -1, 'missing field');
  if (event === null) return s.fieldError(L_EVENT, -1, 'missing field');
  return new PlainRouterEvent(workerId, event);
}

function readKvEvent(s: JsonScanner): KvCacheEvent {
  let eventId: bigint | null = null;
  let data: KvCacheEventData | null = null;
  let dpRank = -1;
  if (s.openObject(L_EVENT, -1)) {
    do {
      const key = s.readKeyOf(K_EVENT_ID, K_DATA, K_DP_RANK);
      if (key === 0) {
        if (eventId !== null) s.fieldError(L_EVENT_ID, -1, 'duplicate field');
        eventId = s.readU64(L_EVENT_ID, -1);
      } else if (key === 1) {
        if (data !== null) s.fieldError(L_DATA, -1, 'duplicate field');
        data = readData(s);
      } else if (key === 2) {
        if (dpRank !== -1) s.fieldError(L_DP_RANK, -1, 'duplicate field');
        dpRank = s.readUint(L_DP_RANK, -1, U32_MAX);
      } else {
        s.skipValue();
      }
    } while (s.nextMember());
  }
  if (eventId === null) return s.fieldError(L_EVENT_ID, -1, 'missing field');
  if (data === null) return s.fieldError(L_DATA, -1, 'missing field');
  return dpRank === -1 ? new PlainKvEvent(eventId, data) : new PlainKvEventDp(eventId, data, dpRank);
}

function readData(s: JsonScanner): KvCacheEventData {
  const c = s.peek();
  if (c === CH_QUOTE) {
    const name = s.readString();
    if (name === K_CLEARED.text) return new PlainCleared();
    if (name === K_STORED.text || name === K_REMOVED.text) {
      return s.fieldError(L_DATA, -1, `variant "${name}" needs a payload: {"${name}":{...}}`);
    }
    return unknownVariant(s, name);
  }
  if (c !== CH_LBRACE) s.typeError(L_DATA, -1, 'a variant name or a single-key object');
  s.pos++;
  if (s.peek() === CH_RBRACE) s.fieldError(L_DATA, -1, 'expected a single-key object naming the variant, found {}');
  const key = s.readKeyOf(K_STORED, K_REMOVED, K_CLEARED);
  let data: KvCacheEventData;
  if (key === 0) {
    data = readStored(s);
  } else if (key === 1) {
    data = readRemoved(s);
  } else if (key === 2) {
    if (s.peek() !== CH_N) s.typeError(L_CLEARED, -1, 'null');
    s.scanLiteral();
    data = new PlainCleared();
  } else {
    return unknownVariant(s, s.keyString());
  }
  if (s.nextMember()) s.fieldError(L_DATA, -1, 'expected a single-key object naming the variant, found more keys');
  return data;
}

function unknownVariant(s: JsonScanner, name: string): never {
  throw new EventParseError(
    ErrorCode.UnknownVariant,
    `${s.path(L_DATA, -1)}: unknown variant ${JSON.stringify(name.slice(0, 40))}, expected "stored", "removed" or "cleared"`,
  );
}

function readStored(s: JsonScanner): KvCacheEventData {
  let parentHash: bigint | null = null;
  let seenParent = false;
  let blocks: StoredBlock[] | null = null;
  if (s.openObject(L_STORED, -1)) {
    do {
      const key = s.readKeyOf(K_PARENT_HASH, K_BLOCKS, null);
      if (key === 1) {
        if (blocks !== null) s.fieldError(L_BLOCKS, -1, 'duplicate field');
        const acc = blockScratch;
        let i = 0;
        if (s.openArray(L_BLOCKS, -1)) {
          do acc[i] = readBlock(s, i++);
          while (s.nextElement());
        }
        blocks = acc.slice(0, i);
        acc.length = 0;
      } else if (key === 0) {
        if (seenParent) s.fieldError(L_PARENT_HASH, -1, 'duplicate field');
        seenParent = true;
        if (s.peek() === CH_N) s.scanLiteral();
        else parentHash = s.readU64(L_PARENT_HASH, -1);
      } else {
        s.skipValue();
      }
    } while (s.nextMember());
  }
  if (blocks === null) return s.fieldError(L_BLOCKS, -1, 'missing field');
  return new PlainStored(parentHash, blocks);
}

function readBlock(s: JsonScanner, i: number): StoredBlock {
  let blockHash: bigint | null = null;
  let tokensHash: bigint | null = null;
  if (s.openObject(L_BLOCK, i)) {
    do {
      const key = s.readKeyOf(K_BLOCK_HASH, K_TOKENS_HASH, null);
      if (key === 0) {
        if (blockHash !== null) s.fieldError(L_BLOCK_HASH, i, 'duplicate field');
        blockHash = s.readU64(L_BLOCK_HASH, i);
      } else if (key === 1) {
        if (tokensHash !== null) s.fieldError(L_TOKENS_HASH, i, 'duplicate field');
        tokensHash = s.readU64(L_TOKENS_HASH, i);
      } else {
        s.skipValue();
      }
    } while (s.nextMember());
  }
  if (blockHash === null) return s.fieldError(L_BLOCK_HASH, i, 'missing field');
  if (tokensHash === null) return s.fieldError(L_TOKENS_HASH, i, 'missing field');
  return new PlainBlock(blockHash, tokensHash);
}

function readRemoved(s: JsonScanner): KvCacheEventData {
  let blockHashes: bigint[] | null = null;
  if (s.openObject(L_REMOVED, -1)) {
    do {
      if (s.readKeyOf(K_BLOCK_HASHES, null, null) === 0) {
        if (blockHashes !== null) s.fieldError(L_BLOCK_HASHES, -1, 'duplicate field');
        const acc = hashScratch;
        let i = 0;
        if (s.openArray(L_BLOCK_HASHES, -1)) {
          do acc[i] = s.readU64(L_REMOVED_HASH, i++);
          while (s.nextElement());
        }
        blockHashes = acc.slice(0, i);
        acc.length = 0;
      } else {
        s.skipValue();
      }
    } while (s.nextMember());
  }
  if (blockHashes === null) return s.fieldError(L_BLOCK_HASHES, -1, 'missing field');
  return new PlainRemoved(blockHashes);
}
