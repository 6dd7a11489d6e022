/**
 * Benchmark-only: kvindex's own dump walk written in Dynamo's snapshot format, one single-block
 * Stored event per (worker, block) pair, each naming the worker's hash on the tree parent (null
 * at a chain's start, as the chain itself does). It lets the tree bench separate what the
 * snapshot format gains (per-pair events against chains) from what the implementation gains
 * (kvindex's tree against the Map reference tree, in the same format). The events come in chain
 * order instead of Dynamo's breadth-first order: parents still come first, and the events and
 * bytes are the same set.
 */
import type { SnapshotWriter } from '../src/protocol/snapshot-writer.js';
import type { DumpSink } from '../src/tree/dump.js';

export class PerPairSink implements DumpSink {
  private workerLo = 0;
  private workerHi = 0;
  private hasParent = false;
  private parentLo = 0;
  private parentHi = 0;

  constructor(private readonly out: SnapshotWriter) {}

  beginStored(workerLo: number, workerHi: number, hasParent: boolean, parentLo: number, parentHi: number): void {
    this.workerLo = workerLo;
    this.workerHi = workerHi;
    this.hasParent = hasParent;
    this.parentLo = parentLo;
    this.parentHi = parentHi;
  }

  block(blockLo: number, blockHi: number, tokensLo: number, tokensHi: number): void {
    this.out.beginStored(this.workerLo, this.workerHi, this.hasParent, this.parentLo, this.parentHi);
    this.out.block(blockLo, blockHi, tokensLo, tokensHi);
    this.out.endStored();
    // The next block of the chain hangs below this one.
    this.hasParent = true;
    this.parentLo = blockLo;
    this.parentHi = blockHi;
  }

  endStored(): void {}
}
