/**
 * The routing policy of the simulated fleet, like Dynamo's KvScheduler cost: pick the worker
 * with the smallest `(blocks to compute) + (blocks of the requests in flight on it)`, ties to the
 * least recently chosen worker, then the lowest index. A request stays in flight from its trace
 * timestamp for the prefill of its missed tokens plus its decode, as the shared workloads'
 * generator models it (shared/workloads/README.md, "How the workload is simulated").
 */

export interface RouterModelOptions {
  workers: number;
  /** Prefill speed, tokens per second (default 20,000). */
  prefillTokensPerSec: number;
  /** Decode time per output token, milliseconds (default 20). */
  decodeMsPerToken: number;
}

export class RouterModel {
  private readonly active: Float64Array;
  private readonly lastChosen: Float64Array;
  private readonly prefillMsPerToken: number;
  private readonly decodeMsPerToken: number;
  // In-flight requests as a min-heap on their end time, in parallel arrays.
  private endAt: number[] = [];
  private endWorker: number[] = [];
  private endBlocks: number[] = [];
  private chosen = 0;

  constructor(options: RouterModelOptions) {
    this.active = new Float64Array(options.workers);
    this.lastChosen = new Float64Array(options.workers).fill(-1);
    this.prefillMsPerToken = 1000 / options.prefillTokensPerSec;
    this.decodeMsPerToken = options.decodeMsPerToken;
  }

  /** Blocks in flight on worker `w` (after the last `advance`). */
  activeBlocks(w: number): number {
    return this.active[w]!;
  }

  /** Retires the requests that finished at or before `nowMs`. */
  advance(nowMs: number): void {
    while (this.endAt.length > 0 && this.endAt[0]! <= nowMs) {
      this.active[this.endWorker[0]!]! -= this.endBlocks[0]!;
      this.popEnd();
    }
  }

  /**
   * The worker for a request of `blocks` blocks, given each worker's overlap in `hits`
   * (indexed like the workers).
   */
  choose(blocks: number, hits: ArrayLike<number>): number {
    let best = 0;
    let bestCost = Infinity;
    for (let w = 0; w < this.active.length; w++) {
      const cost = blocks - hits[w]! + this.active[w]!;
      if (cost < bestCost || (cost === bestCost && this.lastChosen[w]! < this.lastChosen[best]!)) {
        best = w;
        bestCost = cost;
      }
    }
    this.lastChosen[best] = this.chosen++;
    return best;
  }

  /**
   * Puts a request on worker `w` from `nowMs`: `blocks` count as active until its prefill of
   * `missedTokens` and its decode of `outputTokens` are done.
   */
  start(w: number, nowMs: number, blocks: number, missedTokens: number, outputTokens: number): void {
    this.active[w]! += blocks;
    this.pushEnd(nowMs + missedTokens * this.prefillMsPerToken + outputTokens * this.decodeMsPerToken, w, blocks);
  }

  private pushEnd(at: number, w: number, blocks: number): void {
    const a = this.endAt;
    let i = a.length;
    a.push(at);
    this.endWorker.push(w);
    this.endBlocks.push(blocks);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (a[p]! <= at) break;
      this.move(p, i);
      i = p;
    }
    a[i] = at;
    this.endWorker[i] = w;
    this.endBlocks[i] = blocks;
  }

  private popEnd(): void {
    const a = this.endAt;
    const last = a.length - 1;
    const at = a[last]!;
    const w = this.endWorker[last]!;
    const b = this.endBlocks[last]!;
    a.pop();
    this.endWorker.pop();
    this.endBlocks.pop();
    if (last === 0) return;
    let i = 0;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= last) break;
      if (c + 1 < last && a[c + 1]! < a[c]!) c++;
      if (a[c]! >= at) break;
      this.move(c, i);
      i = c;
    }
    a[i] = at;
    this.endWorker[i] = w;
    this.endBlocks[i] = b;
  }

  private move(from: number, to: number): void {
    this.endAt[to] = this.endAt[from]!;
    this.endWorker[to] = this.endWorker[from]!;
    this.endBlocks[to] = this.endBlocks[from]!;
  }
}
