/**
 * Seeded random operation streams for the radix-tree property tests. The universe is kept small
 * so that collisions happen: a handful of workers (ids above 2^53, like etcd lease ids), a small
 * pool of "documents" (tokens-hash sequences sharing prefixes, some with repeated blocks), and
 * external hashes that are either equal across workers (Dynamo's own chained hashing) or salted
 * per worker, with occasional re-hashing of an already held block.
 *
 * The generator keeps an approximate shadow of what each worker holds (keyed by the block's
 * token path, which identifies a tree node) so that most stores extend an existing chain and
 * most removes name held blocks. The shadow does not have to be exact: when it is stale the
 * events merely hit the `parent_block_not_found` / `block_not_found` paths, which are tested too.
 */

import type { RouterEvent, StoredBlock } from '../../src/protocol/types.js';
import { mix64 } from '../../bench/fleet-gen.js';

/** One step of a stream. */
export type Op =
  | { kind: 'event'; event: RouterEvent }
  | { kind: 'removeWorker'; workerId: bigint }
  | { kind: 'find'; hashes: readonly bigint[] | BigUint64Array; earlyExit: boolean };

/** mulberry32: a small, well-mixed 32-bit PRNG; deterministic for a given seed. */
export class Rng {
  #s: number;

  constructor(seed: number) {
    this.#s = seed >>> 0;
  }

  /** Uniform u32. */
  u32(): number {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0;
    let t = this.#s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor((this.u32() / 0x1_0000_0000) * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.u32() / 0x1_0000_0000 < p;
  }

  /** Uniform u64 built from two u32 halves. */
  u64(): bigint {
    return (BigInt(this.u32()) << 32n) | BigInt(this.u32());
  }

  pick<T>(items: readonly T[]): T {
    const v = items[this.int(items.length)];
    if (v === undefined) throw new Error('pick from an empty list');
    return v;
  }
}

/** First worker id; the others follow it (a Dynamo-like lease id, far above 2^53). */
export const BASE_WORKER_ID = 0x694d99badb9f7c07n;

export { mix64 };

/** How external hashes relate across workers in one stream. */
export type HashMode = 'shared' | 'salted' | 'mixed';

export interface StreamOptions {
  ops: number;
  workers: number;
  docs: number;
  maxDocLength: number;
  hashMode: HashMode;
  /** Probability that a document position reuses an earlier tokens hash (repeated blocks). */
  tokenReuse: number;
}

export interface Stream {
  seed: number;
  options: StreamOptions;
  workerIds: bigint[];
  /** Tokens-hash sequences; every prefix of every document is a meaningful query. */
  docs: bigint[][];
  ops: Op[];
}

/** Stream options drawn from the seed, so that many seeds cover many shapes. */
export function streamOptionsFor(rng: Rng, ops: number): StreamOptions {
  const modes: HashMode[] = ['shared', 'salted', 'mixed'];
  // Mostly a tiny universe (collisions); sometimes many workers (more than 16, a typical
  // initial capacity) or long documents (events of hundreds of blocks) to reach growth paths.
  const shape = rng.int(20); // 0: many workers, 1: long documents, else small
  return {
    ops,
    workers: shape === 0 ? 17 + rng.int(8) : 2 + rng.int(4),
    docs: 3 + rng.int(5),
    maxDocLength: shape === 1 ? 260 + rng.int(160) : 4 + rng.int(12),
    hashMode: rng.pick(modes),
    tokenReuse: rng.chance(0.5) ? 0 : 0.15,
  };
}

/** Builds the document pool: later documents often extend a prefix of an earlier one. */
function makeDocs(rng: Rng, o: StreamOptions): bigint[][] {
  const docs: bigint[][] = [];
  const used: bigint[] = [];
  const token = (): bigint => {
    if (used.length > 0 && rng.chance(o.tokenReuse)) return rng.pick(used);
    // Small values sometimes, so that hashes near 0 and near 2^64 both occur.
    const t = rng.chance(0.1) ? BigInt(rng.int(8)) : rng.u64();
    used.push(t);
    return t;
  };
  for (let d = 0; d < o.docs; d++) {
    const len = 1 + rng.int(o.maxDocLength);
    const doc: bigint[] = [];
    const base = docs.length > 0 && rng.chance(0.7) ? rng.pick(docs) : null;
    if (base !== null) doc.push(...base.slice(0, rng.int(base.length + 1)));
    while (doc.length < len) doc.push(token());
    docs.push(doc);
  }
  return docs;
}

