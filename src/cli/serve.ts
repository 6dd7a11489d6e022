/**
 * `kvindex serve`: a router-side indexer fed from NATS JetStream (`KvEventSubscriber`) that
 * answers findMatches over NATS request/reply (`KvQueryService`, format in docs/nats.md).
 * Logs are pino JSON lines on stderr; the line with msg "kvindex serve ready" says it consumes
 * and answers. SIGTERM or SIGINT: stop fetching, apply and ack what was delivered, close the
 * indexer, exit 0 (1 if the indexer failed while serving), within 1 s (shutdown.ts).
 */

import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { KvQueryService } from '../nats/query.js';
import { KvRouteService } from '../nats/route-service.js';
import { KvEventSubscriber } from '../nats/subscriber.js';
import { checkEncoding } from '../nats/snapshot.js';
import { leaseMsProblem } from '../nats/snapshot-lease.js';
import { errorFields, reason } from '../nats/errors.js';
import { MAX_NANOS_S, MAX_TIMER_MS } from '../protocol/time-limits.js';
import { ErrorCode, KvIndexError } from '../errors.js';
import type { NatsAuthOptions } from '../nats/auth.js';
import { ShardedIndexer } from '../indexer/sharded-indexer.js';
import { startAdminService } from '../nats/admin.js';
import { ServeMetrics } from '../serve/metrics.js';
import { parseListenAddress, startOpsServer, type OpsServer } from '../serve/ops-server.js';
import { Shutdown } from './shutdown.js';
import { logLevelArg, UsageError } from './usage.js';
import { NATS_AUTH_FLAGS, NATS_AUTH_USAGE, natsAuthFromFlags } from './nats-options.js';

/** Content type of an empty scrape before start-up completes (prom-client's). */
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';

const USAGE = `usage: kvindex serve [options]
  consume KV events from NATS JetStream into an index and answer findMatches requests
  --nats <url>               NATS server (default: $NATS_SERVER, else nats://127.0.0.1:4222);
                             nats://user:pass@host:port and nats://token@host:port carry credentials
                             (never logged)
${NATS_AUTH_USAGE}  --namespace <ns>           Dynamo namespace (default: dynamo)
  --component <comp>         Dynamo component (default: backend)
  --shards <n>               shard threads; 0 indexes in the main thread (default: 0)
  --block-size <n>           tokens per block for token queries (default: 16)
  --keep-warm-ms <ms>        while no lookup comes, look up the latest request's first blocks again
                             every <ms> (1..60000; 0: off) so that the next request finds the
                             caches warm; stops after 1 s without lookups (default: 1)
  --snapshot-threshold <n>   snapshot and purge when the stream holds more messages (default: never;
                             Dynamo's default is 1000000)
  --encoding <enc>           snapshot layout: bincode (default, Dynamo's), bincode-dp, jsonl
  --snapshot-lease-ms <ms>   one router at a time snapshots: the lease (a NATS KV key) lasts at
                             most <ms> if its router dies (0: no lease; else >= 1000; default 60000)
  --reset-states             purge the stream and delete the snapshot bucket instead of loading it
  --parse-in-shards          shard threads parse the events (parallel; a malformed one is counted
                             in its shard and still logged at WARN with its exact stream sequence)
  --consumer <name>          durable consumer name (default: a random UUID)
  --keep-consumer            keep the durable consumer on exit (default: delete it, as Dynamo does)
  --consumer-inactive-threshold <s>
                             the server deletes this router's consumer after this long without a
                             pull, e.g. after a crash, so it stops holding back purges (default: 60;
                             Dynamo's is 3600)
  --max-age <s>              max_age of the stream when serve creates it (default: 3600)
  --connect-timeout <ms>     give up connecting to NATS after this long, whatever the address does
                             (default: 5000); refused credentials or failed TLS end start-up at once
  --metrics <host:port>      serve GET /metrics (Prometheus), /health, /ready and
                             DELETE /workers/<id> over HTTP (host defaults to 127.0.0.1; port 0
                             picks one, logged in the ready line)
  --metrics-max-workers <n>  per-worker metric series, the most recently active (default: 64; 0: none)
  --ready-max-lag <n>        /ready is 200 once at most this many stream messages are unapplied
                             (default: 100)
  --worker-idle-timeout <s>  remove a worker from the index after this long without an event
                             (default: never)
  --on-bad-snapshot <mode>   fail (default): a snapshot that cannot be read stops start-up;
                             skip: start from what the stream still holds, log that the index is
                             partial, not ready until this router takes a new snapshot
  --route-workers <ids>      also answer route, mark_prefill and free for these candidate workers
                             (u64 ids, comma-separated; KvRouter, see docs/routing.md)
  --log-level <level>        pino level: debug, info, warn, error (default: info)
  --http <[host:]port>       instead: the standalone indexer (ZMQ engine events, HTTP lookups);
                             see 'kvindex serve --http 0 --help'
  --help                     print this
requests: subject namespace-<ns>-component-<comp>.kvindex.find, body {"tokens":[...]} or
  {"hashes":["<u64>",...]}; reply {"scores":{"<worker_id>":n},"frequencies":[],"stream_seq":n}
admin: subject namespace-<ns>-component-<comp>.kvindex.remove_worker, body {"worker_id":"<u64>"};
  reply {"removed":"<u64>","known":bool}
`;

