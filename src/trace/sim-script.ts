/**
 * A trace simulated once, up front, into a script of steps (per request: its lookup and the
 * events the chosen worker published), routed on an in-thread `RadixTree`. Benchmarks replay the
 * script at any pace against any indexer without paying for the simulation (token generation
 * and hashing) inside the measured loop, as Dynamo's mooncake benchmark replays pre-generated
 * mocker events.
 */
import type { RouterEvent } from '../protocol/types.js';
import { RadixTree } from '../tree/radix-tree.js';
import { ClusterSim, type ClusterSimOptions } from './cluster-sim.js';
import type { TraceRequest } from './mooncake.js';

/** One request of a script. */
export interface ScriptStep {
  /** Arrival time, ms of trace time. */
  timestamp: number;
  /** The request's LocalBlockHash sequence, as the router looks it up. */
  local: BigUint64Array;
  /** Leading blocks matched (the best worker's score) before the request. */
  matched: number;
  /** Events of the chosen worker: Removed then Stored. */
  events: RouterEvent[];
  /** Blocks stored and removed by `events`. */
  stored: number;
  removed: number;
}

export interface SimScript {
  steps: ScriptStep[];
  sim: ClusterSim;
  /** The routing tree, holding the fleet's final state. */
  tree: RadixTree;
  /** Block-weighted hit rates of the chosen workers and of the oracle. */
  hitRate: number;
  oracleHitRate: number;
}

/**
 * Simulates `requests` on a fleet; `keepSteps: false` keeps only the final state (the tree),
 * for callers that need a realistic index and not its history.
 */
export function recordSimulation(requests: readonly TraceRequest[], options: ClusterSimOptions, keepSteps = true): SimScript {
  const sim = new ClusterSim(options);
  const tree = new RadixTree();
  const steps: ScriptStep[] = [];
  let blocks = 0;
  let hits = 0;
  let oracle = 0;
  for (const req of requests) {
    const prepared = sim.prepare(req);
    const served = sim.serve(prepared, tree.findMatches(prepared.local).scores);
    for (const e of served.events) tree.applyEvent(e);
    blocks += served.blocks;
    hits += served.hit;
    oracle += served.oracle;
    if (keepSteps) {
      steps.push({
        timestamp: req.timestamp,
        local: prepared.local,
        matched: served.oracle,
        events: served.events,
        stored: served.stored,
        removed: served.removed,
      });
    }
  }
  return { steps, sim, tree, hitRate: blocks > 0 ? hits / blocks : 0, oracleHitRate: blocks > 0 ? oracle / blocks : 0 };
}