interface Shadow {
  /** token path id -> external hash held there. */
  byPath: Map<number, bigint>;
  /** external hash -> token path id. */
  byHash: Map<bigint, number>;
}

/** Generates one seeded stream of operations. */
export function generateStream(seed: number, ops: number): Stream {
  const rng = new Rng(seed);
  const o = streamOptionsFor(rng, ops);
  const workerIds: bigint[] = [];
  for (let k = 0; k < o.workers; k++) workerIds.push(BASE_WORKER_ID + BigInt(k));
  const salted = new Map<bigint, boolean>();
  for (const w of workerIds) {
    salted.set(w, o.hashMode === 'salted' || (o.hashMode === 'mixed' && rng.chance(0.5)));
  }
  const docs = makeDocs(rng, o);
  // pathKeys[d][j] identifies the node of docs[d][0..j] (the token path from the root):
  // interned ids of a trie over the documents (0 is the root).
  const ids = new Map<string, number>();
  const pathKeys = docs.map((doc) => {
    let parent = 0;
    return doc.map((t) => {
      const k = `${parent}:${t}`;
      let id = ids.get(k);
      if (id === undefined) {
        id = ids.size + 1;
        ids.set(k, id);
      }
      parent = id;
      return id;
    });
  });
  // Dynamo-style chained external hash of each doc position.
  const chained = docs.map((doc) => {
    const out: bigint[] = [];
    let h = 0n;
    for (const t of doc) {
      h = mix64(h ^ t);
      out.push(h);
    }
    return out;
  });

  const shadows = new Map<bigint, Shadow>();
  const shadowOf = (w: bigint): Shadow => {
    let s = shadows.get(w);
    if (s === undefined) {
      s = { byPath: new Map(), byHash: new Map() };
      shadows.set(w, s);
    }
    return s;
  };
  const shadowDrop = (w: bigint, h: bigint): void => {
    const s = shadowOf(w);
    const key = s.byHash.get(h);
    if (key === undefined) return;
    s.byHash.delete(h);
    s.byPath.delete(key);
    // Other blocks stay: a node that loses its last worker keeps its children (radix-tree.ts
    // `detach`), so a worker's blocks go only by its own events.
  };
  const shadowSet = (w: bigint, key: number, h: bigint): void => {
    const s = shadowOf(w);
    const old = s.byPath.get(key);
    if (old !== undefined) s.byHash.delete(old);
    s.byPath.set(key, h);
    s.byHash.set(h, key);
  };

  const extHash = (w: bigint, d: number, j: number): bigint => {
    const base = chained[d]![j]!;
    return salted.get(w) === true ? mix64(base ^ w) : base;
  };

  let eventId = 0n;
  const ev = (workerId: bigint, data: RouterEvent['event']['data']): Op => ({
    kind: 'event',
    event: { workerId, event: { eventId: eventId++, data } },
  });

  const out: Op[] = [];
  for (let i = 0; i < ops; i++) {
    const w = rng.pick(workerIds);
    const s = shadowOf(w);
    const r = rng.int(100);
    if (r < 40) {
      // Store: extend the worker's existing chain along a document.
      const d = rng.int(docs.length);
      const doc = docs[d]!;
      const keys = pathKeys[d]!;
      const end = 1 + rng.int(doc.length);
      let from = 0;
      while (from < end && s.byPath.has(keys[from]!)) from++;
      // Sometimes re-store blocks the worker already holds (idempotence / re-hash paths).
      if (rng.chance(0.25)) from = rng.int(from + 1);
      if (from === end) from = end - 1;
      const parentHash = from === 0 ? null : (s.byPath.get(keys[from - 1]!) ?? extHash(w, d, from - 1));
      const rehash = rng.chance(0.08);
      const blocks: StoredBlock[] = [];
      for (let j = from; j < end; j++) {
        const held = s.byPath.get(keys[j]!);
        const blockHash = rehash && rng.chance(0.5) ? rng.u64() : (held ?? extHash(w, d, j));
        blocks.push({ blockHash, tokensHash: doc[j]! });
      }
      out.push(ev(w, { type: 'stored', parentHash, blocks }));
      // Optimistic shadow update; a rejected event leaves the shadow slightly stale.
      const dup = new Set<bigint>();
      let clean = true;
      for (let j = 0; j < blocks.length; j++) {
        const b = blocks[j]!;
        const key = s.byHash.get(b.blockHash);
        if (dup.has(b.blockHash) || (key !== undefined && key !== keys[from + j])) clean = false;
        dup.add(b.blockHash);
      }
      if (clean && (parentHash === null || s.byHash.has(parentHash))) {
        for (let j = 0; j < blocks.length; j++) shadowSet(w, keys[from + j]!, blocks[j]!.blockHash);
      }
    } else if (r < 60) {
      // Remove some held blocks (leaf or not), sometimes with unknown hashes mixed in.
      const held = [...s.byHash.keys()];
      const hashes: bigint[] = [];
      const n = 1 + rng.int(3);
      for (let k = 0; k < n; k++) {
        if (held.length > 0 && !rng.chance(0.1)) hashes.push(held.splice(rng.int(held.length), 1)[0]!);
        else hashes.push(rng.u64());
      }
      out.push(ev(w, { type: 'removed', blockHashes: hashes }));
      for (const h of hashes) shadowDrop(w, h);
    } else if (r < 82) {
      // Find along a document prefix, sometimes with a perturbed block.
      const doc = rng.pick(docs);
      const hashes = doc.slice(0, rng.int(doc.length + 2));
      if (hashes.length > 0 && rng.chance(0.15)) hashes[rng.int(hashes.length)] = rng.u64();
      if (rng.chance(0.1)) hashes.push(rng.u64());
      const earlyExit = rng.chance(0.3);
      out.push({ kind: 'find', hashes: rng.chance(0.3) ? BigUint64Array.from(hashes) : hashes, earlyExit });
    } else if (r < 94) {
      out.push(badEvent(rng, w, s, docs, ev));
    } else if (r < 97) {
      out.push(ev(w, { type: 'cleared' }));
      for (const h of [...s.byHash.keys()]) shadowDrop(w, h);
    } else {
      out.push({ kind: 'removeWorker', workerId: w });
      for (const h of [...s.byHash.keys()]) shadowDrop(w, h);
    }
  }
  return { seed, options: o, workerIds, docs, ops: out };
}

