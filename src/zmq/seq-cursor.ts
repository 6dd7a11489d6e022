/**
 * Sequence tracking of one (worker, rank) publisher. vLLM numbers batches from 0 per publisher
 * process; the verdict for each received seq decides what the source does with it.
 */

export const SeqVerdict = {
  /** The first batch seen, or the next one: apply it. */
  Next: 'next',
  /** Batches are missing between the last one and this: replay them first. */
  Gap: 'gap',
  /** The seq went backwards: the engine restarted, its old blocks are gone. */
  Restart: 'restart',
} as const;

export type SeqVerdict = (typeof SeqVerdict)[keyof typeof SeqVerdict];

export class SeqCursor {
  /** The last seq applied, or -1n before the first. */
  last = -1n;

  /** What to do with `seq` (u64); does not move the cursor (see `advance`). */
  verdict(seq: bigint): SeqVerdict {
    if (this.last < 0n || seq === this.last + 1n) return SeqVerdict.Next;
    return seq > this.last ? SeqVerdict.Gap : SeqVerdict.Restart;
  }

  advance(seq: bigint): void {
    this.last = seq;
  }
}
