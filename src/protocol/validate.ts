/**
 * Structural validation of RouterEvent objects built by callers in code (parsed events are
 * already valid). Every u64 must be a bigint in 0..2^64-1: typed arrays would otherwise wrap a
 * negative or oversized value silently into some other, valid-looking hash.
 */
import { ErrorCode, EventParseError } from '../errors.js';
import { U64_MAX, type RouterEvent } from './types.js';

function fail(path: string, what: string): never {
  throw new EventParseError(ErrorCode.InvalidField, `${path}: ${what}`);
}

function u64(v: unknown, path: string): void {
  if (!isU64(v)) notU64(v, path);
}

function isU64(v: unknown): boolean {
  return typeof v === 'bigint' && v >= 0n && v <= U64_MAX;
}

function notU64(v: unknown, path: string): never {
  if (typeof v !== 'bigint') fail(path, `expected a u64 bigint, got ${typeof v}`);
  fail(path, `${v} is outside the u64 range`);
}

/** Throws an `EventParseError` (code KVX_INVALID_FIELD, naming the field) unless `ev` is valid. */
export function assertRouterEvent(ev: unknown): asserts ev is RouterEvent {
  if (typeof ev !== 'object' || ev === null) fail('event', 'expected an object');
  const e = ev as { workerId?: unknown; event?: unknown };
  u64(e.workerId, 'worker_id');
  const inner = e.event as { eventId?: unknown; data?: unknown; dpRank?: unknown } | null | undefined;
  if (typeof inner !== 'object' || inner === null) fail('event', 'expected an object');
  u64(inner.eventId, 'event.event_id');
  if (inner.dpRank !== undefined) {
    const d = inner.dpRank;
    if (typeof d !== 'number' || !Number.isInteger(d) || d < 0 || d > 0xffffffff) {
      fail('event.dp_rank', `expected a u32, got ${String(d)}`);
    }
  }
  const data = inner.data as { type?: unknown; parentHash?: unknown; blocks?: unknown; blockHashes?: unknown } | null;
  if (typeof data !== 'object' || data === null) fail('event.data', 'expected an object');
  switch (data.type) {
    case 'stored': {
      if (data.parentHash !== null) u64(data.parentHash, 'event.data.stored.parent_hash');
      if (!Array.isArray(data.blocks)) fail('event.data.stored.blocks', 'expected an array');
      const blocks = data.blocks as unknown[];
      for (let i = 0; i < blocks.length; i++) {
        const b = blocks[i] as { blockHash?: unknown; tokensHash?: unknown } | null;
        if (typeof b !== 'object' || b === null) fail(`event.data.stored.blocks[${i}]`, 'expected an object');
        // Paths are built only for a bad field: built for every block (two strings each), they
        // were 9 % of storing 4,096 workers' 48-block prompts, and most of its garbage.
        if (!isU64(b.blockHash)) notU64(b.blockHash, `event.data.stored.blocks[${i}].block_hash`);
        if (!isU64(b.tokensHash)) notU64(b.tokensHash, `event.data.stored.blocks[${i}].tokens_hash`);
      }
      return;
    }
    case 'removed': {
      if (!Array.isArray(data.blockHashes)) fail('event.data.removed.block_hashes', 'expected an array');
      const hashes = data.blockHashes as unknown[];
      for (let i = 0; i < hashes.length; i++) if (!isU64(hashes[i])) notU64(hashes[i], `event.data.removed.block_hashes[${i}]`);
      return;
    }
    case 'cleared':
      return;
    default:
      throw new EventParseError(ErrorCode.UnknownVariant, `event.data: unknown variant ${String(data.type)}`);
  }
}
