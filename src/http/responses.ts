/**
 * The response bodies of the standalone indexer API as JSON text, written by hand so that u64
 * worker ids and hashes are exact (`JSON.stringify` cannot write a bigint, and a `number`
 * would round it). Layouts are Dynamo's (`lib/kv-router/src/standalone_indexer/server.rs`).
 */

import { formatRouterEvent } from '../protocol/json-format.js';
import type { EngineScores, RankMap } from '../zmq/engine-index.js';
import type { IndexEntry, ListenerEntry } from './engine-registry.js';
import { RankState, worstRank, type RankHealth } from '../zmq/source-health.js';
import { isoTime } from './engine-readiness.js';

/** `{"<worker>":{"<rank>":n*scale}}`. */
function rankMap(m: RankMap, scale: number): string {
  const parts: string[] = [];
  for (const [worker, ranks] of m) {
    const inner: string[] = [];
    for (const [rank, n] of ranks) inner.push(`"${rank}":${n * scale}`);
    parts.push(`"${worker}":{${inner.join(',')}}`);
  }
  return `{${parts.join(',')}}`;
}

/**
 * `{"scores":{"<worker_id>":{"<dp_rank>":matched_tokens}},"frequencies":[...],
 * "tree_sizes":{"<worker_id>":{"<dp_rank>":blocks}}}`: scores are blocks x block size, as
 * Dynamo's. When a lower storage tier matched, `"lower_tier_scores":{"<tier>":{...}}` (tokens)
 * is added; Dynamo's clients ignore keys they do not know.
 */
export function scoresJson(r: EngineScores, blockSize: number): string {
  let out = `{"scores":${rankMap(r.scores, blockSize)},"frequencies":[${r.frequencies.join(',')}],"tree_sizes":${rankMap(r.treeSizes, 1)}`;
  if (r.lowerTiers.size > 0) {
    const tiers: string[] = [];
    for (const [tier, m] of r.lowerTiers) tiers.push(`"${tier}":${rankMap(m, blockSize)}`);
    out += `,"lower_tier_scores":{${tiers.join(',')}}`;
  }
  return `${out}}`;
}

const STATUS_ORDER = ['failed', 'pending', 'active', 'paused'];

/**
 * Dynamo's listener status for a rank state: a rank that is connecting or excluded does not
 * count in scores yet, as Dynamo's `pending` listener (one that waits for recovery) does not.
 */
function dynamoStatus(state: RankState): string {
  return state === RankState.Connecting || state === RankState.Excluded ? 'pending' : state;
}

/** `,"state":..,"reason":..,"since":..(,"readmit_at",..)(,"engine_block_size":n)`: kvindex's fields. */
function stateFields(h: RankHealth): string {
  let out = `,"state":"${h.state}","reason":${JSON.stringify(h.reason)},"since":${JSON.stringify(isoTime(h.since))}`;
  if (h.readmitAt !== null) out += `,"readmit_at":${JSON.stringify(isoTime(h.readmitAt))}`;
  if (h.engineBlockSize !== null) out += `,"engine_block_size":${h.engineBlockSize}`;
  return out;
}

/**
 * `[{"instance_id":u64,"model_name":..,"tenant_id":..,"source":"zmq","status":...,"state":...,
 * "endpoints":{"<rank>":ep},"listeners":{"<rank>":{"endpoint","status","last_error"?,"state",
 * "reason","since","readmit_at"?,"engine_block_size"?}}}]`, one item per (instance, model,
 * tenant), instances ascending, then model and tenant; the status is the worst of its listeners
 * (failed > pending > active > paused). `status` keeps Dynamo's words (connecting and excluded
 * ranks are `pending`); `state` is kvindex's (active, connecting, excluded, failed: the worst of
 * the listener's ranks, src/zmq/source-health.ts) with its reason and since when (ISO 8601).
 * A listener recovered from a peer at start-up adds to its item `"recovered_from":"<peer url>"`
 * and `"approximate":bool` (true: the peer's dump said no engine seq for it: peer-recovery.ts).
 * (Items were per instance only: an instance registered for two models or tenants wrote each
 * rank key twice, which a JSON parser reads as one; found by fuzzing.)
 */
