/**
 * One simulated engine with continuous batching, shaped like vLLM's V1 scheduler as Dynamo's
 * mocker models it (engine-params.ts holds the numbers and their sources):
 * - a step schedules at most `tokenBudget` tokens: first the running requests in admission
 *   order (one token per decoding request, the next chunk of a prefilling one), then waiting
 *   requests, first come first served, while budget, `maxRunning` and KV room last;
 * - a request is admitted when its blocks fit the KV pool (engine-kv.ts): its cached prefix is
 *   pinned, and the rest of its prompt, its partial last block and its whole output are
 *   reserved up front (TensorRT-LLM's GUARANTEED_NO_EVICT policy, which Dynamo's mocker also
 *   models), so a running request is never preempted; a request the whole pool cannot hold is
 *   rejected;
 * - only the uncached prompt tokens are prefilled (at least one: the last token is recomputed
 *   for its logits), in chunks over steps; the step that completes a prefill emits the first
 *   output token and stores the prompt's full blocks in the cache (the Stored event), each later
 *   step one more token, until the trace's output length.
 *
 * The engine runs a step in two calls: `begin(now)` schedules it (admissions, evictions) and
 * returns its end time; `end()` applies it at that time. Deterministic: no randomness, no clock.
 */
import { type EngineParams, stepMs } from './engine-params.js';
import { EngineKv } from './engine-kv.js';

/** A request as the engine receives it. */
export interface EngineRequest {
  /** Caller's id (reported back in outcomes). */
  id: number;
  /** Sequence hashes of the prompt's full blocks, as (lo, hi) u32 words. */
  seq: Uint32Array;
  /** Full prompt blocks (seq holds 2 * blocks words). */
  blocks: number;
  inputTokens: number;
  /** Output tokens to generate (at least 1 is generated: the first token). */
  outputTokens: number;
}

/** A request's prompt blocks that entered the cache with a step: blocks `from .. blocks-1`. */
export interface StoredRange {
  request: EngineRequest;
  from: number;
}

/** What a step did, reported at its end. */
export interface StepOutcome {
  endMs: number;
  /** Requests whose first token came with this step. */
  firstTokens: number[];
  /** Requests that generated their last token with this step. */
  finished: number[];
  /** Blocks new to the cache (Stored events). */
  stored: StoredRange[];
  prefillTokens: number;
  decoders: number;
}

/** Per-request timing the engine measured. */
export interface EngineRequestTiming {
  admittedMs: number;
  /** Prompt tokens served from the cache at admission. */
  cachedTokens: number;
}

interface Running {
  req: EngineRequest;
  slots: Int32Array;
  /** Cached blocks it pins (its hit, then all its blocks once stored). */
  pinned: number;
  hit: number;
  /** Private blocks it still owns (released at its end). */
  privateBlocks: number;
  /** Prompt tokens computed or cached. */
  computed: number;
  generated: number;
  /** Tokens scheduled in the current step. */
  chunk: number;
}

/** An engine's true backlog (`EngineModel.backlog`). */
export interface EngineBacklog {
  /** Prompt tokens still to prefill after the step under way, queued and running, net of the cache. */
  prefillTokens: number;
  /** Requests past their first token. */
  decoders: number;
  /** Their context, tokens (prompt plus generated). */
  contextTokens: number;
  /** End of the step under way, ms; -1 when idle. */
  stepEndMs: number;
  /** The u of the decode polynomial for a step starting now (engine-params.ts: `decodeKvActive`). */
  decodeKvFraction: number;
}

/** Engine options beside its parameters. */
export interface EngineModelOptions {
  /** KV pool, in blocks. */
  kvBlocks: number;
  /** Tokens per block. */
  blockSize: number;
  /** Reuse cached prefixes (default true); false costs every prompt in full (capacity runs). */
  prefixCaching?: boolean;
}

