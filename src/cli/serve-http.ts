/**
 * `kvindex serve --http <host:port>`: the standalone indexer. Engines (vLLM, SGLang) are
 * registered over HTTP (`POST /register`), their KV events consumed over ZMQ into one index
 * per (model, tenant), and lookups answered over HTTP with Dynamo's standalone indexer API
 * (docs/http-api.md). No NATS. Listens on 127.0.0.1 unless a host is given. Logs are pino JSON
 * lines on stderr; the line with msg "kvindex serve ready" carries the bound `address`.
 * SIGTERM or SIGINT: stop the listeners and the server, exit 0, within 1 s (shutdown.ts).
 */

import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { EngineRegistry } from '../http/engine-registry.js';
import { engineReadiness, type EngineReadiness } from '../http/engine-readiness.js';
import { registerIndexerRoutes, TOKEN_ROUTES } from '../http/indexer-routes.js';
import { parseListenAddress, startOpsServer, type OpsServer } from '../serve/ops-server.js';
import { quietFastify } from '../serve/quiet-fastify.js';
import { MAX_TIMER_MS } from '../protocol/time-limits.js';
import { ZmqServeMetrics } from '../serve/zmq-metrics.js';
import { Shutdown } from './shutdown.js';
import { warnIfZmqMissing } from './zmq-missing.js';
import { checkPeerUrl, PeerList } from '../http/peer-list.js';
import { PeerRecovery } from '../http/peer-recovery.js';
import { RegistrationForwarder } from '../http/peer-forward.js';
import { logLevelArg, UsageError } from './usage.js';

export const HTTP_USAGE = `usage: kvindex serve --http <[host:]port> [options]
  standalone indexer: engine KV events over ZMQ (vLLM, SGLang), lookups over HTTP
  (Dynamo's standalone indexer API: /register /unregister /workers /query /query_by_hash /dump /health,
  and kvindex's /route /mark_prefill /free)
  --http <[host:]port>       listen address (host default 127.0.0.1: loopback only)
  --token <t>                bearer token required by ${TOKEN_ROUTES.join(' ')}
                             (default: $KVINDEX_TOKEN; none: unguarded)
  --peers <url,...>          other replicas (http(s) URLs, comma-separated): at start, take the
                             first reachable one's /dump (index, registrations, engine seqs)
                             before /ready; /register and /unregister are forwarded to them
                             (with this --token); served by GET /peers, changed by POST
                             /register_peer and /deregister_peer
  --peer-dump <binary|json>  the dump asked of a peer at start (default: binary, kvindex's own,
                             ~4x smaller and loaded without JSON; a Dynamo peer answers JSON
                             whatever is asked)
  --topic <prefix>           ZMQ topic filter of every listener (default: '', all topics)
  --replay-timeout <ms>      wait per replay message before a gap counts as unreplayable (default: 2000)
  --readmit-after <s|never>  seconds after an unreplayable gap before the worker counts in scores
                             again from what it published since (default: 30; never: only the
                             engine's AllBlocksCleared or a restart brings it back)
  --ready-strict             /ready answers 503 while any registered rank is not active
                             (default: 503 only for a failed listener; others are named in a 200)
  --metrics <host:port>      serve GET /metrics (Prometheus), /health and /ready on their own
                             listener (host defaults to 127.0.0.1; port 0 picks one, logged)
  --log-level <level>        pino level: debug, info, warn, error (default: info)
  --help                     print this
`;

interface HttpArgs {
  host: string;
  port: number;
  token: string | null;
  topic: string;
  replayTimeoutMs: number;
  readmitAfterMs: number | null;
  readyStrict: boolean;
  logLevel: string;
  metrics: { host: string; port: number } | null;
  peers: string[];
  peerDump: 'binary' | 'json';
}

