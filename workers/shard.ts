/**
 * Entry point of a shard thread, started and owned by piscina (one thread per pool). The first
 * and only piscina task hands over a MessagePort; from then on the shard is served over that
 * port, which measured faster than a piscina task per lookup (bench/shard.bench.ts).
 */
import type { MessagePort } from 'node:worker_threads';
import { threadId } from 'node:worker_threads';
import type { ShardInit, ToShard } from '../src/shard/messages.js';
import { ShardCore } from '../src/shard/shard-core.js';

export default function start(task: { port: MessagePort; init: ShardInit }): number {
  const { port, init } = task;
  const core = new ShardCore(
    init,
    (msg, transfer) => port.postMessage(msg, transfer ?? []),
    () => process.exit(70),
  );
  port.on('message', (msg: ToShard) => core.handle(msg));
  return threadId;
}