export class EngineModel {
  readonly params: EngineParams;
  readonly kv: EngineKv;
  readonly #blockSize: number;
  readonly #caching: boolean;
  readonly #waiting: EngineRequest[] = [];
  #waitHead = 0;
  #running: Running[] = [];
  #stepEnd = -1;
  #prefill = 0;
  #decoders = 0;
  /** Evictions of the last `begin`, (lo, hi) words leaf first: the caller drains them. */
  readonly evicted: number[] = [];
  /** Requests rejected by the last `begin` (larger than the pool). */
  readonly rejected: number[] = [];
  /** Admission timing by request id, filled as requests are admitted. */
  readonly timing = new Map<number, EngineRequestTiming>();

  constructor(params: EngineParams, options: EngineModelOptions) {
    this.params = params;
    this.kv = new EngineKv(options.kvBlocks);
    this.#blockSize = options.blockSize;
    this.#caching = options.prefixCaching ?? true;
  }

  /** Requests waiting for admission. */
  get waiting(): number {
    return this.#waiting.length - this.#waitHead;
  }

  /** Requests admitted and not finished. */
  get running(): number {
    return this.#running.length;
  }

  /** Whether a step is under way (between `begin` and `end`). */
  get busy(): boolean {
    return this.#stepEnd >= 0;
  }

  /** Share of the KV pool pinned or reserved by running requests (vLLM's KV usage metric). */
  get kvUsage(): number {
    return this.kv.busy / this.kv.capacity;
  }