function parse(args: string[]): HttpArgs | 'help' {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: {
      http: { type: 'string' },
      token: { type: 'string' },
      topic: { type: 'string' },
      'replay-timeout': { type: 'string' },
      'readmit-after': { type: 'string' },
      'ready-strict': { type: 'boolean' },
      'log-level': { type: 'string' },
      metrics: { type: 'string' },
      peers: { type: 'string' },
      'peer-dump': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) return 'help';
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const m = /^(?:(\[[0-9a-fA-F:.]+\]|[^:\s]+):)?(\d{1,5})$/.exec(values.http ?? '');
  if (m === null || Number(m[2]) > 65535) throw new UsageError(`--http: expected [host:]port, got '${values.http ?? ''}'`);
  const timeout = values['replay-timeout'] ?? '2000';
  // A timer's ms: Node fires a longer one at once.
  if (!/^[0-9]+$/.test(timeout) || Number(timeout) < 1 || Number(timeout) > MAX_TIMER_MS) {
    throw new UsageError(`--replay-timeout: expected an integer from 1 to ${MAX_TIMER_MS}, got '${timeout}'`);
  }
  const readmit = values['readmit-after'] ?? '30';
  if (readmit !== 'never' && (!/^[0-9]+$/.test(readmit) || Number(readmit) * 1000 > MAX_TIMER_MS)) {
    throw new UsageError(`--readmit-after: expected 'never' or whole seconds from 0 to ${Math.floor(MAX_TIMER_MS / 1000)}, got '${readmit}'`);
  }
  const level = logLevelArg(values['log-level']);
  let metrics: HttpArgs['metrics'] = null;
  if (values.metrics !== undefined) {
    try {
      metrics = parseListenAddress(values.metrics);
    } catch (err) {
      throw new UsageError(`--metrics: ${(err as Error).message}`);
    }
  }
  const peers: string[] = [];
  for (const url of (values.peers ?? '').split(',')) {
    if (url.trim() === '') continue;
    try {
      peers.push(checkPeerUrl(url.trim(), '--peers'));
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  const peerDump = values['peer-dump'] ?? 'binary';
  if (peerDump !== 'binary' && peerDump !== 'json') throw new UsageError(`--peer-dump: expected binary or json, got '${peerDump}'`);
  const token = values.token ?? process.env.KVINDEX_TOKEN ?? '';
  return {
    host: (m[1] ?? '127.0.0.1').replace(/^\[|\]$/g, ''),
    port: Number(m[2]),
    token: token === '' ? null : token,
    topic: values.topic ?? '',
    replayTimeoutMs: Number(timeout),
    readmitAfterMs: readmit === 'never' ? null : Number(readmit) * 1000,
    readyStrict: values['ready-strict'] === true,
    logLevel: level,
    metrics,
    peers,
    peerDump,
  };
}

export async function main(args: string[]): Promise<number> {
  let a: HttpArgs | 'help';
  try {
    a = parse(args);
  } catch (err) {
    process.stderr.write(`kvindex serve: ${(err as Error).message}\n${HTTP_USAGE}`);
    return 2;
  }
  if (a === 'help') {
    process.stdout.write(HTTP_USAGE);
    return 0;
  }
  const logger = pino({ name: 'kvindex', level: a.logLevel }, pino.destination({ fd: 2, sync: true }));
  const shutdown = new Shutdown(logger);
  await warnIfZmqMissing(logger);
  const registry = new EngineRegistry({ logger, topic: a.topic, replayTimeoutMs: a.replayTimeoutMs, readmitAfterMs: a.readmitAfterMs });
  const peers = new PeerList(a.peers);
  const recovery = new PeerRecovery({ registry, peers, logger, dump: a.peerDump });
  const forwarder = new RegistrationForwarder({ peers, token: a.token, logger });
  // Until the recovery from a peer has ended, not ready, whatever the engines' states.
  const readiness = (): EngineReadiness =>
    recovery.ready ? engineReadiness(registry, a.readyStrict) : { ready: false, reason: recovery.reason, lag: 0, not_active: [] };
  const app = quietFastify(logger);
  const metrics = a.metrics === null ? null : new ZmqServeMetrics(registry);
  await registerIndexerRoutes(app, registry, {
    token: a.token,
    readiness,
    peers,
    gate: () => recovery.gate(),
    forward: (path, body) => forwarder.forward(path, body),
    onPeerChange: (change, url) => logger.info({ peer: url, peers: peers.size }, `peer ${change}`),
    ...(metrics === null ? {} : {
      onQuery: (route: string, ms: number) => metrics.observeQuery(route, ms),
      onError: (route: string, status: number) => metrics.observeError(route, status),
    }),
  });
  let ops: OpsServer | null = null;
  if (metrics !== null && a.metrics !== null) {
    try {
      ops = await startOpsServer(a.metrics, { metrics, readiness }, logger);
    } catch (err) {
      logger.error({ err: (err as Error).message, address: a.metrics }, 'kvindex serve could not start its metrics server');
      await registry.close();
      return 1;
    }
    logger.info({ metricsUrl: ops.url }, 'metrics, health and readiness served over HTTP');
  }
  let address: string;
  try {
    address = await app.listen({ host: a.host, port: a.port });
  } catch (err) {
    logger.error({ err: (err as Error).message }, 'kvindex serve could not listen');
    shutdown.begin('could not listen');
    await ops?.close();
    await registry.close();
    return shutdown.finished(1);
  }
  logger.info({ address, auth: a.token !== null, topic: a.topic, peers: peers.list() }, 'kvindex serve ready');
  shutdown.serving();
  recovery.start();
  const signal = await shutdown.signalled();
  logger.info({ signal }, 'shutting down');
  await shutdown.step('stop the recovery from peers', () => recovery.stop());
  await shutdown.step('close the HTTP listener', () => app.close());
  await shutdown.step('finish forwarding registrations to peers', () => forwarder.settled());
  await shutdown.step('close the metrics listener', async () => ops?.close());
  const listeners = registry.listeners().length;
  await shutdown.step('close the engine listeners', () => registry.close());
  logger.info({ listeners }, 'kvindex serve stopped');
  return shutdown.finished(0);
}