export function workersJson(listeners: ListenerEntry[]): string {
  const groups = new Map<string, ListenerEntry[]>();
  for (const l of listeners) {
    const k = JSON.stringify([l.instanceId.toString(), l.modelName, l.tenantId]);
    const list = groups.get(k);
    if (list === undefined) groups.set(k, [l]);
    else list.push(l);
  }
  const order = (a: ListenerEntry, b: ListenerEntry): number =>
    a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : a.modelName < b.modelName ? -1 : a.modelName > b.modelName ? 1 : a.tenantId < b.tenantId ? -1 : a.tenantId > b.tenantId ? 1 : 0;
  const sorted = [...groups.values()].sort((a, b) => order(a[0]!, b[0]!));
  const items = sorted.map((group) => {
    const first = group[0]!;
    const id = first.instanceId;
    const ls = group.sort((a, b) => a.dpRank - b.dpRank);
    const healths = ls.map((l) => worstRank(l.source.health()));
    const statuses = healths.map((h) => dynamoStatus(h.state));
    const status = STATUS_ORDER.find((s) => statuses.includes(s)) ?? 'active';
    const endpoints = ls.map((l) => `"${l.dpRank}":${JSON.stringify(l.endpoint)}`).join(',');
    const listenersText = ls
      .map((l, i) => {
        const err = l.source.lastError;
        const h = healths[i]!;
        return `"${l.dpRank}":{"endpoint":${JSON.stringify(l.endpoint)},"status":"${dynamoStatus(h.state)}"${err === null ? '' : `,"last_error":${JSON.stringify(err)}`}${stateFields(h)}}`;
      })
      .join(',');
    const state = worstRank(healths).state;
    const rec = ls.find((l) => l.recovery !== null)?.recovery ?? null;
    const approximate = ls.some((l) => l.recovery !== null && !l.recovery.exact);
    const recovered = rec === null ? '' : `,"recovered_from":${JSON.stringify(rec.from)},"approximate":${approximate}`;
    return `{"instance_id":${id},"model_name":${JSON.stringify(first.modelName)},"tenant_id":${JSON.stringify(first.tenantId)},"source":"zmq","status":"${status}","state":"${state}","endpoints":{${endpoints}},"listeners":{${listenersText}}${recovered}}`;
  });
  return `[${items.join(',')}]`;
}

/**
 * `{"<model>:<tenant>":{"block_size":n,"events":[RouterEvent...],"model_name":..,"tenant_id":..,
 * "listeners":[...]}}`, events in Dynamo's serde JSON. `model_name`, `tenant_id` and
 * `listeners` are kvindex's (Dynamo's clients ignore them): each registered listener of the
 * (model, tenant) as `{"instance_id":u64,"dp_rank":n,"endpoint":..,"replay_endpoint":..|null,
 * "seq":u64|null,"ranks":[n...]}`, `seq` the last engine seq the events reflect (null: none
 * applied yet, or a rank excluded after a gap) and `ranks` the ranks its batches were filed
 * under. Written in one synchronous turn, so events and seqs agree (docs/http-api.md).
 */
export function dumpJson(indexes: IndexEntry[], listeners: ListenerEntry[] = []): string {
  const parts = indexes.map((e) => {
    const events = e.index.dumpEvents().map(formatRouterEvent).join(',');
    const mine = listeners.filter((l) => l.modelName === e.modelName && l.tenantId === e.tenantId).map((l) => {
      const p = l.source.position();
      return `{"instance_id":${l.instanceId},"dp_rank":${l.dpRank},"endpoint":${JSON.stringify(l.endpoint)},"replay_endpoint":${JSON.stringify(l.replayEndpoint)},"seq":${p === null ? 'null' : p.seq},"ranks":[${p === null ? '' : p.ranks.join(',')}]}`;
    });
    return `${JSON.stringify(`${e.modelName}:${e.tenantId}`)}:{"block_size":${e.index.blockSize},"events":[${events}],"model_name":${JSON.stringify(e.modelName)},"tenant_id":${JSON.stringify(e.tenantId)},"listeners":[${mine.join(',')}]}`;
  });
  return `{${parts.join(',')}}`;
}
