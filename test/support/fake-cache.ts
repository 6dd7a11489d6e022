/**
 * The simulated prefix cache of the fake OpenAI engine (fake-engine.ts): block-level, LRU,
 * evicting leaves first (a block whose child is cached stays, as vLLM frees a sequence's blocks
 * tail first), and publishing what it stores and evicts as real vLLM-format KV events through a
 * `VllmPublisher` (ZMQ). Block ids are the engine's own (sequence hashes: a block's id depends
 * on its whole prefix, as vLLM's); the indexer re-hashes the token ids it is sent.
 */

import { computeBlockHashes, computeSequenceHashes } from '../../src/hash/block-hash.js';
import type { EventSpec, VllmPublisher } from './vllm-publisher.js';

interface Block {
  parent: bigint | null;
  children: number;
}

export class FakePrefixCache {
  readonly blockSize: number;
  readonly capacity: number;
  /** Insertion order is recency: the first entry is the least recently used. */
  readonly #blocks = new Map<bigint, Block>();
  readonly #publisher: VllmPublisher | null;
  /** While true, nothing is published (a broken publisher); seqs are not used up, so no gap shows. */
  muted = false;
  /** Publishing is ordered: one batch after the other (ZMQ seq order). */
  #chain: Promise<unknown> = Promise.resolve();

  constructor(blockSize: number, capacity: number, publisher: VllmPublisher | null) {
    this.blockSize = blockSize;
    this.capacity = capacity;
    this.#publisher = publisher;
  }

  get size(): number {
    return this.#blocks.size;
  }

  /**
   * A prompt's prefill: returns how many of its leading full blocks were cached, caches the rest
   * (publishing one BlockStored for them and a BlockRemoved for what that evicted), and makes
   * the prompt's blocks the most recent.
   */
  admit(tokens: readonly number[], loraName: string | null): number {
    const bs = this.blockSize;
    const local = computeBlockHashes(Uint32Array.from(tokens), bs, loraName === null ? {} : { loraName });
    const ids = computeSequenceHashes(local);
    let hit = 0;
    while (hit < ids.length && this.#blocks.has(ids[hit]!)) hit++;
    const fresh: bigint[] = [];
    for (let i = hit; i < ids.length; i++) {
      const parent = i === 0 ? null : ids[i - 1]!;
      this.#blocks.set(ids[i]!, { parent, children: 0 });
      if (parent !== null) this.#blocks.get(parent)!.children++;
      fresh.push(ids[i]!);
    }
    // Deepest first, so that a parent is always more recent than its children and the oldest
    // entries are leaves.
    for (let i = ids.length - 1; i >= 0; i--) {
      const id = ids[i]!;
      const b = this.#blocks.get(id)!;
      this.#blocks.delete(id);
      this.#blocks.set(id, b);
    }
    const events: EventSpec[] = [];
    if (fresh.length > 0) {
      events.push({
        stored: {
          hashes: fresh,
          parent: hit === 0 ? null : ids[hit - 1]!,
          tokens: tokens.slice(hit * bs, ids.length * bs),
          blockSize: bs,
          loraName,
        },
      });
    }
    const evicted = this.#evict(new Set(ids));
    if (evicted.length > 0) events.push({ removed: evicted });
    if (events.length > 0) this.#publish(events);
    return hit;
  }

  /** How many leading full blocks of the prompt are cached; changes nothing. */
  probe(tokens: readonly number[], loraName: string | null): number {
    const ids = computeSequenceHashes(computeBlockHashes(Uint32Array.from(tokens), this.blockSize, loraName === null ? {} : { loraName }));
    let hit = 0;
    while (hit < ids.length && this.#blocks.has(ids[hit]!)) hit++;
    return hit;
  }

  /** Empties the cache, publishing AllBlocksCleared. */
  clear(): void {
    this.#blocks.clear();
    this.#publish(['cleared']);
  }

  /** Resolves once every batch published so far has been sent. */
  flushed(): Promise<unknown> {
    return this.#chain;
  }

  #evict(keep: Set<bigint>): bigint[] {
    const out: bigint[] = [];
    while (this.#blocks.size > this.capacity) {
      let victim: bigint | null = null;
      for (const [id, b] of this.#blocks) {
        if (b.children === 0 && !keep.has(id)) {
          victim = id;
          break;
        }
      }
      if (victim === null) break; // the prompt alone is larger than the cache
      const parent = this.#blocks.get(victim)!.parent;
      this.#blocks.delete(victim);
      if (parent !== null) {
        const p = this.#blocks.get(parent);
        if (p !== undefined) p.children--;
      }
      out.push(victim);
    }
    return out;
  }

  #publish(events: EventSpec[]): void {
    const pub = this.#publisher;
    if (pub === null || this.muted) return;
    this.#chain = this.#chain.then(() => pub.publish(events)).catch(() => undefined);
  }
}
