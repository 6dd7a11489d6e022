/**
 * The router's position in the stream and the rules that keep it exact across redeliveries,
 * server restarts and lost pulls, apart from any NATS client so they can be tested alone.
 *
 * - The position is the stream sequence of the last message handed to the indexer. A message
 *   at or below it is a duplicate (a redelivery after the server lost acks in a restart, or a
 *   redelivery after `ack_wait`) and is skipped, so no event is applied twice.
 * - A consumer numbers its deliveries 1, 2, 3, ...; a jump means deliveries were lost in transit
 *   (a pull answered after the client gave up on it, around a reconnect). With ack policy `all`
 *   the next ack would acknowledge them unseen, so the caller must recreate the consumer right
 *   after the position instead. A delivery number that goes back (a restarted server that lost
 *   the consumer's latest state) is accepted.
 * - A stream sequence that jumps means messages were deleted before they were read (purged by
 *   another router past this one, or expired by `max_age`): reported, not fatal. Not reported
 *   for the first message of a router that starts from the beginning of the stream, whose first
 *   sequence can be anything after a purge.
 */

export type Delivery =
  | { kind: 'new'; missedFrom: number; missedTo: number }
  | { kind: 'duplicate' }
  | { kind: 'lost'; expected: number };

export class DeliveryTracker {
  /** Stream sequence of the last message handed to the indexer (0: none yet). */
  position: number;
  private nextDelivery = 1;

  constructor(resumeAfter: number) {
    this.position = resumeAfter;
  }

  /** A consumer was (re)created: its delivery numbers start again at 1. */
  consumerCreated(): void {
    this.nextDelivery = 1;
  }

  /**
   * Classifies one delivery and, unless it is `lost`, advances the position. For `new`,
   * `missedFrom..missedTo` is the range of sequences skipped before it (empty when from > to).
   */
  classify(streamSeq: number, deliverySeq: number): Delivery {
    if (deliverySeq > this.nextDelivery) return { kind: 'lost', expected: this.nextDelivery };
    this.nextDelivery = deliverySeq + 1;
    if (streamSeq <= this.position) return { kind: 'duplicate' };
    const from = this.position + 1;
    const to = this.position > 0 ? streamSeq - 1 : 0;
    this.position = streamSeq;
    return { kind: 'new', missedFrom: from, missedTo: to };
  }
}
