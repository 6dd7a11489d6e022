/**
 * Entry point of a shard thread, started and owned by piscina (one thread per pool). Its one
 * piscina task hands over a MessagePort; from then on the shard is served over that port only,
 * in the order the port delivers (see src/shard/wire/messages.ts). Lookups use the port rather
 * than a piscina task per lookup because a task would not be ordered behind the event batches
 * sent before it; the earlier channel benchmark also measured the task slower (2 shards, p99
 * 297 us against 194 us with port replies and 141 us with the product's shared-memory replies,
 * on a floor of 139 us), a margin of tens of microseconds, not a multiple.
 */
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import type { MessagePort } from 'node:worker_threads';
import { threadId } from 'node:worker_threads';
import type { ShardInit, ShardStarted, ToShard } from '../src/shard/wire/messages.js';
import { ShardCore } from '../src/shard/thread/shard-core.js';
import { warmUpShard } from '../src/shard/thread/warm-up.js';

export default function start(task: { port: MessagePort; init: ShardInit }): ShardStarted {
  const { port, init } = task;
  // Compile the apply path before the indexer is handed out (warm-up.ts: fresh ingest).
  if (init.warmUp) warmUpShard(init);
  const core = new ShardCore(init, (msg, transfer) => port.postMessage(msg, transfer ?? []));
  port.on('message', (msg: ToShard) => core.handle(msg));
  return { threadId, layout: core.layout, nice: applyNice(init.nice) };
}

/**
 * Gives this thread the niceness `nice`. Linux applies setpriority(2) to one thread when given
 * its kernel thread id, which /proc/thread-self names; elsewhere (or if refused) this returns
 * null and the thread keeps the process's priority.
 */
function applyNice(nice: number): number | null {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return null;
    if (nice > 0) setPriority(tid, nice);
    return getPriority(tid);
  } catch {
    return null;
  }
}
