/**
 * Routing decisions over NATS request/reply (`kvindex serve --route-workers`): a `KvRouter` on
 * the served indexer answers `route`, `mark_prefill` and `free`, and router replicas share their
 * in-flight requests as `ActiveSequenceEvent` JSON on a core subject. Not part of Dynamo's wire
 * protocol (its routers are in-process); the event body is Dynamo's shape.
 *
 * Subjects, `<base>` = `namespace-<ns>-component-<comp>` (`routeSubjects(kvNames(...))`):
 *   <base>.kvindex.route          {"tokens":[...], "request_id"?, "lora_name"?, "block_mm_hashes"?,
 *                                  "overrides"?: {"overlap_score_credit", "prefill_load_scale",
 *                                  "router_temperature"}, "expected_output_tokens"?}
 *     reply {"request_id":"..","worker_id":"<u64>","dp_rank":0,"overlap_blocks":3,
 *            "required_blocks":4,"candidates":[{"worker_id":"<u64>","dp_rank":0},...],
 *            "costs":[...],"overlaps":[...]}
 *   <base>.kvindex.mark_prefill   {"request_id":".."} -> {"ok":true} (false: unknown id)
 *   <base>.kvindex.free           {"request_id":".."} -> {"ok":true}
 *   <base>.active_sequences_events  ActiveSequenceEvent JSON, published by every replica,
 *                                  applied by the others (own `router_id` skipped)
 * Requests are served in the queue group `kvindex-router`: any replica may take any request,
 * since every replica knows every request in flight. Worker ids are decimal strings in replies
 * (above 2^53); requests are read losslessly. Errors reply
 * {"error":{"code":"KVX_...","message":".."}}.
 */
import { randomBytes } from 'node:crypto';
import type { Msg, NatsConnection, Subscription } from 'nats';
import type { Logger } from 'pino';
import type { JsonObject, JsonValue } from '../protocol/json-value.js';
import { showValue } from '../protocol/show-value.js';
import { KvRouter, type KvRouterOptions, type RouteOptions } from '../router/kv-router.js';
import { formatRouteDecision } from '../router/decision-json.js';
import { formatActiveSequenceEvent, parseActiveSequenceEvent } from '../router/sequence-event.js';
import type { RouteOverrides } from '../router/select-worker.js';
import { NatsError, NatsErrorCode, errorFields, errorReply } from './errors.js';
import type { KvNames } from './names.js';
import { replySafely } from './reply.js';
import { parseFindRequest, parseRequestObject } from './query.js';

/** The subjects of the routing service for one (namespace, component). */
export interface RouteSubjects {
  route: string;
  markPrefill: string;
  free: string;
  sequences: string;
}

export function routeSubjects(names: KvNames): RouteSubjects {
  const kv = names.querySubject.slice(0, -'.find'.length); // <base>.kvindex
  const base = kv.slice(0, -'.kvindex'.length);
  return { route: `${kv}.route`, markPrefill: `${kv}.mark_prefill`, free: `${kv}.free`, sequences: `${base}.active_sequences_events` };
}

export interface RouteServiceOptions extends Omit<KvRouterOptions, 'onSequenceEvent' | 'routerId'> {
  /** u64 id of this replica (default: random). */
  routerId?: bigint;
  /** Queue group (default 'kvindex-router'); null: every instance answers. */
  queue?: string | null;
  logger?: Logger;
}

const encoder = new TextEncoder();

function bad(message: string): never {
  throw new NatsError(NatsErrorCode.BadQuery, message);
}


function requestIdOf(o: JsonObject, required: boolean): string | undefined {
  const id = o['request_id'];
  if (id === undefined && !required) return undefined;
  if (typeof id !== 'string') bad('request_id: expected a string');
  return id as string;
}

function numberOf(v: JsonValue | undefined, field: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'number') return v;
  return bad(`${field}: expected a number`);
}

function overridesOf(v: JsonValue | undefined): RouteOverrides | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'object' || Array.isArray(v)) bad('overrides: expected an object');
  const o = v as JsonObject;
  const out: RouteOverrides = {};
  const credit = numberOf(o['overlap_score_credit'], 'overrides.overlap_score_credit');
  const scale = numberOf(o['prefill_load_scale'], 'overrides.prefill_load_scale');
  const temperature = numberOf(o['router_temperature'], 'overrides.router_temperature');
  if (credit !== undefined) out.overlapScoreCredit = credit;
  if (scale !== undefined) out.prefillLoadScale = scale;
  if (temperature !== undefined) out.temperature = temperature;
  return out;
}


