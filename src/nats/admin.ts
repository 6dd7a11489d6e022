/**
 * The admin request/reply service of `kvindex serve`: removes a worker's blocks from the index
 * now (a worker known to be gone, before any idle timeout). Every instance answers (no queue
 * group): each router holds its own index, so a request published to the subject reaches all of
 * them, and a requester that wants every reply uses a request-many (or counts on each router
 * applying it).
 *
 * Request: `{"worker_id": <u64>}` (a JSON integer or a decimal string; read losslessly).
 * Reply: `{"removed":"<id>","known":true|false}`, or `{"error":{"code","message"}}`.
 */

import type { NatsConnection, Subscription } from 'nats';
import type { Logger } from 'pino';
import { parseJsonLossless, type JsonObject } from '../protocol/json-value.js';
import { U64_MAX } from '../protocol/types.js';
import { NatsError, NatsErrorCode, errorFields, errorReply, reason } from './errors.js';

const encoder = new TextEncoder();

/** The worker id of a request body; throws `NatsError` `KVX_NATS_BAD_QUERY`. */
export function parseRemoveWorkerRequest(body: Uint8Array): bigint {
  let v;
  try {
    v = parseJsonLossless(body);
  } catch (err) {
    throw new NatsError(NatsErrorCode.BadQuery, `request is not JSON: ${reason(err)}`);
  }
  const id = typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as JsonObject)['worker_id'] : undefined;
  let w: bigint | null = null;
  if (typeof id === 'bigint') w = id;
  else if (typeof id === 'string' && /^[0-9]{1,20}$/.test(id)) w = BigInt(id);
  if (w === null || w < 0n || w > U64_MAX) throw new NatsError(NatsErrorCode.BadQuery, 'worker_id: expected a u64 as a JSON integer or decimal string');
  return w;
}

/** Subscribes on `subject`; `remove` does the work (KvEventSubscriber.removeWorker). */
export function startAdminService(nc: NatsConnection, subject: string, remove: (workerId: bigint) => Promise<boolean>, logger?: Logger): Subscription {
  return nc.subscribe(subject, {
    callback: (err, m) => {
      if (err !== null) {
        logger?.warn({ subject, ...errorFields(err) }, 'admin subscription failed');
        return;
      }
      void (async () => {
        let reply: string;
        try {
          const id = parseRemoveWorkerRequest(m.data);
          const known = await remove(id);
          reply = `{"removed":"${id.toString()}","known":${known}}`;
        } catch (e) {
          reply = errorReply(e);
        }
        if (m.reply) m.respond(encoder.encode(reply));
      })();
    },
  });
}
