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
import { LeafHeap } from '../tree/leaf-heap.js';

export interface ReplayRoutingOptions {
  /** Selector temperature (default 0). */
  temperature?: number;
  /** Overlap score credit, 0..1 (default 1). */
  credit?: number;
}

/** A request's two lifecycle steps, as heap slots: request n's first token at 2n, its end at 2n + 1. */
const PREFILL_DONE = 0;

export class ReplayRouting {
  readonly router: KvRouter;
  readonly #index = new Map<bigint, number>();
  readonly #prefillMsPerToken: number;
  readonly #decodeMsPerToken: number;
  readonly #blockSize: number;
  #now = 0;
  /** Due steps by trace time (lazy LRU heap of the tree, reused as a plain timer heap). */
  readonly #due = new LeafHeap(1024);
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
    const due = this.#due;
    while (due.size > 0 && due.topStamp() <= this.#now) {
      const slot = due.topSlot();
      due.pop();
      // A request whose first token and end fall at the same time may end first: its mark is
      // then an unknown id, counted by ActiveSequences and harmless.
      const id = `r${slot >>> 1}`;
      if ((slot & 1) === PREFILL_DONE) this.router.markPrefillCompleted(id);
      else this.router.free(id);
    }
  }

  /** Routes a prepared prompt (its block hashes and token count); returns the decision and the worker's index. */
  route(local: BigUint64Array, tokenCount: number): { decision: RouteDecision; worker: number } {
    const decision = this.router.routeBlocks(local, tokenCount, { requestId: `r${this.#next++}` });
    return { decision, worker: this.#index.get(decision.workerId)! };
  }

  /** `route` on the tokens themselves (the router hashes them), for the benchmark of `route()`. */
  routeTokens(tokens: Uint32Array): { decision: RouteDecision; worker: number } {
    const decision = this.router.route(tokens, { requestId: `r${this.#next++}` });
    return { decision, worker: this.#index.get(decision.workerId)! };
  }

  /**
   * Schedules the first token and end of the request `route` returned last, given the blocks it
   * hit and its output length.
   */
  started(nowMs: number, blocks: number, hit: number, outputTokens: number): void {
    const n = this.#next - 1;
    const prefillDone = nowMs + (blocks - hit) * this.#blockSize * this.#prefillMsPerToken;
    this.#due.push(prefillDone, 2 * n + PREFILL_DONE);
    this.#due.push(prefillDone + outputTokens * this.#decodeMsPerToken, 2 * n + 1);
  }
}
