/**
 * `kvindex serve`: a router-side indexer fed from NATS JetStream (`KvEventSubscriber`) that
 * answers findMatches over NATS request/reply (`KvQueryService`, format in docs/nats.md).
 * Logs are pino JSON lines on stderr; the line with msg "kvindex serve ready" says it consumes
 * and answers. SIGTERM or SIGINT: stop fetching, apply and ack what was delivered, close the
 * indexer, exit 0 (1 if the indexer failed while serving).
 */

import { parseArgs } from 'node:util';
import { pino, type Logger } from 'pino';
import { KvQueryService } from '../nats/query.js';
import { KvRouteService } from '../nats/route-service.js';
import { KvEventSubscriber } from '../nats/subscriber.js';
import { checkEncoding } from '../nats/snapshot.js';
import { reason } from '../nats/errors.js';
import { ShardedIndexer } from '../indexer/sharded-indexer.js';

const USAGE = `usage: kvindex serve [options]
  consume KV events from NATS JetStream into an index and answer findMatches requests
  --nats <url>               NATS server (default: $NATS_SERVER, else nats://127.0.0.1:4222)
  --namespace <ns>           Dynamo namespace (default: dynamo)
  --component <comp>         Dynamo component (default: backend)
  --shards <n>               shard threads; 0 indexes in the main thread (default: 0)
  --block-size <n>           tokens per block for token queries (default: 16)
  --snapshot-threshold <n>   snapshot and purge when the stream holds more messages (default: never;
                             Dynamo's default is 1000000)
  --encoding <enc>           snapshot layout: bincode (default, Dynamo's), bincode-dp, jsonl
  --reset-states             purge the stream and delete the snapshot bucket instead of loading it
  --parse-in-shards          shard threads parse the events (parallel; a malformed one is counted
                             in its shard and still logged at WARN with its exact stream sequence)
  --consumer <name>          durable consumer name (default: a random UUID)
  --keep-consumer            keep the durable consumer on exit (default: delete it, as Dynamo does)
  --max-age <s>              max_age of the stream when serve creates it (default: 3600)
  --connect-timeout <ms>     give up connecting to NATS after this long (default: 5000)
  --route-workers <ids>      also answer route, mark_prefill and free for these candidate workers
                             (u64 ids, comma-separated; KvRouter, see docs/routing.md)
  --log-level <level>        pino level: debug, info, warn, error (default: info)
  --http <[host:]port>       instead: the standalone indexer (ZMQ engine events, HTTP lookups);
                             see 'kvindex serve --http 0 --help'
  --help                     print this
requests: subject namespace-<ns>-component-<comp>.kvindex.find, body {"tokens":[...]} or
  {"hashes":["<u64>",...]}; reply {"scores":{"<worker_id>":n},"frequencies":[],"stream_seq":n}
`;

interface ServeArgs {
  nats: string | undefined;
  namespace: string;
  component: string;
  shards: number;
  blockSize: number;
  snapshotThreshold: number | null;
  encoding: ReturnType<typeof checkEncoding>;
  resetStates: boolean;
  parseInShards: boolean;
  consumer: string | undefined;
  keepConsumer: boolean;
  maxAgeS: number;
  connectTimeoutMs: number;
  logLevel: string;
  routeWorkers: bigint[] | null;
}

class UsageError extends Error {}

function parse(args: string[]): ServeArgs | 'help' {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: {
      nats: { type: 'string' },
      namespace: { type: 'string' },
      component: { type: 'string' },
      shards: { type: 'string' },
      'block-size': { type: 'string' },
      'snapshot-threshold': { type: 'string' },
      encoding: { type: 'string' },
      'reset-states': { type: 'boolean' },
      'parse-in-shards': { type: 'boolean' },
      consumer: { type: 'string' },
      'keep-consumer': { type: 'boolean' },
      'max-age': { type: 'string' },
      'connect-timeout': { type: 'string' },
      'log-level': { type: 'string' },
      'route-workers': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) return 'help';
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const int = (name: string, text: string | undefined, dflt: number, min: number): number => {
    if (text === undefined) return dflt;
    if (!/^[0-9]+$/.test(text) || Number(text) < min || !Number.isSafeInteger(Number(text))) {
      throw new UsageError(`--${name}: expected an integer >= ${min}, got '${text}'`);
    }
    return Number(text);
  };
  const level = values['log-level'] ?? 'info';
  if (!['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'].includes(level)) {
    throw new UsageError(`--log-level: expected debug, info, warn or error, got '${level}'`);
  }
  let encoding;
  try {
    encoding = checkEncoding(values.encoding ?? 'bincode', '--encoding');
  } catch (err) {
    throw new UsageError(reason(err));
  }
  return {
    nats: values.nats,
    namespace: values.namespace ?? 'dynamo',
    component: values.component ?? 'backend',
    shards: int('shards', values.shards, 0, 0),
    blockSize: int('block-size', values['block-size'], 16, 1),
    snapshotThreshold: values['snapshot-threshold'] === undefined ? null : int('snapshot-threshold', values['snapshot-threshold'], 0, 0),
    encoding,
    resetStates: values['reset-states'] === true,
    parseInShards: values['parse-in-shards'] === true,
    consumer: values.consumer,
    keepConsumer: values['keep-consumer'] === true,
    maxAgeS: int('max-age', values['max-age'], 3600, 1),
    connectTimeoutMs: int('connect-timeout', values['connect-timeout'], 5_000, 1),
    logLevel: level,
    routeWorkers: routeWorkersOf(values['route-workers']),
  };
}

