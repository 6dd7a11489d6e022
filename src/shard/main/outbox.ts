/**
 * One ordered outbox per shard: the only way anything reaches a shard thread. Events of every
 * ingestion path (binary, JSON text, worker removal) are records of one batch, in call order;
 * a request (lookup, dump, stats, flush) first posts the batch queued before it, then itself.
 * The shard's port is FIFO, so each request is served against exactly the events queued before
 * it, whoever queued them and however they were given. Callers append at the moment of their
 * call; nothing here awaits.
 *
 * A batch is encoded into one scratch buffer per shard, reused, and copied into the shard's
 * batch ring (wire/batch-ring.ts) when posted; only when the ring has no room (the shard lags
 * past the backpressure mark, or the batch is larger than the ring) is the buffer itself
 * transferred, as before the ring. Both kinds are messages of the same port, so order holds.
 */
import type { RouterEvent } from '../../protocol/types.js';
import { BatchRingWriter, type BatchRingShape } from '../wire/batch-ring.js';
import { EventBatchWriter } from '../wire/event-batch.js';
import type { JsonEventEncoder } from '../wire/json-words.js';
import type { ShardRequest } from '../wire/messages.js';
import type { ThreadShard } from './thread-shard.js';

export class ShardOutbox {
  private readonly batch: EventBatchWriter;
  private readonly ring: BatchRingWriter;
  /** Events posted so far (u32, wrapping, as an int32: compared with the shard's applied count). */
  sentEvents = 0;

  /**
   * `onSend(events, bytes, ringBusy)` is told how many queued events each posted batch carried,
   * in how many bytes, and whether the ring is now more than half full (`ringBusy`).
   */
  constructor(
    private readonly thread: ThreadShard,
    private readonly batchWords: number,
    private readonly onSend: (events: number, bytes: number, ringBusy: boolean) => void,
    poolBytes: number,
    ring: BatchRingShape,
  ) {
    this.batch = new EventBatchWriter(undefined, poolBytes);
    this.ring = new BatchRingWriter(ring);
  }

  /**
   * More than half of the ring awaits the shard: the backpressure mark (threaded-engine.ts).
   * With a caller that stops at it, the batch posted before it stops and the one the microtask
   * posts still fit (each at most `batchWords` plus one event; a default ring holds 8).
   */
  get ringBusy(): boolean {
    return this.ring.used > this.ring.capacity >>> 1;
  }

  /** At most a quarter of the ring awaits the shard: the mark's other side. */
  get ringCalm(): boolean {
    return this.ring.used <= this.ring.capacity >>> 2;
  }

  /** Events queued and not yet posted. */
  get queued(): number {
    return this.batch.events;
  }

  /** Whether the queued batch has reached its size and should be posted now. */
  get full(): boolean {
    return this.batch.words >= this.batchWords;
  }

  /** Validates and queues an event; a malformed one throws `EventParseError` and queues nothing. */
  pushEvent(event: RouterEvent): void {
    this.batch.push(event);
  }

  /**
   * Queues an event given as canonical serde JSON without an event object (json-words.ts);
   * returns false, queuing nothing, when the text is not in that layout.
   */
  pushCanonicalJson(encoder: JsonEventEncoder, text: Uint8Array): boolean {
    return encoder.encode(text, 0, text.length, this.batch);
  }

  /** Queues a Stored event given as checked words (see `EventBatchWriter.pushStoredWords`). */
  pushStoredWords(wLo: number, wHi: number, hasParent: boolean, pLo: number, pHi: number, words: Uint32Array, n: number): void {
    this.batch.pushStoredWords(wLo, wHi, hasParent, pLo, pHi, words, n);
  }

  /** Queues an event's JSON text for the shard to parse; `tag` comes back with a rejection. */
  pushJson(text: Uint8Array, tag: number): void {
    this.batch.pushJson(text, tag);
  }

  pushRemoveWorker(workerId: bigint): void {
    this.batch.pushRemoveWorker(workerId);
  }

  /** Posts the queued batch, if any: in the ring if it has room, else in a transferred buffer. */
  send(): void {
    const batch = this.batch;
    const events = batch.events;
    if (events === 0) return;
    const n = batch.words;
    const ring = this.ring;
    const at = ring.place(n);
    this.sentEvents = (this.sentEvents + events) | 0;
    if (at >= 0) {
      batch.copyInto(ring.words, at);
      this.onSend(events, 4 * n, this.ringBusy);
      this.thread.sendRing(at, n, ring.end, events);
      return;
    }
    const words = batch.take();
    this.onSend(events, words.buffer.byteLength, this.ringBusy);
    this.thread.sendEvents(words, events, batch.askBack(words));
  }

  /** Posts the queued batch, then a lookup written into `slot` of the reply board. */
  lookupInSlot(slot: number): void {
    this.send();
    this.thread.lookupInSlot(slot);
  }

  /** Posts the queued batch, then the request; resolves with the shard's reply. */
  request<T>(req: ShardRequest, transfer?: ArrayBuffer[]): Promise<T> {
    if (this.thread.failed !== null) return Promise.reject(this.thread.failed);
    this.send();
    return this.thread.request<T>(req, transfer);
  }

  /** Takes back a batch buffer the shard handed back. */
  recycle(buffer: ArrayBuffer): void {
    this.batch.recycle(buffer);
  }
}
