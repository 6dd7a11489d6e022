/**
 * A few spare batch buffers, handed back by a shard thread after it applied their batch. A
 * fresh buffer per batch costs the main thread zeroing and first-touch page faults (~3 ms per
 * MB on the 2-core dev VM), more than encoding into it; JSON batches, several times the size of
 * their words, paid the most.
 *
 * Only a few come back: asking for every buffer measured slower, because in a burst the
 * surplus is then freed by the main thread's heap, large in a router, where the shard's small
 * heap frees it at little cost.
 */

/** Spares kept plus buffers on their way back, at most. */
const MAX_SPARES = 4;

export class BufferPool {
  private readonly spares: ArrayBuffer[] = [];
  private returning = 0;

  /** Buffers outside [minBytes, maxBytes] are not kept (one grown by a huge event). */
  constructor(private readonly minBytes: number, private readonly maxBytes: number) {}

  /** Whether the buffer being sent should come back (then pass it to `recycle`). */
  askBack(): boolean {
    if (this.spares.length + this.returning >= MAX_SPARES) return false;
    this.returning++;
    return true;
  }

  /** Takes back a buffer that `askBack` asked for. */
  recycle(buffer: ArrayBuffer): void {
    if (this.returning > 0) this.returning--;
    if (buffer.byteLength >= this.minBytes && buffer.byteLength <= this.maxBytes) this.spares.push(buffer);
  }

  /** A spare buffer, or null. */
  take(): ArrayBuffer | null {
    return this.spares.pop() ?? null;
  }
}
