/**
 * Writes `RouterEvent`s as Dynamo's serde JSON, byte-identical to `serde_json::to_vec`
 * (compact, fields in declaration order, reference §1.2):
 * `{"worker_id":W,"event":{"event_id":N,"data":D}}` with `,"dp_rank":R` after `data` only when
 * `dpRank` is present, and D one of `{"stored":{"parent_hash":P|null,"blocks":[{"block_hash":S,"tokens_hash":L},...]}}`,
 * `{"removed":{"block_hashes":[S,...]}}`, `"cleared"`.
 *
 * Built by string concatenation of `bigint.toString()`: V8 keeps the pieces as a rope and
 * flattens once. On 2,000 workload events (14.4 MB, ~450k u64s) concatenation took 35.7 ms
 * and pushing the same pieces into an array and joining 41 ms (min of 20 passes, flattened).
 * `bigint.toString()` costs ~90 ns per random u64 on the same machine, so most of the
 * writer's time is the digit conversion itself.
 */

import { ErrorCode, EventParseError } from '../errors.js';
import type { RouterEvent } from './types.js';
import { U64_MAX } from './types.js';
import { formatU64 } from './u64-text.js';
import type { RecorderLine } from './json-parse.js';
import { showValue } from './show-value.js';

const U32_MAX = 0xffff_ffff;

/**
 * Formats `event` as serde_json compact output. Throws `EventParseError` with `InvalidField`
 * (naming the field path) when a hash or id is not a bigint in [0, 2^64-1], `dpRank` is not an
 * integer in [0, 2^32-1], or `data.type` is unknown.
 */
export function formatRouterEvent(event: RouterEvent): string {
  const inner = event.event;
  const data = inner.data;
  let s = '{"worker_id":' + u64(event.workerId, 'worker_id', -1) + ',"event":{"event_id":' + u64(inner.eventId, 'event.event_id', -1) + ',"data":';
  switch (data.type) {
    case 'stored': {
      const parent = data.parentHash;
      s += '{"stored":{"parent_hash":' + (parent === null ? 'null' : u64(parent, 'event.data.stored.parent_hash', -1)) + ',"blocks":[';
      const blocks = data.blocks;
      for (let i = 0; i < blocks.length; i++) {
        const block = blocks[i]!;
        s +=
          (i === 0 ? '{"block_hash":' : ',{"block_hash":') +
          u64(block.blockHash, 'event.data.stored.blocks[#].block_hash', i) +
          ',"tokens_hash":' +
          u64(block.tokensHash, 'event.data.stored.blocks[#].tokens_hash', i) +
          '}';
      }
      s += ']}}';
      break;
    }
    case 'removed': {
      s += '{"removed":{"block_hashes":[';
      const hashes = data.blockHashes;
      for (let i = 0; i < hashes.length; i++) {
        s += (i === 0 ? '' : ',') + u64(hashes[i]!, 'event.data.removed.block_hashes[#]', i);
      }
      s += ']}}';
      break;
    }
    case 'cleared':
      s += '"cleared"';
      break;
    default:
      return invalid('event.data.type', `unknown variant ${JSON.stringify((data as { type: unknown }).type)}`);
  }
  const dpRank = inner.dpRank;
  if (dpRank !== undefined) {
    if (!Number.isInteger(dpRank) || dpRank < 0 || dpRank > U32_MAX) {
      invalid('event.dp_rank', `expected an integer in [0, 2^32-1], found ${String(dpRank)}`);
    }
    s += ',"dp_rank":' + dpRank;
  }
  return s + '}}';
}

/**
 * Formats a recorder line `{"timestamp":T,"event":E}` as Dynamo's recorder writes it (serde_json
 * compact). `timestamp` must be an integer in [0, 2^53]. Errors as `formatRouterEvent`.
 */
export function formatRecorderLine(line: RecorderLine): string {
  const t = line.timestamp;
  if (!Number.isInteger(t) || t < 0 || t > 2 ** 53) {
    invalid('timestamp', `expected an integer in [0, 2^53], found ${showValue(t)}`);
  }
  return '{"timestamp":' + t + ',"event":' + formatRouterEvent(line.event) + '}';
}

function u64(value: bigint, label: string, index: number): string {
  if (typeof value === 'bigint' && value >= 0n && value <= U64_MAX) return value.toString();
  // Slow path: formatU64 re-checks and throws InvalidField naming the field.
  return formatU64(value, index >= 0 ? label.replace('#', String(index)) : label);
}

function invalid(path: string, problem: string): never {
  throw new EventParseError(ErrorCode.InvalidField, `${path}: ${problem}`);
}
