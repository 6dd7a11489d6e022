/**
 * Reads a peer's `GET /dump` (responses.ts `dumpJson`, or a Dynamo standalone indexer's) into
 * sections a replica applies at start-up (peer-recovery.ts). Lossless: events go through the
 * RouterEvent reader of json-parse.ts over one byte scanner (no `JSON.parse`, which rounds every
 * hash and worker id above 2^53, and no generic value tree per event: a dump of 1M pairs is
 * ~100 MB of JSON). kvindex's extra keys (`model_name`, `tenant_id`, `listeners`) are read when
 * present; a Dynamo dump has none, and its sections then carry `listeners: null`.
 *
 * A section that reports an error instead of events (Dynamo answers `{"<key>":{"error":...}}`
 * for an index it could not dump) makes the whole dump unusable: a replica is never ready with
 * part of one. Every problem throws (`EventParseError` for the JSON, `DumpError` for the rest).
 */

import { KvIndexError, ErrorCode } from '../errors.js';
import { readRouterEvent } from '../protocol/json-parse.js';
import { JsonKey, JsonScanner, syntaxFirst } from '../protocol/json-scan.js';
import { parseJsonLossless, type JsonValue } from '../protocol/json-value.js';
import { clipText, showValue } from '../protocol/show-value.js';
import type { RouterEvent } from '../protocol/types.js';
import type { SourcePosition } from '../zmq/source.js';

/** One registered listener of a kvindex dump, with where its events stop. */
export interface DumpListener {
  readonly instanceId: bigint;
  readonly dpRank: number;
  readonly endpoint: string;
  readonly replayEndpoint: string | null;
  /** null: the peer knew no position for it (nothing applied yet, or a rank excluded). */
  readonly position: SourcePosition | null;
}

/** One rank's device tree in a binary dump (dump-binary.ts): a plain bincode snapshot. */
export interface RankSnapshot {
  readonly rank: number;
  /** A view into the dump's bytes, checked whole (`checkBincode`). */
  readonly bytes: Uint8Array;
  /** Its Stored blocks (pairs). */
  readonly blocks: number;
}

/** One (model, tenant) of a dump. */
export interface DumpSection {
  /** The dump's key, `<model>:<tenant>`. */
  readonly key: string;
  /** From kvindex's `model_name`/`tenant_id`; else the key split at its last ':'. */
  readonly modelName: string;
  readonly tenantId: string;
  readonly blockSize: number;
  /** The JSON dump's events ([] in a binary dump). */
  readonly events: RouterEvent[];
  /** A binary dump's trees, by rank; null in a JSON dump. */
  readonly trees: RankSnapshot[] | null;
  /** kvindex's `listeners`; null in a dump without them (a Dynamo peer's). */
  readonly listeners: DumpListener[] | null;
}

/** A dump that cannot be applied whole. */
export class DumpError extends KvIndexError {
  constructor(message: string) {
    super(ErrorCode.HttpBadRequest, message);
    this.name = 'DumpError';
  }
}

const K_BLOCK_SIZE = new JsonKey('block_size');
const K_EVENTS = new JsonKey('events');
const K_LISTENERS = new JsonKey('listeners');

const sc = new JsonScanner();

/** The value at the cursor, parsed generically (small values only: names, listeners). */
function value(s: JsonScanner): JsonValue {
  const start = s.pos;
  s.skipValue();
  return parseJsonLossless(s.b.subarray(start, s.pos));
}

/** Parses a whole dump (bytes of `GET /dump`). Throws `EventParseError` or `DumpError`. */
export function readDump(bytes: Uint8Array): DumpSection[] {
  sc.load(bytes);
  sc.prefix = '';
  try {
    const out: DumpSection[] = [];
    if (sc.openObject('', -1)) {
      do {
        sc.readKey();
        out.push(readSection(sc, sc.keyString()));
      } while (sc.nextMember());
    }
    sc.finish();
    return out;
  } catch (error) {
    throw syntaxFirst(sc, error);
  } finally {
    sc.release();
  }
}

function readSection(s: JsonScanner, key: string): DumpSection {
  // Field paths in messages name the key clipped: it comes from another process.
  const label = showValue(key);
  let blockSize: number | null = null;
  let events: RouterEvent[] | null = null;
  let listeners: DumpListener[] | null = null;
  const extra: Record<string, JsonValue> = {};
  if (s.openObject(label, -1)) {
    do {
      const k = s.readKeyOf(K_BLOCK_SIZE, K_EVENTS, K_LISTENERS);
      if (k === 0) blockSize = s.readUint(`${label}.block_size`, -1, 0xffff_ffff);
      else if (k === 1) {
        events = [];
        if (s.openArray(`${label}.events`, -1)) {
          do events.push(readRouterEvent(s));
          while (s.nextElement());
        }
      } else if (k === 2) listeners = readListeners(value(s), key);
      else extra[s.keyString()] = value(s);
    } while (s.nextMember());
  }
  if (extra.error !== undefined) throw new DumpError(`dump of ${showValue(key)} failed on the peer: ${clipText(typeof extra.error === 'string' ? extra.error : 'an error')}`);
  if (blockSize === null || blockSize === 0 || events === null) throw new DumpError(`dump of ${showValue(key)}: expected block_size >= 1 and events`);
  const named = typeof extra.model_name === 'string' && typeof extra.tenant_id === 'string';
  const cut = key.lastIndexOf(':');
  if (!named && cut < 0) throw new DumpError(`dump key ${showValue(key)} is not <model>:<tenant>`);
  return {
    key,
    modelName: named ? (extra.model_name as string) : key.slice(0, cut),
    tenantId: named ? (extra.tenant_id as string) : key.slice(cut + 1),
    blockSize,
    events,
    trees: null,
    listeners,
  };
}

const U64_MAX = (1n << 64n) - 1n;

function readListeners(v: JsonValue, key: string): DumpListener[] {
  if (!Array.isArray(v)) throw new DumpError(`dump of ${showValue(key)}: listeners is not an array`);
  return v.map((item, i) => {
    const o = item as Record<string, JsonValue> | null;
    const bad = (field: string): never => {
      throw new DumpError(`dump of ${showValue(key)}: listeners[${i}].${field} is missing or ill-typed`);
    };
    if (typeof o !== 'object' || o === null || Array.isArray(o)) return bad('');
    const id = o.instance_id;
    if (typeof id !== 'bigint' || id < 0n || id > U64_MAX) return bad('instance_id');
    const rank = o.dp_rank;
    if (typeof rank !== 'bigint' || rank < 0n || rank > 0xffff_ffffn) return bad('dp_rank');
    if (typeof o.endpoint !== 'string' || o.endpoint === '') return bad('endpoint');
    const replay = o.replay_endpoint ?? null;
    if (replay !== null && typeof replay !== 'string') return bad('replay_endpoint');
    const seq = o.seq ?? null;
    if (seq !== null && (typeof seq !== 'bigint' || seq < 0n || seq > U64_MAX)) return bad('seq');
    const ranks = o.ranks ?? [];
    if (!Array.isArray(ranks) || ranks.some((r) => typeof r !== 'bigint' || r < 0n || r > 0xffff_ffffn)) return bad('ranks');
    return {
      instanceId: id,
      dpRank: Number(rank),
      endpoint: o.endpoint,
      replayEndpoint: replay,
      position: seq === null ? null : { seq, ranks: ranks.map(Number) },
    };
  });
}
