/**
 * Spare batch buffers, handed back by a shard thread after it applied their batch. Only
 * batches the shard's batch ring could not take (batch-ring.ts) travel in buffers of their own
 * now; steady ingestion that honours `needsDrain` sends none. A fresh
 * buffer per batch costs the main thread zeroing and first-touch page faults (~3 ms per MB on
 * the 2-core dev VM), more than encoding into it; JSON batches, several times the size of their
 * words, paid the most.
 *
 * Every buffer comes back while the spares and the buffers on their way back fit `maxPoolBytes`
 * (the indexer's in-flight bound, split over the shards). A buffer a shard kept was freed when
 * the shard's isolate collected it, into the calling thread's malloc heap, where the
 * high-water of a burst stays in the RSS: with four spares (the rule before), ingesting the
 * 16.4M-pair fleet left 172 MB there (10.5 bytes a pair), the 1M-pair one 76 MB. Bounded, no
 * surplus is freed by the main thread's heap (what made asking for every buffer slower once).
 */
export class BufferPool {
  private readonly spares: ArrayBuffer[] = [];
  /** Bytes of the spares and of the buffers asked back and not yet recycled. */
  private held = 0;

  /**
   * Buffers outside [minBytes, maxBytes] are not kept (one grown by a huge event); at most
   * `maxPoolBytes` are held.
   */
  constructor(private readonly minBytes: number, private readonly maxBytes: number, private readonly maxPoolBytes: number) {}

  /** Whether the buffer of `bytes` being sent should come back (then pass it to `recycle`). */
  askBack(bytes: number): boolean {
    if (bytes < this.minBytes || bytes > this.maxBytes || this.held + bytes > this.maxPoolBytes) return false;
    this.held += bytes;
    return true;
  }

  /** Takes back a buffer that `askBack` asked for. */
  recycle(buffer: ArrayBuffer): void {
    this.spares.push(buffer);
  }

  /** A spare buffer, or null. */
  take(): ArrayBuffer | null {
    const b = this.spares.pop();
    if (b === undefined) return null;
    this.held -= b.byteLength;
    return b;
  }
}