function routeWorkersOf(text: string | undefined): bigint[] | null {
  if (text === undefined) return null;
  const ids = text.split(',');
  if (!ids.every((id) => /^[0-9]{1,20}$/.test(id) && BigInt(id) <= 0xffff_ffff_ffff_ffffn)) {
    throw new UsageError(`--route-workers: expected comma-separated u64 ids, got '${text}'`);
  }
  return ids.map((id) => BigInt(id));
}

export async function main(args: string[]): Promise<number> {
  // `--http` selects the standalone indexer (engine events over ZMQ, lookups over HTTP).
  if (args.some((x) => x === '--http' || x.startsWith('--http='))) return (await import('./serve-http.js')).main(args);
  let a: ServeArgs | 'help';
  try {
    a = parse(args);
  } catch (err) {
    process.stderr.write(`kvindex serve: ${reason(err)}\n${USAGE}`);
    return 2;
  }
  if (a === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  // Synchronous writes: the last lines before exit must not be lost.
  const logger = pino({ name: 'kvindex', level: a.logLevel }, pino.destination({ fd: 2, sync: true }));
  const indexer = await ShardedIndexer.create({ shards: a.shards, blockSize: a.blockSize, logger });
  let sub: KvEventSubscriber;
  try {
    sub = await KvEventSubscriber.start({
      indexer,
      namespace: a.namespace,
      component: a.component,
      ...(a.nats === undefined ? {} : { servers: a.nats }),
      ...(a.consumer === undefined ? {} : { consumerName: a.consumer }),
      snapshotThreshold: a.snapshotThreshold,
      encoding: a.encoding,
      resetStates: a.resetStates,
      parseInShards: a.parseInShards,
      keepConsumer: a.keepConsumer,
      streamMaxAgeS: a.maxAgeS,
      connectTimeoutMs: a.connectTimeoutMs,
      logger,
    });
  } catch (err) {
    logger.error({ code: (err as { code?: unknown }).code, err: reason(err) }, 'kvindex serve could not start');
    await indexer.close();
    return 1;
  }
  const query = KvQueryService.start(sub.connection, indexer, sub.names.querySubject, {
    appliedSeq: () => sub.lastAppliedSeq,
    logger,
  });
  const routes = a.routeWorkers === null ? null : KvRouteService.start(sub.connection, sub.names, {
    indexer,
    blockSize: a.blockSize,
    workers: a.routeWorkers.map((workerId) => ({ workerId, dpRank: 0 })),
    logger,
  });
  logger.info(
    {
      stream: sub.names.stream,
      routeSubject: routes?.subjects.route ?? null,
      consumer: sub.consumerName,
      querySubject: query.subject,
      bucket: sub.names.bucket,
      shards: a.shards,
      blockSize: a.blockSize,
      snapshotThreshold: a.snapshotThreshold,
      restored: sub.restored.outcome,
      restoredEvents: sub.restored.events,
      resumeAfter: sub.restored.resumeAfter,
    },
    'kvindex serve ready',
  );
  const outcome = await waitForStop(sub, logger);
  await query.stop();
  await routes?.stop();
  await sub.close();
  await indexer.close();
  logger.info({ ...sub.stats(), queries: query.stats() }, 'kvindex serve stopped');
  return outcome instanceof Error ? 1 : 0;
}

/** Resolves with the signal name, or with the error that stopped the subscriber. */
function waitForStop(sub: KvEventSubscriber, logger: Logger): Promise<string | Error> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      logger.info({ signal }, 'shutting down: stop fetching, apply and ack what was delivered');
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    void sub.whenStopped().then((err) => {
      if (err === null) return;
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      resolve(err);
    });
  });
}
