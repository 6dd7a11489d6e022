/**
 * Answers a NATS request without ever throwing out of a subscription. `Msg.respond` throws when
 * the reply exceeds the server's max_payload: thrown in an async answer it was an unhandled
 * rejection that ended `kvindex serve`, and thrown in a subscription callback it stopped the
 * client's reader, so every later request and stream event went unanswered while `/ready` stayed
 * 200 (a request of one 1 MiB number, fuzzed, whose error message quoted it). A reply that cannot
 * be sent is replaced by a short error naming why; if even that fails, it is logged.
 */
import type { Msg } from 'nats';
import type { Logger } from 'pino';
import { ErrorCode } from '../errors.js';
import { errorFields, reason } from './errors.js';

const encoder = new TextEncoder();

export function replySafely(m: Msg, reply: string, subject: string, logger: Logger | null): void {
  if (!m.reply) return;
  try {
    m.respond(encoder.encode(reply));
  } catch (err) {
    const why = reason(err);
    logger?.warn({ subject, bytes: reply.length, ...errorFields(err) }, 'reply not sent');
    try {
      m.respond(encoder.encode(JSON.stringify({ error: { code: ErrorCode.Internal, message: `reply of ${reply.length} bytes not sent: ${why}` } })));
    } catch {
      // The connection itself failed: the requester times out, the service goes on.
    }
  }
}
