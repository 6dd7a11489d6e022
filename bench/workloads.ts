/**
 * Loads a shared replay workload into memory once, so that benchmarks time the indexer and not
 * gunzip or JSON parsing. Also builds large synthetic trees by replicating a final tree under
 * remapped worker ids and perturbed hashes.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { RouterEvent } from '../src/protocol/types.js';
import { readWorkload } from '../src/trace/workload.js';
import type { RadixTree } from '../src/tree/radix-tree.js';

export type Op =
  | { kind: 'event'; event: RouterEvent; json: Uint8Array }
  | { kind: 'match'; seq: BigUint64Array; visited: number };

export interface LoadedWorkload {
  name: string;
  ops: Op[];
  events: number;
  lookups: number;
  /** Stored + removed blocks of the events. */
  eventBlocks: number;
  /** Blocks visited by the lookups (matched depth: the best expected score). */
  lookupBlocks: number;
}

export function workloadPath(shared: string, name: string): string | null {
  const p = join(shared, 'workloads', `${name}.jsonl.gz`);
  return existsSync(p) ? p : null;
}

/** Reads up to `maxLines` lines of a shared workload. */
export async function loadWorkload(path: string, name: string, maxLines = Infinity): Promise<LoadedWorkload> {
  const ops: Op[] = [];
  let events = 0;
  let lookups = 0;
  let eventBlocks = 0;
  let lookupBlocks = 0;
  for await (const op of readWorkload(path, maxLines)) {
    if (op.op === 'event') {
      const d = op.event.event.data;
      eventBlocks += d.type === 'stored' ? d.blocks.length : d.type === 'removed' ? d.blockHashes.length : 0;
      events++;
      ops.push({ kind: 'event', event: op.event, json: encoder.encode(op.text) });
    } else if (op.op === 'match') {
      let visited = 0;
      for (const v of op.expect.values()) visited = Math.max(visited, v);
      lookupBlocks += visited;
      lookups++;
      ops.push({ kind: 'match', seq: op.seq, visited });
    }
  }
  return { name, ops, events, lookups, eventBlocks, lookupBlocks };
}

/** Anything that takes events (RadixTree, the Map-based reference). */
export interface EventSink {
  applyEvent(e: RouterEvent): unknown;
}

const MASK = 0xffff_ffff_ffff_ffffn;
const encoder = new TextEncoder();

/**
 * The dump of `tree` replicated `copies` times: copy k gets worker ids offset by k and every hash
 * xor-ed with a per-copy constant (so copies form disjoint subtrees, as distinct models would).
 */
export function replicatedEvents(tree: RadixTree, copies: number): RouterEvent[] {
  const base = tree.dumpEvents();
  const out: RouterEvent[] = [];
  for (let k = 0; k < copies; k++) {
    const x = (BigInt(k) * 0x9e3779b97f4a7c15n) & MASK;
    for (const e of base) {
      const d = e.event.data;
      if (d.type !== 'stored') continue;
      out.push({
        workerId: e.workerId + BigInt(k) * 1_000_003n,
        event: {
          eventId: BigInt(out.length),
          data: {
            type: 'stored',
            parentHash: d.parentHash === null ? null : d.parentHash ^ x,
            blocks: d.blocks.map((b) => ({ blockHash: b.blockHash ^ x, tokensHash: b.tokensHash ^ x })),
          },
        },
      });
    }
  }
  return out;
}

/** Heap plus array-buffer bytes in use after a full GC (needs --expose-gc, else approximate). */
export function usedBytes(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    gc();
  }
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}