interface ServeArgs {
  nats: string | undefined;
  auth: NatsAuthOptions;
  namespace: string;
  component: string;
  shards: number;
  blockSize: number;
  keepWarmMs: number | null;
  snapshotThreshold: number | null;
  snapshotLeaseMs: number | null;
  encoding: ReturnType<typeof checkEncoding>;
  resetStates: boolean;
  parseInShards: boolean;
  consumer: string | undefined;
  keepConsumer: boolean;
  consumerInactiveS: number;
  metrics: { host: string; port: number } | null;
  metricsMaxWorkers: number;
  readyMaxLag: number;
  workerIdleMs: number | null;
  onBadSnapshot: 'fail' | 'skip';
  maxAgeS: number;
  connectTimeoutMs: number;
  logLevel: string;
  routeWorkers: bigint[] | null;
}

function parse(args: string[]): ServeArgs | 'help' {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: {
      nats: { type: 'string' },
      ...NATS_AUTH_FLAGS,
      namespace: { type: 'string' },
      component: { type: 'string' },
      shards: { type: 'string' },
      'block-size': { type: 'string' },
      'keep-warm-ms': { type: 'string' },
      'snapshot-threshold': { type: 'string' },
      'snapshot-lease-ms': { type: 'string' },
      encoding: { type: 'string' },
      'reset-states': { type: 'boolean' },
      'parse-in-shards': { type: 'boolean' },
      consumer: { type: 'string' },
      'keep-consumer': { type: 'boolean' },
      'consumer-inactive-threshold': { type: 'string' },
      metrics: { type: 'string' },
      'metrics-max-workers': { type: 'string' },
      'ready-max-lag': { type: 'string' },
      'worker-idle-timeout': { type: 'string' },
      'on-bad-snapshot': { type: 'string' },
      'max-age': { type: 'string' },
      'connect-timeout': { type: 'string' },
      'log-level': { type: 'string' },
      'route-workers': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) return 'help';
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const int = (name: string, text: string | undefined, dflt: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    if (text === undefined) return dflt;
    if (!/^[0-9]+$/.test(text) || Number(text) < min || Number(text) > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
      throw new UsageError(`--${name}: expected an integer ${range}, got '${text}'`);
    }
    return Number(text);
  };
  const level = logLevelArg(values['log-level']);
  let encoding;
  try {
    encoding = checkEncoding(values.encoding ?? 'bincode', '--encoding');
  } catch (err) {
    throw new UsageError(reason(err));
  }
  const auth = natsAuthFromFlags(values);
  const onBad = values['on-bad-snapshot'] ?? 'fail';
  if (onBad !== 'fail' && onBad !== 'skip') throw new UsageError(`--on-bad-snapshot: expected fail or skip, got '${onBad}'`);
  let metrics: ServeArgs['metrics'] = null;
  if (values.metrics !== undefined) {
    try {
      metrics = parseListenAddress(values.metrics);
    } catch (err) {
      throw new UsageError(`--${reason(err)}`);
    }
  }
  const snapshotLeaseMs = values['snapshot-lease-ms'] === undefined ? null : int('snapshot-lease-ms', values['snapshot-lease-ms'], 0, 0, MAX_TIMER_MS);
  const leaseProblem = snapshotLeaseMs === null ? null : leaseMsProblem(snapshotLeaseMs);
  if (leaseProblem !== null) throw new UsageError(`--snapshot-lease-ms: ${leaseProblem}, got '${snapshotLeaseMs}'`);
  const keepWarmMs = values['keep-warm-ms'] === undefined ? null : int('keep-warm-ms', values['keep-warm-ms'], 0, 0);
  if (keepWarmMs !== null && keepWarmMs > 60_000) throw new UsageError(`--keep-warm-ms: expected at most 60000, got '${keepWarmMs}'`);
  const idleS = values['worker-idle-timeout'] === undefined ? null : int('worker-idle-timeout', values['worker-idle-timeout'], 0, 1);
  return {
    nats: values.nats,
    auth,
    metrics,
    metricsMaxWorkers: int('metrics-max-workers', values['metrics-max-workers'], 64, 0),
    readyMaxLag: int('ready-max-lag', values['ready-max-lag'], 100, 0),
    workerIdleMs: idleS === null ? null : idleS * 1000,
    onBadSnapshot: onBad,
    namespace: values.namespace ?? 'dynamo',
    component: values.component ?? 'backend',
    shards: int('shards', values.shards, 0, 0),
    blockSize: int('block-size', values['block-size'], 16, 1),
    keepWarmMs,
    snapshotThreshold: values['snapshot-threshold'] === undefined ? null : int('snapshot-threshold', values['snapshot-threshold'], 0, 0),
    snapshotLeaseMs,
    encoding,
    resetStates: values['reset-states'] === true,
    parseInShards: values['parse-in-shards'] === true,
    consumer: values.consumer,
    keepConsumer: values['keep-consumer'] === true,
    // Durations the server keeps as int64 nanoseconds, and a timer's ms (Node fires a larger
    // one at once): past those, serve failed with the server's "invalid json" or never
    // connected (found by fuzzing).
    consumerInactiveS: int('consumer-inactive-threshold', values['consumer-inactive-threshold'], 60, 1, MAX_NANOS_S),
    maxAgeS: int('max-age', values['max-age'], 3600, 1, MAX_NANOS_S),
    connectTimeoutMs: int('connect-timeout', values['connect-timeout'], 5_000, 1, MAX_TIMER_MS),
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
  const shutdown = new Shutdown(logger);
  const indexer = await ShardedIndexer.create({
    shards: a.shards, blockSize: a.blockSize, logger, ...(a.keepWarmMs === null ? {} : { keepWarmMs: a.keepWarmMs }),
  });
  // The HTTP server starts first: /health must answer during a long connect or snapshot restore
  // (a liveness probe would otherwise kill a router that is only loading), /ready says 503.
  let started: { sub: KvEventSubscriber; metrics: ServeMetrics } | null = null;
  let http: OpsServer | null = null;
  if (a.metrics !== null) {
    try {
      http = await startOpsServer(
        a.metrics,
        {
          metrics: { scrape: () => (started === null ? Promise.resolve({ contentType: PROMETHEUS_TEXT, body: '' }) : started.metrics.scrape()) },
          readiness: () => started?.sub.readiness() ?? { ready: false, reason: 'starting: connecting to NATS and restoring the snapshot', lag: 0 },
          removeWorker: (id) => (started === null ? Promise.reject(new KvIndexError(ErrorCode.Closed, 'not started yet')) : started.sub.removeWorker(id)),
        },
        logger,
      );
    } catch (err) {
      logger.error({ ...errorFields(err), address: a.metrics }, 'kvindex serve could not start its metrics server');
      await indexer.close();
      return 1;
    }
    logger.info({ metricsUrl: http.url }, 'metrics, health and readiness served over HTTP');
  }
  let sub: KvEventSubscriber;
  try {
    sub = await KvEventSubscriber.start({
      indexer,
      namespace: a.namespace,
      component: a.component,
      ...(a.nats === undefined ? {} : { servers: a.nats }),
      auth: a.auth,
      ...(a.consumer === undefined ? {} : { consumerName: a.consumer }),
      snapshotThreshold: a.snapshotThreshold,
      ...(a.snapshotLeaseMs === null ? {} : { snapshotLeaseMs: a.snapshotLeaseMs }),
      encoding: a.encoding,
      resetStates: a.resetStates,
      parseInShards: a.parseInShards,
      keepConsumer: a.keepConsumer,
      consumerInactiveThresholdS: a.consumerInactiveS,
      onBadSnapshot: a.onBadSnapshot,
      readyMaxLag: a.readyMaxLag,
      workerIdleMs: a.workerIdleMs,
      streamMaxAgeS: a.maxAgeS,
      connectTimeoutMs: a.connectTimeoutMs,
      logger,
    });
  } catch (err) {
    logger.error(errorFields(err), 'kvindex serve could not start');
    await http?.close();
    await indexer.close();
    // A socket some library left open must not hold the exit for the OS's connect timeout.
    setTimeout(() => process.exit(1), 200).unref();
    return 1;
  }
  const routes = a.routeWorkers === null ? null : KvRouteService.start(sub.connection, sub.names, {
    indexer,
    blockSize: a.blockSize,
    workers: a.routeWorkers.map((workerId) => ({ workerId, dpRank: 0 })),
    logger,
  });
  const metrics = new ServeMetrics({ subscriber: sub, indexer, namespace: a.namespace, component: a.component, maxWorkerSeries: a.metricsMaxWorkers, routes });
  const query = KvQueryService.start(sub.connection, indexer, sub.names.querySubject, {
    appliedSeq: () => sub.lastAppliedSeq,
    onLookup: (ms) => metrics.observeLookup(ms),
    logger,
  });
  const admin = startAdminService(sub.connection, sub.names.adminRemoveWorkerSubject, (id) => sub.removeWorker(id), logger);
  sub.onReadinessChange((r) => logger.info({ ready: r.ready, reason: r.reason, lag: r.lag }, r.ready ? 'index ready' : 'index not ready'));
  started = { sub, metrics };
  logger.info(
    {
      stream: sub.names.stream,
      routeSubject: routes?.subjects.route ?? null,
      consumer: sub.consumerName,
      querySubject: query.subject,
      adminSubject: sub.names.adminRemoveWorkerSubject,
      metricsUrl: http?.url ?? null,
      readiness: sub.readiness().reason,
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
  shutdown.serving();
  const outcome = await Promise.race([shutdown.signalled(), sub.whenStopped().then((err) => err ?? new Promise<never>(() => undefined))]);
  if (outcome instanceof Error) shutdown.begin('the subscriber failed');
  else logger.info({ signal: outcome }, 'shutting down: stop fetching, apply and ack what was delivered');
  await shutdown.step('close the metrics listener', async () => http?.close());
  await shutdown.step('drain the admin service', () => admin.drain().catch(() => undefined));
  await shutdown.step('stop the query service', () => query.stop());
  await shutdown.step('stop the route service', async () => routes?.stop());
  await shutdown.step('close the subscriber (apply and ack what was delivered)', () => sub.close());
  await shutdown.step('close the indexer', () => indexer.close());
  logger.info({ ...sub.stats(), queries: query.stats() }, 'kvindex serve stopped');
  return shutdown.finished(outcome instanceof Error ? 1 : 0);
}
