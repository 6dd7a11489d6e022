/** The two outputs of `kvindex replay`: the summary table and the `--json` object. */
import { ErrorCode } from '../errors.js';
import { INPUT_KIND_NAMES } from '../trace/input-kind.js';
import type { ReplaySummary } from './replay-summary.js';
import { formatBytes, formatInt, formatMs, formatPercent, formatRows, formatSi } from './table.js';

const round = (x: number | null, digits = 1): number | null => (x === null ? null : Number(x.toFixed(digits)));

/** The `--json` object: flat numbers (u64 values as strings), stable field names. */
export function replayJson(s: ReplaySummary): Record<string, unknown> {
  const out: Record<string, unknown> = {
    file: s.file,
    kind: s.kind,
    gzip: s.gzip,
    lines: s.lines,
    shards: s.shards,
    speed: s.speed,
    requests: s.requests,
    events: s.events,
    blocksStored: s.blocksStored,
    blocksRemoved: s.blocksRemoved,
    blocksMatched: s.blocksMatched,
    blockOps: s.blockOps,
    blockOpsPerSec: Math.round(s.blockOpsPerSec),
    indexerMs: round(s.indexerMs, 2),
    wallMs: round(s.wallMs, 1),
    lookups: s.lookups,
    lookupP50Us: round(s.lookupP50Us),
    lookupP99Us: round(s.lookupP99Us),
    lookupMaxUs: round(s.lookupMaxUs),
    hitRate: round(s.hitRate, 5),
    oracleHitRate: round(s.oracleHitRate, 5),
    dumpMs: round(s.dumpMs, 2),
    dumpEvents: s.dumpEvents,
    dumpBytes: s.dumpBytes,
    pairs: s.pairs,
    bytesPerPair: round(s.bytesPerPair, 2),
    applyStatus: s.applyStatus,
    badLines: s.badLines,
    badLineNumbers: s.badLineNumbers,
  };
  if (s.inputError !== null) out['inputError'] = { code: ErrorCode.CorruptInput, message: s.inputError };
  if (s.mismatches !== null) out['mismatches'] = s.mismatches;
  // Shard threads only, so the in-thread object stays as it was.
  if (s.readYourWrites !== null) out['readYourWrites'] = s.readYourWrites;
  if (s.lookupsEarly !== null) out['lookupsEarly'] = s.lookupsEarly;
  if (s.staleLookups !== null) out['staleLookups'] = s.staleLookups;
  if (s.callerMs !== null) out['callerMs'] = round(s.callerMs, 2);
  if (s.shardApplyMs !== null) out['shardApplyMs'] = round(s.shardApplyMs, 2);
  if (s.routing !== null) out['routing'] = s.routing;
  if (s.sim !== null) {
    const c = s.sim;
    out['sim'] = {
      workers: c.workers,
      cacheBlocks: c.cacheBlocks,
      blockSize: c.blockSize,
      subBlocks: c.subBlocks,
      seed: c.seed.toString(),
      workerIds: c.workerIds.map(String),
    };
  }
  return out;
}

