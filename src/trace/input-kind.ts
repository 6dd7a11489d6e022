/**
 * What a replay input holds, told from its first valid line:
 * - `trace`: a Mooncake request trace (`hash_ids`),
 * - `recorder`: Dynamo's KV recorder JSONL (`{"timestamp": ms, "event": <RouterEvent>}`),
 * - `events`: plain RouterEvent JSONL (`{"worker_id": .., "event": ..}`),
 * - `workload`: the replay workload format of shared/workloads (`{"op": ..}`).
 */
import { parseRecorderLine, parseRouterEvent } from '../protocol/json-parse.js';
import type { JsonValue } from '../protocol/json-value.js';
import type { RouterEvent } from '../protocol/types.js';

export const InputKind = {
  Trace: 'trace',
  Recorder: 'recorder',
  Events: 'events',
  Workload: 'workload',
} as const;

export type InputKind = (typeof InputKind)[keyof typeof InputKind];

/** Human name of each kind, for summaries. */
export const INPUT_KIND_NAMES: Record<InputKind, string> = {
  trace: 'Mooncake request trace',
  recorder: 'Dynamo KV recorder events',
  events: 'RouterEvent JSON lines',
  workload: 'replay workload',
};

/** The kind of a parsed line, or null when it matches none. */
export function detectInputKind(value: JsonValue): InputKind | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  if (typeof value['op'] === 'string') return InputKind.Workload;
  if ('hash_ids' in value) return InputKind.Trace;
  if ('event' in value && 'timestamp' in value) return InputKind.Recorder;
  if ('event' in value && 'worker_id' in value) return InputKind.Events;
  return null;
}

/** One line of a recorded event stream; `timestamp` (ms) is null for plain RouterEvents. */
export interface RecordedEvent {
  timestamp: number | null;
  event: RouterEvent;
}

/** Parses a `recorder` or `events` line. Throws `EventParseError` on a malformed one. */
export function parseRecordedLine(kind: 'recorder' | 'events', text: string): RecordedEvent {
  if (kind === InputKind.Recorder) {
    const r = parseRecorderLine(text);
    return { timestamp: r.timestamp, event: r.event };
  }
  return { timestamp: null, event: parseRouterEvent(text) };
}
