/**
 * Entry point of a shard thread, started and owned by piscina (one thread per pool). The first
 * piscina task hands over a MessagePort; from then on the shard is served over that port, which
 * measured several times faster than a piscina task per lookup (bench/shard.bench.ts keeps the
 * comparison: a task carrying `{ req }` is served by the same core, for that benchmark only).
 */
import type { MessagePort } from 'node:worker_threads';
import { threadId } from 'node:worker_threads';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import type { ShardInit, ShardRequest, ToShard } from '../src/shard/messages.js';
import { ShardCore } from '../src/shard/shard-core.js';

let core: ShardCore | null = null;

type Task = { port: MessagePort; init: ShardInit } | { req: ShardRequest };

export default function start(task: Task): unknown {
  if ('req' in task) {
    if (core === null) throw new KvIndexError(ErrorCode.ShardFailed, 'shard not started');
    return core.serveDirect(task.req);
  }
  const { port, init } = task;
  const c = new ShardCore(
    init,
    (msg, transfer) => port.postMessage(msg, transfer ?? []),
    () => process.exit(70),
  );
  core = c;
  port.on('message', (msg: ToShard) => c.handle(msg));
  return threadId;
}
