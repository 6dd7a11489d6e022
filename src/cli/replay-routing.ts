/**
 * How `kvindex replay` routes a trace's requests: with the product's `KvRouter` over the
 * replay's indexer, so the hit rate it reports is what a user of the library gets. The router's
 * clock is the trace's time, and each request lives the way the simulated fleet serves it (the
 * shared workloads' model, as `RouterModel`): its first token comes after the prefill of its
 * missed tokens (`markPrefillCompleted`), its end after its decode (`free`). Decisions are
 * reproducible: the tie-breaks and softmax draws come from a random source seeded with the
 * simulation's seed.
 */
import type { ShardedIndexer } from '../indexer/sharded-indexer.js';
import { KvRouter, type RouteDecision } from '../router/kv-router.js';
import { seededRandom } from '../router/random.js';
import type { ClusterSimConfig } from '../trace/cluster-sim.js';

export interface ReplayRoutingOptions {
  /** Selector temperature (default 0). */
  temperature?: number;
  /** Overlap score credit, 0..1 (default 1). */
  credit?: number;
}

/** Lifecycle steps due at a trace time, in a min-heap of parallel arrays. */
const PREFILL_DONE = 0;
const FINISHED = 1;

export class ReplayRouting {
  readonly router: KvRouter;
  readonly #index = new Map<bigint, number>();
  readonly #prefillMsPerToken: number;
  readonly #decodeMsPerToken: number;
  readonly #blockSize: number;
  #now = 0;
  #at: number[] = [];
  #kind: number[] = [];
  #id: string[] = [];
  #next = 0;

  constructor(indexer: ShardedIndexer, sim: ClusterSimConfig, options: ReplayRoutingOptions = {}) {
    sim.workerIds.forEach((id, i) => this.#index.set(id, i));
    this.#prefillMsPerToken = 1000 / sim.prefillTokensPerSec;
    this.#decodeMsPerToken = sim.decodeMsPerToken;
    this.#blockSize = sim.blockSize;
    this.router = new KvRouter({
      indexer,
      blockSize: sim.blockSize,
      workers: sim.workerIds.map((workerId) => ({ workerId, dpRank: 0 })),
      ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
      ...(options.credit === undefined ? {} : { overlapScoreCredit: options.credit }),
      random: seededRandom(Number(sim.seed & 0x7fff_ffffn)),
      now: () => this.#now,
    });
  }

  /** Moves the clock to `nowMs`, reporting first tokens and ends due by then. */
  advance(nowMs: number): void {
    if (nowMs > this.#now) this.#now = nowMs;
    while (this.#at.length > 0 && this.#at[0]! <= this.#now) {
      const kind = this.#kind[0]!;
      const id = this.#id[0]!;
      this.#pop();
      if (kind === PREFILL_DONE) this.router.markPrefillCompleted(id);
      else this.router.free(id);
    }
  }

  /** Routes a prepared prompt (its block hashes and token count); returns the decision and the worker's index. */
  route(local: BigUint64Array, tokenCount: number): { decision: RouteDecision; worker: number } {
    const decision = this.router.routeBlocks(local, tokenCount, { requestId: `r${this.#next++}` });
    return { decision, worker: this.#index.get(decision.workerId)! };
  }

  /** Schedules the request's first token and end, given the blocks it hit and its output length. */
  started(requestId: string, nowMs: number, blocks: number, hit: number, outputTokens: number): void {
    const prefillDone = nowMs + (blocks - hit) * this.#blockSize * this.#prefillMsPerToken;
    this.#push(prefillDone, PREFILL_DONE, requestId);
    this.#push(prefillDone + outputTokens * this.#decodeMsPerToken, FINISHED, requestId);
  }

  #before(a: number, b: number): boolean {
    const x = this.#at[a]!;
    const y = this.#at[b]!;
    return x < y || (x === y && this.#kind[a]! < this.#kind[b]!);
  }

  #push(at: number, kind: number, id: string): void {
    this.#at.push(at);
    this.#kind.push(kind);
    this.#id.push(id);
    let i = this.#at.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.#before(i, p)) break;
      this.#swap(i, p);
      i = p;
    }
  }

  #pop(): void {
    const last = this.#at.length - 1;
    this.#swap(0, last);
    this.#at.pop();
    this.#kind.pop();
    this.#id.pop();
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= last) break;
      const c = l + 1 < last && this.#before(l + 1, l) ? l + 1 : l;
      if (!this.#before(c, i)) break;
      this.#swap(c, i);
      i = c;
    }
  }

  #swap(a: number, b: number): void {
    const t = this.#at[a]!;
    this.#at[a] = this.#at[b]!;
    this.#at[b] = t;
    const k = this.#kind[a]!;
    this.#kind[a] = this.#kind[b]!;
    this.#kind[b] = k;
    const s = this.#id[a]!;
    this.#id[a] = this.#id[b]!;
    this.#id[b] = s;
  }
}