/** An event that should be rejected or is otherwise unusual. Does not touch the shadow. */
function badEvent(
  rng: Rng,
  w: bigint,
  s: Shadow,
  docs: readonly bigint[][],
  ev: (w: bigint, data: RouterEvent['event']['data']) => Op,
): Op {
  const doc = rng.pick(docs);
  const held = [...s.byHash.keys()];
  const someHeld = (): bigint => (held.length > 0 ? rng.pick(held) : rng.u64());
  const blocksOf = (n: number): StoredBlock[] =>
    doc.slice(0, Math.max(1, n)).map((t) => ({ blockHash: rng.u64(), tokensHash: t }));
  switch (rng.int(7)) {
    case 0: // Unknown parent.
      return ev(w, { type: 'stored', parentHash: rng.u64(), blocks: blocksOf(1 + rng.int(3)) });
    case 1: {
      // The same external hash twice in one event.
      const blocks = blocksOf(2 + rng.int(3));
      const a = rng.int(blocks.length);
      let b = rng.int(blocks.length);
      if (b === a) b = (a + 1) % blocks.length;
      if (blocks.length > 1) blocks[b] = { blockHash: blocks[a]!.blockHash, tokensHash: blocks[b]!.tokensHash };
      return ev(w, { type: 'stored', parentHash: null, blocks });
    }
    case 2: {
      // A hash the worker already holds, on some (probably other) position.
      const blocks = blocksOf(1 + rng.int(4));
      const k = rng.int(blocks.length);
      blocks[k] = { blockHash: someHeld(), tokensHash: blocks[k]!.tokensHash };
      return ev(w, { type: 'stored', parentHash: rng.chance(0.5) ? null : someHeld(), blocks });
    }
    case 3: {
      // Self-reference: the parent's own hash as a block under it.
      const p = someHeld();
      return ev(w, { type: 'stored', parentHash: p, blocks: [{ blockHash: p, tokensHash: rng.pick(doc) }] });
    }
    case 4: // Empty store.
      return ev(w, { type: 'stored', parentHash: rng.chance(0.5) ? null : someHeld(), blocks: [] });
    case 5: // Remove of only unknown hashes / empty remove.
      return ev(w, { type: 'removed', blockHashes: rng.chance(0.8) ? [rng.u64()] : [] });
    default: {
      // Store under a held parent with the held hash repeated further down (cycle-like).
      const p = someHeld();
      const blocks = blocksOf(3);
      if (blocks.length > 2) blocks[2] = { blockHash: blocks[0]!.blockHash, tokensHash: blocks[2]!.tokensHash };
      return ev(w, { type: 'stored', parentHash: p, blocks });
    }
  }
}