/** Serves routing decisions for one indexer; `router` is the replica's `KvRouter`. */
export class KvRouteService {
  readonly router: KvRouter;
  readonly subjects: RouteSubjects;
  readonly routerId: bigint;
  readonly #subs: Subscription[];
  #served = 0;
  #failed = 0;
  #replicaEvents = 0;
  #unshared = 0;

  private constructor(router: KvRouter, subjects: RouteSubjects, routerId: bigint, subs: Subscription[]) {
    this.router = router;
    this.subjects = subjects;
    this.routerId = routerId;
    this.#subs = subs;
  }

  /** Creates the router and subscribes (see the file comment for the subjects and bodies). */
  static start(nc: NatsConnection, names: KvNames, options: RouteServiceOptions): KvRouteService {
    const { queue: q, logger: log, routerId: id, ...routerOptions } = options;
    const subjects = routeSubjects(names);
    const routerId = id ?? randomBytes(8).readBigUInt64LE(0);
    const logger = log ?? null;
    const queue = q === undefined ? 'kvindex-router' : q;
    let service: KvRouteService | null = null;
    const router = new KvRouter({
      ...routerOptions,
      routerId,
      onSequenceEvent: (e) => {
        // Sharing is best effort, as core NATS delivery is (at most once): a publish that fails
        // (an add whose block list exceeds max_payload, a closed connection) is counted and
        // logged, and the decision still answered. It used to throw out of `route` after the
        // request was recorded: the client got KVX_INTERNAL for a request held in flight, and
        // its retry was refused as a duplicate (found by fuzzing).
        try {
          nc.publish(subjects.sequences, encoder.encode(formatActiveSequenceEvent(e)));
        } catch (err) {
          if (service !== null) service.#unshared++;
          logger?.warn({ subject: subjects.sequences, requestId: showValue(e.requestId), type: e.data.type, ...errorFields(err) }, 'active sequence event not shared with replicas');
        }
      },
    });
    const serve = (subject: string, handle: (o: JsonObject, body: Uint8Array) => string): Subscription =>
      nc.subscribe(subject, {
        ...(queue === null ? {} : { queue }),
        callback: (err, m: Msg) => {
          if (err !== null) {
            logger?.warn({ subject, ...errorFields(err) }, 'route subscription failed');
            return;
          }
          let reply: string;
          try {
            reply = handle(parseRequestObject(m.data), m.data);
            if (service !== null) service.#served++;
          } catch (e) {
            reply = errorReply(e);
            if (service !== null) service.#failed++;
            logger?.debug({ subject, ...errorFields(e) }, 'route request failed');
          }
          replySafely(m, reply, subject, logger);
        },
      });
    const subs = [
      serve(subjects.route, (o, body) => {
        // The tokens and block identity options are a findMatches body (other keys ignored).
        const find = parseFindRequest(body);
        if (!('tokens' in find)) bad('tokens: expected an array (route takes tokens, not hashes)');
        const options: RouteOptions = { loraName: find.loraName, blockMmHashes: find.blockMmHashes, overrides: overridesOf(o['overrides']) };
        const requestId = requestIdOf(o, false);
        if (requestId !== undefined) options.requestId = requestId;
        const out = numberOf(o['expected_output_tokens'], 'expected_output_tokens');
        if (out !== undefined) options.expectedOutputTokens = out;
        return formatRouteDecision(router.route(find.tokens, options));
      }),
      serve(subjects.markPrefill, (o) => `{"ok":${router.markPrefillCompleted(requestIdOf(o, true)!)}}`),
      serve(subjects.free, (o) => `{"ok":${router.free(requestIdOf(o, true)!)}}`),
      // Replica events: every instance, no queue group.
      nc.subscribe(subjects.sequences, {
        callback: (err, m) => {
          if (err !== null) return;
          try {
            const e = parseActiveSequenceEvent(m.data);
            if (e.routerId === routerId) return;
            router.sequences.applyEvent(e);
            if (service !== null) service.#replicaEvents++;
          } catch (e) {
            logger?.warn({ subject: subjects.sequences, ...errorFields(e) }, 'bad active sequence event');
          }
        },
      }),
    ];
    service = new KvRouteService(router, subjects, routerId, subs);
    logger?.debug({ subjects, queue }, 'route service started');
    return service;
  }

  /**
   * Requests answered, failed, replica events applied, and this replica's own events that could
   * not be published (`unshared`: its replicas do not know those changes).
   */
  stats(): { served: number; failed: number; replicaEvents: number; unshared: number } {
    return { served: this.#served, failed: this.#failed, replicaEvents: this.#replicaEvents, unshared: this.#unshared };
  }

  /** Stops taking requests and replica events. */
  async stop(): Promise<void> {
    await Promise.all(this.#subs.map((s) => (s.isClosed() ? undefined : s.drain().catch(() => undefined))));
  }
}
