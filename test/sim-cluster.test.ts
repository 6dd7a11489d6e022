import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import type { OverlapScores, RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { ClusterSim, type ClusterSimOptions } from '../src/trace/cluster-sim.js';
import { readTraceFile, type TraceRequest } from '../src/trace/mooncake.js';
import { RadixTree } from '../src/tree/radix-tree.js';

const SLICE = fileURLToPath(new URL('../data/conversation_trace_head.jsonl', import.meta.url));
// Small caches and 2 blocks per trace block: heavy eviction on a few hundred requests.
const OPTIONS: ClusterSimOptions = { workers: 3, cacheBlocks: 600, subBlocks: 2, seed: 5n };

let requests: TraceRequest[] = [];
beforeAll(async () => {
  requests = (await readTraceFile(SLICE, 300)).requests;
});

interface Lookup {
  findMatches(hashes: BigUint64Array): OverlapScores | Promise<OverlapScores>;
  applyEvent(e: RouterEvent): unknown;
}

interface Run {
  events: string[];
  scores: string[];
  mismatches: number;
}

async function simulate(options: ClusterSimOptions, index: Lookup, each?: (sim: ClusterSim, events: RouterEvent[]) => void): Promise<Run> {
  const sim = new ClusterSim(options);
  const run: Run = { events: [], scores: [], mismatches: 0 };
  for (const req of requests) {
    const prepared = sim.prepare(req);
    const { scores } = await index.findMatches(prepared.local);
    run.scores.push([...scores].map(([w, s]) => `${w}:${s}`).sort().join(','));
    const served = sim.serve(prepared, scores);
    run.mismatches += served.mismatches;
    for (const e of served.events) {
      index.applyEvent(e);
      run.events.push(formatRouterEvent(e));
    }
    each?.(sim, served.events);
  }
  return run;
}

const hex = (lo: number, hi: number): string => ((BigInt(hi) << 32n) | BigInt(lo)).toString();

describe('ClusterSim', () => {
  it('gives the same event stream for the same seed', async () => {
    const a = await simulate(OPTIONS, new RadixTree());
    const b = await simulate(OPTIONS, new RadixTree());
    expect(a.events.length).toBeGreaterThan(300);
    expect(b.events).toEqual(a.events);
  });

  it('gives another event stream for another seed', async () => {
    const a = await simulate(OPTIONS, new RadixTree());
    const b = await simulate({ ...OPTIONS, seed: 6n }, new RadixTree());
    expect(b.events).not.toEqual(a.events);
  });

  it('keeps every cache within capacity and prefix-closed, and its events describe the cache', async () => {
    const cap = OPTIONS.cacheBlocks!;
    // What the events say each worker holds: sequence hash -> parent hash ('' at the root) and
    // the number of held children. Problems are collected, then compared with [] once.
    const shadow = new Map<bigint, Map<string, { parent: string; children: number }>>();
    const problems: string[] = [];
    let removedEvents = 0;
    await simulate(OPTIONS, new RadixTree(), (sim, events) => {
      for (const e of events) {
        let held = shadow.get(e.workerId);
        if (held === undefined) shadow.set(e.workerId, (held = new Map()));
        const d = e.event.data;
        if (d.type === 'removed') {
          removedEvents++;
          for (const h of d.blockHashes) {
            const entry = held.get(h.toString());
            if (entry === undefined) problems.push(`removed ${h} not held`);
            else if (entry.children > 0) problems.push(`removed ${h} before its children`);
            else {
              held.delete(h.toString());
              const p = held.get(entry.parent);
              if (p !== undefined) p.children--;
            }
          }
        } else if (d.type === 'stored') {
          let parent = d.parentHash === null ? '' : d.parentHash.toString();
          if (parent !== '' && !held.has(parent)) problems.push(`stored under ${parent}, not held`);
          for (const b of d.blocks) {
            const key = b.blockHash.toString();
            if (held.has(key)) problems.push(`stored ${key} twice`);
            const p = held.get(parent);
            if (p !== undefined) p.children++;
            held.set(key, { parent, children: 0 });
            parent = key;
          }
        }
      }
      for (let w = 0; w < sim.config.workers; w++) {
        const cache = sim.cache(w);
        if (cache.size > cap) problems.push(`worker ${w} holds ${cache.size} > ${cap}`);
        const held = shadow.get(sim.config.workerIds[w]!) ?? new Map<string, { parent: string }>();
        if (held.size !== cache.size) problems.push(`worker ${w}: events say ${held.size} blocks, the model ${cache.size}`);
        cache.forEach((lo, hi, parent) => {
          if (parent !== null && !cache.has(parent.lo, parent.hi)) problems.push(`worker ${w}: ${hex(lo, hi)} held without its parent`);
          const want = parent === null ? '' : hex(parent.lo, parent.hi);
          if (held.get(hex(lo, hi))?.parent !== want) problems.push(`worker ${w}: ${hex(lo, hi)} differs from the events`);
        });
      }
    });
    expect(problems.slice(0, 5)).toEqual([]);
    expect(removedEvents).toBeGreaterThan(50);
  });

  it('routes on indexer scores that equal its cache models (ground truth)', async () => {
    const tree = new RadixTree();
    const run = await simulate(OPTIONS, tree);
    expect(run.mismatches).toBe(0);
    expect(tree.size).toBe(3 * 600);
  });

  it('gives identical scores and events through 0 and 2 shard threads', async () => {
    const runs: Run[] = [];
    for (const shards of [0, 2]) {
      const ix = await ShardedIndexer.create({ shards, blockSize: 64 });
      try {
        runs.push(await simulate(OPTIONS, ix));
      } finally {
        await ix.close();
      }
    }
    expect(runs[0]!.mismatches).toBe(0);
    expect(runs[1]!.mismatches).toBe(0);
    expect(runs[1]!.scores).toEqual(runs[0]!.scores);
    expect(runs[1]!.events).toEqual(runs[0]!.events);
  });

  it('expands the last trace block only as far as input_length reaches', () => {
    const sim = new ClusterSim({ blockSize: 64 });
    const req = (inputLength: number): TraceRequest => ({ timestamp: 0, inputLength, outputLength: 1, hashIds: BigUint64Array.of(1n, 2n), line: 1 });
    expect(sim.blockCount(req(1024))).toBe(16);
    expect(sim.blockCount(req(512 + 130))).toBe(8 + 2);
    expect(sim.prepare(req(512 + 63)).local.length).toBe(8);
    // The first trace block's tokens do not depend on the request they are in.
    expect(sim.prepare(req(600)).local.subarray(0, 8)).toEqual(sim.prepare(req(1024)).local.subarray(0, 8));
  });
});

describe('ClusterSim.differing', () => {
  it("names the workers whose scores differ from their cache model, as serve's mismatches count them", () => {
    const sim = new ClusterSim(OPTIONS);
    const tree = new RadixTree();
    const ids = sim.config.workerIds;
    let checked = 0;
    for (const req of requests.slice(0, 60)) {
      const prepared = sim.prepare(req);
      const { scores } = tree.findMatches(prepared.local);
      expect(sim.differing(prepared, scores)).toEqual([]);
      // A wrong score for one worker, and one the model does not know of: both named, in worker order.
      const held = sim.cache(1).match(new Uint32Array(prepared.seq.buffer, prepared.seq.byteOffset, prepared.seq.length * 2), prepared.seq.length);
      const wrong = new Map(scores);
      wrong.set(ids[1]!, held + 1);
      wrong.set(ids[2]!, (scores.get(ids[2]!) ?? 0) === 0 ? 1 : 0);
      expect(sim.differing(prepared, wrong)).toEqual([1, 2]);
      const served = sim.serve(prepared, wrong);
      expect(served.mismatches).toBe(2);
      for (const e of served.events) tree.applyEvent(e);
      checked++;
    }
    expect(checked).toBe(60);
  });
});
