/**
 * A routing decision as reply JSON, the same over NATS (`kvindex serve --route-workers`) and
 * HTTP (`kvindex serve --http`): worker ids as decimal strings (they exceed 2^53).
 *   {"request_id":"..","worker_id":"<u64>","dp_rank":0,"overlap_blocks":3,"required_blocks":4,
 *    "candidates":[{"worker_id":"<u64>","dp_rank":0},...],"costs":[...],"overlaps":[...]}
 */
import type { RouteDecision } from './kv-router.js';

export function formatRouteDecision(d: RouteDecision): string {
  return `{"request_id":${JSON.stringify(d.requestId)},"worker_id":"${d.workerId}","dp_rank":${d.dpRank},` +
    `"overlap_blocks":${d.overlapBlocks},"required_blocks":${d.requiredBlocks},` +
    `"candidates":[${d.candidates.map((c) => `{"worker_id":"${c.workerId}","dp_rank":${c.dpRank}}`).join(',')}],` +
    `"costs":[${Array.from(d.costs, jsonNumber).join(',')}],"overlaps":[${Array.from(d.overlaps).join(',')}]}`;
}

/**
 * A cost as a JSON number. Costs are finite for every accepted input (`MAX_WEIGHT`,
 * select-worker.ts); should one not be, the answer stays valid JSON: the largest double for an
 * infinite cost, null for NaN.
 */
function jsonNumber(x: number): string {
  if (Number.isFinite(x)) return String(x);
  if (Number.isNaN(x)) return 'null';
  return x > 0 ? '1.7976931348623157e+308' : '-1.7976931348623157e+308';
}
