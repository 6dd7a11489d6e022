/**
 * What gateways sharing loads send each other over NATS (docs/gateway.md, "Loads shared between
 * gateways"):
 *
 * - `<base>.active_sequences_events`: Dynamo's `ActiveSequenceEvent` JSON (AddRequest, Free,
 *   MarkPrefillCompleted; Dynamo reference §5.1 names the subject constant
 *   `ACTIVE_SEQUENCES_SUBJECT`, engines-and-routers-2026.md §C2 the body), the same subject and
 *   body as `serve --route-workers` replicas use (src/nats/route-service.ts), so both kinds of
 *   routers share loads. `<base>` is `namespace-<ns>-component-<comp>` (src/nats/names.ts).
 * - `<base>.kvindex.loads_heartbeat`: kvindex's own (Dynamo's replica sync has none):
 *   `{"router_id":<u64>,"interval_ms":<n>,"in_flight":<n>,"state":"alive"|"leaving"}` every
 *   interval, and once with `"leaving"` on a clean stop. Receivers expire a silent peer's loads
 *   by it (peer-loads.ts).
 *
 * Decided where the reference is silent: a gateway's request ids (`gw-<n>`, per process) go on
 * the wire as `gw-<n>@<router id, hex>`, unique across gateways as Dynamo's UUIDs are, so a
 * router that keys requests by id alone (Dynamo's, `serve --route-workers`) never merges two
 * gateways' requests; `router_id` is a random u64 per process.
 */
import { ErrorCode, EventParseError } from '../errors.js';
import { parseJsonLossless, type JsonObject, type JsonValue } from '../protocol/json-value.js';
import { MAX_TIMER_MS } from '../protocol/time-limits.js';
import { kvNames } from '../nats/names.js';
import { routeSubjects } from '../nats/route-service.js';

/** The two subjects of one (namespace, component). */
export interface SharedLoadsSubjects {
  /** `<base>.active_sequences_events`. */
  sequences: string;
  /** `<base>.kvindex.loads_heartbeat`. */
  heartbeat: string;
}

/** Subjects for a Dynamo namespace and component (defaults `dynamo`, `backend`). */
export function sharedLoadsSubjects(namespace = 'dynamo', component = 'backend'): SharedLoadsSubjects {
  const names = kvNames(namespace, component);
  const sequences = routeSubjects(names).sequences;
  return { sequences, heartbeat: `${names.querySubject.slice(0, -'.find'.length)}.loads_heartbeat` };
}

/** A heartbeat. */
export interface LoadsHeartbeat {
  routerId: bigint;
  intervalMs: number;
  /** Requests the sender has in flight (for operators comparing views). */
  inFlight: number;
  leaving: boolean;
}

/** The heartbeat as JSON text. */
export function formatHeartbeat(h: LoadsHeartbeat): string {
  return `{"router_id":${h.routerId},"interval_ms":${h.intervalMs},"in_flight":${h.inFlight},"state":"${h.leaving ? 'leaving' : 'alive'}"}`;
}

const bad = (field: string, what: string): never => {
  throw new EventParseError(ErrorCode.InvalidField, `${field}: ${what}`);
};

function int(o: JsonObject, field: string, max: bigint): bigint {
  const v: JsonValue | undefined = o[field];
  if (typeof v !== 'bigint' || v < 0n || v > max) return bad(field, `expected an integer from 0 to ${max}`);
  return v;
}

/**
 * Reads a heartbeat. Throws `EventParseError`: `InvalidJson` for text that is not JSON,
 * `InvalidField` naming a missing or malformed field.
 */
export function parseHeartbeat(data: Uint8Array | string): LoadsHeartbeat {
  const v = parseJsonLossless(data);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad('heartbeat', 'expected an object');
  const o = v as JsonObject;
  const intervalMs = Number(int(o, 'interval_ms', BigInt(MAX_TIMER_MS)));
  if (intervalMs < 1) bad('interval_ms', 'expected at least 1');
  const state = o['state'] ?? 'alive';
  if (state !== 'alive' && state !== 'leaving') bad('state', 'expected "alive" or "leaving"');
  return {
    routerId: int(o, 'router_id', 0xffff_ffff_ffff_ffffn),
    intervalMs,
    inFlight: o['in_flight'] === undefined ? 0 : Number(int(o, 'in_flight', 0xffff_ffffn)),
    leaving: state === 'leaving',
  };
}

/** A gateway's request id as published: unique across gateways. */
export function wireRequestId(localId: string, routerIdHex: string): string {
  return `${localId}@${routerIdHex}`;
}