/** The human summary printed without `--json`. */
export function replayTable(s: ReplaySummary): string {
  const rows: [string, string][] = [];
  const kind = s.kind === null ? 'no valid line' : INPUT_KIND_NAMES[s.kind];
  rows.push(['replay', `${s.file} (${kind}${s.gzip ? ', gzip' : ''}, ${formatInt(s.lines)} lines)`]);
  if (s.sim !== null) {
    const c = s.sim;
    rows.push(['fleet', `${c.workers} workers x ${formatInt(c.cacheBlocks)} blocks of ${c.blockSize} tokens, ${c.subBlocks} block${c.subBlocks === 1 ? '' : 's'} per trace block, seed ${c.seed}`]);
  }
  if (s.routing !== null) rows.push(['router', `KvRouter, temperature ${s.routing.temperature}, overlap credit ${s.routing.credit}`]);
  const pace = s.speed === null ? 'as fast as possible' : `timestamps / ${s.speed}`;
  rows.push(['indexer', `${s.shards === 0 ? 'in-thread' : `${s.shards} shard threads`}, ${pace}`]);
  rows.push(['', '']);
  rows.push(['requests', formatInt(s.requests)]);
  rows.push(['events', `${formatInt(s.events)}${s.cleared > 0 ? ` (${formatInt(s.cleared)} cleared)` : ''}`]);
  rows.push(['blocks stored', formatInt(s.blocksStored)]);
  rows.push(['blocks removed', formatInt(s.blocksRemoved)]);
  rows.push(['block-ops/s', `${formatSi(s.blockOpsPerSec)}  (${formatInt(s.blockOps)} stored + removed + matched blocks in ${formatMs(s.indexerMs)} of indexer time)`]);
  if (s.callerMs !== null && s.shardApplyMs !== null) {
    rows.push(['indexer time', `the longer of the calling thread inside indexer calls (${formatMs(s.callerMs)}) and the busiest shard applying events (${formatMs(s.shardApplyMs)}): they run in parallel`]);
  }
  if (s.lookups > 0) {
    rows.push(['lookup p50/p99/max', `${s.lookupP50Us!.toFixed(1)} / ${s.lookupP99Us!.toFixed(1)} / ${s.lookupMaxUs!.toFixed(1)} us  (${formatInt(s.lookups)} lookups)`]);
  } else {
    rows.push(['lookup p50/p99/max', 'no lookups in this input']);
  }
  if (s.lookupsEarly !== null) {
    rows.push(['reads', `lookups read the latest applied state (readYourWrites: false), as a router under load does; ${formatInt(s.lookupsEarly)} lookups answered before their shard applied the previous events`]);
  } else if (s.readYourWrites === true && s.lookups > 0) {
    rows.push(['reads', 'lookups waited until the shards applied the previous events (readYourWrites: true)']);
  }
  if (s.hitRate !== null && s.oracleHitRate !== null) {
    rows.push(['hit rate', `${formatPercent(s.hitRate)} chosen workers vs ${formatPercent(s.oracleHitRate)} oracle (block-weighted)`]);
  }
  if (s.mismatches !== null) {
    const truth = s.kind === 'workload' ? 'expected scores' : 'the simulated caches';
    const stale = s.staleLookups === null ? '' : `; ${formatInt(s.staleLookups)} more answered stale, right once their shard caught up`;
    rows.push(['mismatches', `${formatInt(s.mismatches)} lookups differ from ${truth}${stale}`]);
  }
  const st = s.applyStatus;
  const notOk = (Object.keys(st) as (keyof typeof st)[]).filter((k) => k !== 'ok' && st[k] > 0);
  rows.push(['apply status', `ok ${formatInt(st.ok)}${notOk.map((k) => `, ${k} ${formatInt(st[k])}`).join('')}`]);
  rows.push(['snapshot', `dump ${formatMs(s.dumpMs)}, ${formatBytes(s.dumpBytes)} in ${formatInt(s.dumpEvents)} events (bincode)`]);
  rows.push(['memory', s.bytesPerPair === null ? 'empty tree' : `${s.bytesPerPair.toFixed(1)} bytes per (worker, block) pair, ${formatInt(s.pairs)} pairs`]);
  let bad = formatInt(s.badLines);
  if (s.badLines > 0) {
    const more = s.badLines > s.badLineNumbers.length ? ', ...' : '';
    bad += ` (lines ${s.badLineNumbers.join(', ')}${more}; first: ${s.badLineReasons[0] ?? ''})`;
  }
  rows.push(['bad lines', bad]);
  if (s.inputError !== null) rows.push(['input cut short', `[${ErrorCode.CorruptInput}] ${s.inputError}`]);
  rows.push(['wall time', formatMs(s.wallMs)]);
  return formatRows(rows);
}
