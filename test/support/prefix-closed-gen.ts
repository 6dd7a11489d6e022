/**
 * Random event streams of engines that behave as real ones do: every worker's cache stays
 * prefix-closed (stores extend a held prefix, evictions are leaf first), plus clears, worker
 * removals, lookups and the usual bad events (unknown parent, unknown removed hash).
 *
 * Tests use them where a workload must look like real engines' (shared prefixes, leaf-first
 * eviction); event-gen.ts also makes partial removes.
 */
import type { RouterEvent } from '../../src/protocol/types.js';
import { BASE_WORKER_ID, mix64, Rng, type Op } from './event-gen.js';

interface Held {
  hash: bigint;
  /** Index of the block in its document, and the document. */
  depth: number;
  doc: number;
}

export function prefixClosedStream(seed: number, ops: number): { ops: Op[]; docs: bigint[][] } {
  const rng = new Rng(seed);
  const workers = Array.from({ length: 2 + rng.int(5) }, (_, i) => BASE_WORKER_ID + BigInt(i) * 7919n);
  const salted = rng.chance(0.5);
  // Documents share prefixes: doc i starts with the first `share` blocks of an earlier doc.
  const docs: bigint[][] = [];
  for (let d = 0; d < 6; d++) {
    const len = 2 + rng.int(10);
    const base = d > 0 && rng.chance(0.7) ? docs[rng.int(d)]!.slice(0, 1 + rng.int(4)) : [];
    while (base.length < len) base.push(rng.u64());
    docs.push(base);
  }
  // The external hash of a prefix: a rolling hash of its token hashes, salted per worker or not.
  const extHash = (w: bigint, doc: number, depth: number): bigint => {
    let h = salted ? w : 0n;
    for (let i = 0; i <= depth; i++) h = mix64(h ^ docs[doc]![i]!);
    return h;
  };
  const key = (doc: number, depth: number): string => docs[doc]!.slice(0, depth + 1).join(',');
  const held = new Map<bigint, Map<string, Held>>(workers.map((w) => [w, new Map()]));
  let eventId = 0n;
  const out: Op[] = [];
  const ev = (workerId: bigint, data: RouterEvent['event']['data']): void => {
    out.push({ kind: 'event', event: { workerId, event: { eventId: eventId++, data } } });
  };

  for (let i = 0; i < ops; i++) {
    const w = rng.pick(workers);
    const mine = held.get(w)!;
    const r = rng.u32() / 0x1_0000_0000;
    if (r < 0.4) {
      const doc = rng.int(docs.length);
      const len = 1 + rng.int(docs[doc]!.length);
      let k = 0;
      while (k < len && mine.has(key(doc, k))) k++;
      if (k === len) continue;
      const blocks = [];
      for (let j = k; j < len; j++) {
        const hash = extHash(w, doc, j);
        blocks.push({ blockHash: hash, tokensHash: docs[doc]![j]! });
        mine.set(key(doc, j), { hash, depth: j, doc });
      }
      ev(w, { type: 'stored', parentHash: k === 0 ? null : extHash(w, doc, k - 1), blocks });
    } else if (r < 0.65) {
      // Evict up to three leaves, leaf first.
      const removed: bigint[] = [];
      for (let n = 1 + rng.int(3); n > 0; n--) {
        const leaves = [...mine.entries()].filter(([k]) => ![...mine.keys()].some((o) => o.startsWith(k + ',')));
        if (leaves.length === 0) break;
        const [k, h] = rng.pick(leaves);
        mine.delete(k);
        removed.push(h.hash);
      }
      if (rng.chance(0.1)) removed.push(rng.u64()); // unknown hash: block_not_found
      ev(w, { type: 'removed', blockHashes: removed });
    } else if (r < 0.68) {
      mine.clear();
      ev(w, { type: 'cleared' });
    } else if (r < 0.7) {
      mine.clear();
      out.push({ kind: 'removeWorker', workerId: w });
    } else if (r < 0.74) {
      ev(w, { type: 'stored', parentHash: rng.u64(), blocks: [{ blockHash: rng.u64(), tokensHash: rng.u64() }] });
    } else {
      const doc = rng.int(docs.length);
      out.push({ kind: 'find', hashes: docs[doc]!.slice(0, 1 + rng.int(docs[doc]!.length)), earlyExit: false });
    }
  }
  return { ops: out, docs };
}

/**
 * The events of `prefixClosedStream(seed, ops)` as a publisher would send them: lookups are
 * dropped and a worker removal becomes a Cleared event (the event stream has no removal, and
 * dropping it would leave the worker holding blocks its later evictions do not know about,
 * which breaks prefix closure). Event ids are renumbered 0, 1, 2, ...
 */
export function prefixClosedEvents(seed: number, ops: number): { events: RouterEvent[]; docs: bigint[][] } {
  const stream = prefixClosedStream(seed, ops);
  const events: RouterEvent[] = [];
  for (const op of stream.ops) {
    const eventId = BigInt(events.length);
    if (op.kind === 'event') events.push({ workerId: op.event.workerId, event: { ...op.event.event, eventId } });
    else if (op.kind === 'removeWorker') events.push({ workerId: op.workerId, event: { eventId, data: { type: 'cleared' } } });
  }
  return { events, docs: stream.docs };
}