  /**
   * The engine's true backlog, for the replay's `oracle` reference policy only (a router never
   * sees it): prompt tokens still to prefill after the step under way (running requests' rest,
   * waiting requests' prompts net of what the cache holds for them now), decoding requests and
   * their context in tokens, and the end of the step under way (-1: idle).
   */
  backlog(): EngineBacklog {
    let prefillTokens = 0;
    let decoders = 0;
    let contextTokens = 0;
    for (const r of this.#running) {
      const left = r.req.inputTokens - r.computed;
      // The chunk of the step under way is done at its end (stepEndMs covers it).
      if (left > 0) prefillTokens += left - r.chunk;
      else {
        decoders++;
        contextTokens += r.req.inputTokens + r.generated;
      }
    }
    for (let i = this.#waitHead; i < this.#waiting.length; i++) {
      const q = this.#waiting[i]!;
      const hit = this.#caching ? this.kv.match(q.seq, q.blocks) : 0;
      prefillTokens += Math.max(1, q.inputTokens - hit * this.#blockSize);
    }
    const decodeKvFraction = this.params.decodeKvActive === 1 ? this.#activeBlocks() / this.kv.capacity : contextTokens / (this.kv.capacity * this.#blockSize);
    return { prefillTokens, decoders, contextTokens, stepEndMs: this.#stepEnd, decodeKvFraction };
  }

  /**
   * Blocks the running requests hold as Dynamo's mocker counts them (`num_active_blocks`): the
   * pool's pinned and private blocks less the output room reserved ahead and not yet written
   * (this engine reserves a request's whole output at admission; the mocker's vLLM scheduler
   * allocates a block when a token needs it). A prompt counts whole from admission.
   */
  #activeBlocks(): number {
    const bs = this.#blockSize;
    let ahead = 0;
    for (const r of this.#running) {
      ahead += Math.max(0, r.pinned + r.privateBlocks - Math.ceil((r.req.inputTokens + r.generated) / bs));
    }
    return Math.max(0, this.kv.busy - ahead);
  }

  /** Queues a request. */
  enqueue(req: EngineRequest): void {
    this.#waiting.push(req);
  }

  /**
   * Schedules a step starting at `nowMs`; returns its end time, or -1 when there is nothing to
   * run. Evictions and rejections it caused are in `evicted` and `rejected` (cleared first).
   */
  begin(nowMs: number): number {
    if (this.#stepEnd >= 0) throw new Error('internal: begin() during a step');
    this.evicted.length = 0;
    this.rejected.length = 0;
    const p = this.params;
    const bs = this.#blockSize;
    let budget = p.tokenBudget;
    let prefill = 0;
    let decoders = 0;
    let context = 0;
    // Prompts whose prefill completes in this step: they sample their first token at its end.
    let completing = 0;
    for (const r of this.#running) {
      const left = r.req.inputTokens - r.computed;
      if (left > 0) {
        r.chunk = Math.min(left, budget);
        prefill += r.chunk;
        if (r.chunk === left) completing++;
      } else {
        r.chunk = budget > 0 ? 1 : 0;
        if (r.chunk === 1) {
          decoders++;
          context += r.req.inputTokens + r.generated;
        }
      }
      budget -= r.chunk;
    }
    while (budget > 0 && this.#running.length < p.maxRunning && this.#waitHead < this.#waiting.length) {
      const req = this.#waiting[this.#waitHead]!;
      const total = Math.max(req.blocks, Math.ceil((req.inputTokens + req.outputTokens) / bs));
      if (total > this.kv.capacity) {
        this.#waitHead++;
        this.rejected.push(req.id);
        continue;
      }
      const hit = this.#caching ? this.kv.match(req.seq, req.blocks) : 0;
      if (!this.kv.fits(req.seq, hit, total - hit)) break; // first come, first served: the head waits
      this.#waitHead++;
      const slots = new Int32Array(req.blocks);
      this.kv.admit(req.seq, hit, total - hit, slots, this.evicted);
      // A fully cached prompt still recomputes its last token (its logits give the first token).
      const computed = Math.min(hit * bs, req.inputTokens - 1);
      const r: Running = { req, slots, pinned: hit, hit, privateBlocks: total - hit, computed, generated: 0, chunk: 0 };
      r.chunk = Math.min(req.inputTokens - computed, budget);
      if (r.chunk === req.inputTokens - computed) completing++;
      budget -= r.chunk;
      prefill += r.chunk;
      this.#running.push(r);
      this.timing.set(req.id, { admittedMs: nowMs, cachedTokens: computed });
    }
    if (this.#waitHead > 1024 && this.#waitHead * 2 > this.#waiting.length) {
      this.#waiting.splice(0, this.#waitHead);
      this.#waitHead = 0;
    }
    if (prefill === 0 && decoders === 0) return -1;
    this.#prefill = prefill;
    this.#decoders = decoders;
    // The mocker times every ready request's token after the prefill, a first token included
    // (engine-params.ts), and reads u from the blocks all running requests hold.
    const ready = decoders + (p.firstTokenDecode === 1 ? completing : 0);
    const u = p.decodeKvActive === 1 ? this.#activeBlocks() / this.kv.capacity : context / (this.kv.capacity * bs);
    this.#stepEnd = nowMs + stepMs(p, prefill, ready, u);
    return this.#stepEnd;
  }

  /** Applies the step `begin` scheduled; call at its end time. */
  end(): StepOutcome {
    const endMs = this.#stepEnd;
    if (endMs < 0) throw new Error('internal: end() without a step');
    const out: StepOutcome = { endMs, firstTokens: [], finished: [], stored: [], prefillTokens: this.#prefill, decoders: this.#decoders };
    const still: Running[] = [];
    for (const r of this.#running) {
      const req = r.req;
      if (r.chunk > 0) {
        if (r.computed < req.inputTokens) {
          r.computed += r.chunk;
          if (r.computed >= req.inputTokens) {
            if (this.#caching && r.hit < req.blocks) {
              const from = this.kv.store(req.seq, r.hit, req.blocks, r.slots);
              if (from < req.blocks) out.stored.push({ request: req, from });
            }
            if (this.#caching) {
              r.privateBlocks -= req.blocks - r.hit;
              r.pinned = req.blocks;
            }
            r.generated = 1;
            out.firstTokens.push(req.id);
          }
        } else {
          r.generated++;
        }
        r.chunk = 0;
      }
      if (r.generated > 0 && r.generated >= Math.max(1, req.outputTokens)) {
        this.kv.release(r.slots, r.pinned, r.privateBlocks);
        out.finished.push(req.id);
      } else {
        still.push(r);
      }
    }
    this.#running = still;
    this.#stepEnd = -1;
    return out;
  }
}
