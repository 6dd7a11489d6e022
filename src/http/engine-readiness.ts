/**
 * Readiness of the standalone indexer (`/ready` on the API port and on the `--metrics` port):
 * every registered rank that is not `active` is named, with its state, why and since when
 * (src/zmq/source-health.ts).
 *
 * Decision: by default only a fault of this replica makes it not ready: a listener whose receive
 * loop failed (its socket closed under it). A `connecting` or `excluded` rank is named in the
 * body of a 200. These are engine-side conditions (an engine down, misconfigured, or that lost
 * events): every replica of the indexer sees the same ones at the same time, so a 503 for them
 * would take every replica out of the load balancer together, over one bad engine, while each
 * still scores the other engines correctly and the router's fail-open gives the bad engine's
 * requests nothing better. `strict` (`--ready-strict`) answers 503 as long as any registered
 * rank is not active, for an operator who wants the probe itself to page.
 */

import type { EngineRegistry } from './engine-registry.js';
import { RankState, type RankHealth } from '../zmq/source-health.js';

/** One registered rank that is not active. Ids as decimal strings (u64); times ISO 8601. */
export interface InactiveRank {
  instance_id: string;
  model_name: string;
  tenant_id: string;
  dp_rank: number;
  endpoint: string;
  state: RankState;
  reason: string | null;
  since: string | null;
  readmit_at?: string;
  engine_block_size?: number;
}

/** The body of `/ready`: `lag` is always 0 here (the engines' events are applied as they come). */
export interface EngineReadiness {
  ready: boolean;
  /** '' when every rank is active; else a one-line summary naming the ranks. */
  reason: string;
  lag: number;
  not_active: InactiveRank[];
}

/** ISO 8601 of an epoch-ms time, or null. */
export const isoTime = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The readiness of `registry`'s listeners (see the top of the file for `strict`). */
export function engineReadiness(registry: EngineRegistry, strict = false): EngineReadiness {
  const notActive: InactiveRank[] = [];
  let failed = false;
  for (const l of registry.listeners()) {
    for (const h of l.source.health()) {
      if (h.state === RankState.Active) continue;
      if (h.state === RankState.Failed) failed = true;
      notActive.push(inactive(l.instanceId, l.modelName, l.tenantId, l.endpoint, h));
    }
  }
  if (notActive.length === 0) return { ready: true, reason: '', lag: 0, not_active: notActive };
  const names = notActive.map((r) => `${r.instance_id}/${r.dp_rank} (${r.endpoint}) ${r.state}${r.reason === null ? '' : ` (${r.reason})`}`).join(', ');
  const ready = !failed && !strict;
  return { ready, reason: `${failed ? 'listener failed' : 'not active'}: ${names}`, lag: 0, not_active: notActive };
}

function inactive(instanceId: bigint, model: string, tenant: string, endpoint: string, h: RankHealth): InactiveRank {
  const out: InactiveRank = {
    instance_id: instanceId.toString(),
    model_name: model,
    tenant_id: tenant,
    dp_rank: h.rank,
    endpoint,
    state: h.state,
    reason: h.reason,
    since: isoTime(h.since),
  };
  if (h.readmitAt !== null) out.readmit_at = new Date(h.readmitAt).toISOString();
  if (h.engineBlockSize !== null) out.engine_block_size = h.engineBlockSize;
  return out;
}
