/**
 * What `kvindex serve`'s per-worker bookkeeping (event-header.ts + WorkerActivity, for event-id
 * gaps, idle removal and the per-worker metrics) adds to the apply path of a NATS message:
 * `applyEventJsonOnCaller` alone against header read + observe + apply, on the same serde
 * messages (32 workers with 19-digit ids, stored chains of 16 blocks and removals), each variant
 * on a fresh in-thread indexer, alternating, median of the rounds. The metrics themselves are
 * read at scrape time and add nothing per message.
 */
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { readEventHeader, type EventHeader } from '../src/nats/event-header.js';
import { WorkerActivity } from '../src/nats/worker-activity.js';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { quiesce, runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

function messages(n: number): Uint8Array[] {
  const enc = new TextEncoder();
  const out: Uint8Array[] = [];
  const ids = new Map<bigint, bigint>();
  let hash = 1n;
  for (let i = 0; i < n; i++) {
    const worker = 7587889975016782855n + BigInt(i % 32);
    const eventId = ids.get(worker) ?? 0n;
    ids.set(worker, eventId + 1n);
    let ev: RouterEvent;
    if (i % 4 === 3) {
      ev = { workerId: worker, event: { eventId, data: { type: 'removed', blockHashes: [hash - 1n] } } };
    } else {
      const blocks = Array.from({ length: 16 }, () => {
        hash++;
        return { blockHash: hash * 2654435761n, tokensHash: hash * 40503n };
      });
      ev = { workerId: worker, event: { eventId, data: { type: 'stored', parentHash: null, blocks } } };
    }
    out.push(enc.encode(formatRouterEvent(ev)));
  }
  return out;
}

async function timeApply(msgs: Uint8Array[], track: boolean): Promise<number> {
  const ix = await ShardedIndexer.create({ shards: 0, blockSize: 16 });
  const h: EventHeader = { workerId: 0n, eventId: 0n, type: 0, dpRank: 0 };
  const wa = new WorkerActivity();
  await quiesce(100);
  const t0 = performance.now();
  for (const m of msgs) {
    ix.applyEventJsonOnCaller(m);
    if (track && readEventHeader(m, h)) wa.observe(h.workerId, h.dpRank, h.eventId, Date.now());
  }
  await ix.flush();
  const ms = performance.now() - t0;
  await ix.close();
  return (ms * 1e6) / msgs.length;
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const msgs = messages(opts.quick ? 5_000 : 40_000);
  const rounds = opts.quick ? 3 : 7;
  const plain: number[] = [];
  const tracked: number[] = [];
  // Warm-up of both paths, not timed.
  await timeApply(msgs.slice(0, 2_000), false);
  await timeApply(msgs.slice(0, 2_000), true);
  for (let r = 0; r < rounds; r++) {
    plain.push(await timeApply(msgs, false));
    tracked.push(await timeApply(msgs, true));
  }
  const median = (a: number[]): number => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
  const p = median(plain);
  const t = median(tracked);
  const rows = [
    { variant: 'applyEventJsonOnCaller', 'ns/msg (median)': Math.round(p), percent: '' },
    { variant: '+ readEventHeader + observe', 'ns/msg (median)': Math.round(t), percent: '' },
    { variant: 'overhead', 'ns/msg (median)': Math.round(t - p), percent: `${(((t - p) / p) * 100).toFixed(1)} %` },
  ];
  return {
    title: 'Per-worker bookkeeping on the NATS apply path',
    markdown: `${msgs.length.toLocaleString('en-US')} messages (3/4 stored chains of 16 blocks, 1/4 removals, 32 workers), ${rounds} rounds alternating.\n\n${table(rows)}`,
    rows,
  };
}

runIfMain(import.meta.url, run);
