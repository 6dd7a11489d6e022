/**
 * `kvindex gateway --http <[host:]port> [--engines <file.json>]`: an OpenAI-compatible proxy
 * that sends each request to the engine holding its prompt's prefix (src/gateway/,
 * docs/gateway.md). Engines come from the file and from `POST /register` (with `url`); their
 * KV events are consumed over ZMQ as by `serve --http`. Listens on 127.0.0.1 unless a host is
 * given. Logs are pino JSON lines on stderr; the line with msg "kvindex gateway ready" carries
 * the bound `address`. SIGTERM or SIGINT: stop listening, stop the listeners, exit 0.
 */

import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { readEnginesFile } from '../gateway/engines-file.js';
import { Gateway } from '../gateway/gateway.js';
import { gatewayPlugin } from '../gateway/plugin.js';
import { GatewayMetrics } from '../gateway/metrics.js';
import type { EngineEntry } from '../gateway/engine-catalog.js';
import { LocalTokenizer } from '../gateway/local-tokenizer.js';
import { MAX_TIMER_MS } from '../protocol/time-limits.js';
import { isRoutingPresetName, ROUTING_PRESET_NAMES, ROUTING_PRESETS, type RoutingCost, type RoutingPresetName } from '../router/presets.js';
import { parseListenAddress, startOpsServer, type OpsServer } from '../serve/ops-server.js';
import { quietFastify } from '../serve/quiet-fastify.js';
import { Shutdown } from './shutdown.js';
import { warnIfZmqMissing } from './zmq-missing.js';
import { readIndexArgs, registrarFor, remoteIndexFor, INDEX_USAGE, INDEX_OPTIONS, type IndexArgs } from './gateway-index.js';
import { logLevelArg, UsageError } from './usage.js';
import { NATS_AUTH_FLAGS, NATS_AUTH_USAGE, natsAuthFromFlags } from './nats-options.js';
import { SharedLoads, type SharedLoadsOptions } from '../gateway/shared-loads.js';
import { registerSharedLoadsMetrics } from '../gateway/shared-loads-metrics.js';
import type { ReplicaRegistrar } from '../gateway/remote-register.js';

export const GATEWAY_USAGE = `usage: kvindex gateway --http <[host:]port> [options]
  OpenAI-compatible proxy: each request goes to the engine holding its prompt's prefix
  (POST /v1/completions /v1/chat/completions, GET /v1/models /health /ready; and the indexer
  API: /register (with "url") /unregister /workers ...)
  --http <[host:]port>       listen address (host default 127.0.0.1: loopback only)
  --engines <file.json>      engines: [{"instance_id","endpoint","model_name","block_size","url",
                             "replay_endpoint"?,"dp_rank"?,"tenant_id"?}, ...] (default: none)
  --token <t>                bearer token required by /register and /unregister
                             (default: $KVINDEX_TOKEN; none: unguarded)
  --topic <prefix>           ZMQ topic filter of every listener (default: '', all topics)
  --health-interval <ms>     poll each engine's /health and /v1/models this often (default: 1000)
  --health-timeout <ms>      a poll slower than this marks the engine down
                             (default: the interval, at least 2000)
  --events-stale <ms>        an engine owing KV events this long is routed by load only (default: 10000)
  --body-limit <bytes>       largest request body (default: 16777216)
  --tokenizer <tokenizer.json>  tokenize text and chat in the gateway (Hugging Face tokenizer.json;
                             tokenizer_config.json beside it is read too) instead of an engine's
                             /tokenize; needs the optional @huggingface/tokenizers
  --chat-template <file>     Jinja chat template for --tokenizer (default: tokenizer_config.json's
                             chat_template); needs the optional @huggingface/jinja
  --routing <${ROUTING_PRESET_NAMES.join('|')}>
                             the routing cost (docs/routing.md): kv (kvindex's default, tuned for
                             time to first token), dynamo (Dynamo's defaults) or kv-time (a cost
                             in predicted ms to the first token, with Dynamo mocker's engine
                             profile) (default: kv)
  --prefill-load-scale <x>   weight of a candidate's uncached prefill in its cost against its
                             in-flight blocks (Dynamo's kv_overlap_score_weight), over --routing's
                             (kv: 30, dynamo: 1)
  --nats <url>               share loads with the other gateways over NATS: publish and apply
                             each other's requests in flight on Dynamo's active-sequence subject
                             (docs/gateway.md); without it each gateway keeps its own view.
                             nats://user:pass@host:port carries credentials (never logged)
${NATS_AUTH_USAGE}  --namespace <ns>, --component <comp>
                             Dynamo namespace and component of the subjects (default: dynamo, backend)
  --loads-heartbeat <ms>     --nats: announce this gateway every <ms> (default: 1000)
  --loads-expiry <ms>        --nats: free a gateway's loads when its heartbeats stop this long
                             (default: 5000; more than --loads-heartbeat)
${INDEX_USAGE}  --metrics <host:port>      serve GET /metrics (Prometheus), /health and /ready on their own
                             listener (host defaults to 127.0.0.1; port 0 picks one, logged)
  --log-level <level>        pino level: debug, info, warn, error (default: info)
  --help                     print this
`;

function positiveInt(name: string, text: string | undefined, fallback: number, max: number): number {
  const t = text ?? String(fallback);
  if (!/^[0-9]+$/.test(t) || Number(t) < 1 || Number(t) > max) throw new UsageError(`--${name}: expected an integer from 1 to ${max}, got '${t}'`);
  return Number(t);
}

interface GatewayArgs {
  listen: { host: string; port: number };
  engines: string | null;
  token: string | null;
  topic: string;
  healthIntervalMs: number;
  healthTimeoutMs: number | null;
  staleMs: number;
  bodyLimit: number;
  routing: RoutingCost;
  routingName: RoutingPresetName;
  tokenizer: string | null;
  chatTemplate: string | null;
  logLevel: string;
  metrics: { host: string; port: number } | null;
  sharedLoads: SharedLoadsOptions | null;
  index: IndexArgs | null;
}

function parse(args: string[]): GatewayArgs | 'help' {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: {
      http: { type: 'string' },
      engines: { type: 'string' },
      token: { type: 'string' },
      topic: { type: 'string' },
      'health-interval': { type: 'string' },
      'health-timeout': { type: 'string' },
      'events-stale': { type: 'string' },
      'body-limit': { type: 'string' },
      'prefill-load-scale': { type: 'string' },
      routing: { type: 'string' },
      tokenizer: { type: 'string' },
      'chat-template': { type: 'string' },
      'log-level': { type: 'string' },
      metrics: { type: 'string' },
      nats: { type: 'string' },
      ...NATS_AUTH_FLAGS,
      namespace: { type: 'string' },
      component: { type: 'string' },
      'loads-heartbeat': { type: 'string' },
      'loads-expiry': { type: 'string' },
      help: { type: 'boolean' },
      ...INDEX_OPTIONS,
    },
  });
  if (values.help === true) return 'help';
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  if (values['chat-template'] !== undefined && values.tokenizer === undefined) throw new UsageError('--chat-template: only with --tokenizer');
  const address = (name: string, text: string | undefined): { host: string; port: number } => {
    try {
      return parseListenAddress(text ?? '');
    } catch {
      throw new UsageError(`--${name}: expected [host:]port, got '${text ?? ''}'`);
    }
  };
  const level = logLevelArg(values['log-level']);
  const token = values.token ?? process.env.KVINDEX_TOKEN ?? '';
  const preset = values.routing ?? 'kv';
  if (!isRoutingPresetName(preset)) throw new UsageError(`--routing: expected ${ROUTING_PRESET_NAMES.join(' or ')}, got '${preset}'`);
  const scale = values['prefill-load-scale'];
  if (scale !== undefined && (!/^[0-9]+(\.[0-9]+)?$/.test(scale) || Number(scale) > 1e6)) throw new UsageError(`--prefill-load-scale: expected a number from 0 to 1e6, got '${scale}'`);
  return {
    routing: { ...ROUTING_PRESETS[preset], ...(scale === undefined ? {} : { prefillLoadScale: Number(scale) }) },
    routingName: preset,
    tokenizer: values.tokenizer ?? null,
    chatTemplate: values['chat-template'] ?? null,
    listen: address('http', values.http),
    engines: values.engines ?? null,
    token: token === '' ? null : token,
    topic: values.topic ?? '',
    healthIntervalMs: positiveInt('health-interval', values['health-interval'], 1_000, MAX_TIMER_MS),
    healthTimeoutMs: values['health-timeout'] === undefined ? null : positiveInt('health-timeout', values['health-timeout'], 2_000, MAX_TIMER_MS),
    staleMs: positiveInt('events-stale', values['events-stale'], 10_000, MAX_TIMER_MS),
    bodyLimit: positiveInt('body-limit', values['body-limit'], 16 * 1024 * 1024, 2 ** 30),
    logLevel: level,
    metrics: values.metrics === undefined ? null : address('metrics', values.metrics),
    sharedLoads: sharedLoadsArgs(values),
    index: readIndexArgs(values),
  };
}

/** The `--nats` options (null without `--nats`; the others then refused). */
function sharedLoadsArgs(values: Record<string, string | boolean | undefined>): SharedLoadsOptions | null {
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? values[k] : undefined);
  const nats = str('nats');
  if (nats === undefined) {
    const stray = ['namespace', 'component', 'loads-heartbeat', 'loads-expiry', ...Object.keys(NATS_AUTH_FLAGS)].find((k) => values[k] !== undefined);
    if (stray !== undefined) throw new UsageError(`--${stray}: only with --nats`);
    return null;
  }
  const heartbeatMs = positiveInt('loads-heartbeat', str('loads-heartbeat'), 1_000, MAX_TIMER_MS);
  const expiryMs = positiveInt('loads-expiry', str('loads-expiry'), 5_000, MAX_TIMER_MS);
  if (expiryMs <= heartbeatMs) throw new UsageError(`--loads-expiry: expected more than --loads-heartbeat (${heartbeatMs}), got '${expiryMs}'`);
  return { servers: nats, auth: natsAuthFromFlags(values), namespace: str('namespace') ?? 'dynamo', component: str('component') ?? 'backend', heartbeatMs, expiryMs };
}

export async function main(args: string[]): Promise<number> {
  let a: GatewayArgs | 'help';
  let engines: EngineEntry[] = [];
  let tokenizer: LocalTokenizer | null = null;
  try {
    a = parse(args);
    if (a !== 'help' && a.engines !== null) engines = readEnginesFile(a.engines);
    if (a !== 'help' && a.tokenizer !== null) tokenizer = await LocalTokenizer.load(a.tokenizer, a.chatTemplate);
  } catch (err) {
    process.stderr.write(`kvindex gateway: ${(err as Error).message}\n${GATEWAY_USAGE}`);
    return 2;
  }
  if (a === 'help') {
    process.stdout.write(GATEWAY_USAGE);
    return 0;
  }
  const logger = pino({ name: 'kvindex', level: a.logLevel }, pino.destination({ fd: 2, sync: true }));
  // The same stop contract as `serve` (shutdown.ts): exit within 1 s of SIGTERM/SIGINT.
  const shutdown = new Shutdown(logger);
  if (a.index === null) await warnIfZmqMissing(logger);
  const metrics = a.metrics === null ? null : new GatewayMetrics();
  let shared: SharedLoads | null = null;
  try {
    if (a.sharedLoads !== null) shared = new SharedLoads({ ...a.sharedLoads, logger });
  } catch (err) {
    process.stderr.write(`kvindex gateway: --nats: ${(err as Error).message}\n`);
    return 2;
  }
  const routing = shared === null ? a.routing : { ...a.routing, ...shared.routerOptions() };
  if (metrics !== null && shared !== null) registerSharedLoadsMetrics(metrics.registry, shared);
  const remoteIndex = a.index === null ? null : remoteIndexFor(a.index, logger, metrics);
  // Called only once the gateway exists (its registrations are sent from `start`).
  const indexRegistrar: ReplicaRegistrar | null = a.index === null ? null : registrarFor(a.index, logger, metrics, (r): boolean => gateway.catalog.engine(r.instanceId, r.modelName, r.tenantId, r.dpRank) !== undefined);
  const gateway: Gateway = new Gateway({ logger, topic: a.topic, healthIntervalMs: a.healthIntervalMs, ...(a.healthTimeoutMs === null ? {} : { healthTimeoutMs: a.healthTimeoutMs }), staleMs: a.staleMs, routing, tokenizer, remoteIndex, indexRegistrar, ...(metrics === null ? {} : { observer: metrics }) });
  metrics?.watch(gateway);
  const app = quietFastify(logger);
  let ops: OpsServer | null = null;
  try {
    await gateway.start(engines);
    shared?.start(gateway); // connects in the background: routing never waits for NATS
    await gatewayPlugin(app, { gateway, token: a.token, bodyLimit: a.bodyLimit, ...(metrics === null ? {} : { onError: (route: string, status: number) => metrics.observeError(route, status) }) });
    if (metrics !== null && a.metrics !== null) {
      ops = await startOpsServer(a.metrics, { metrics, readiness: () => gateway.catalog.readiness() }, logger);
      logger.info({ metricsUrl: ops.url }, 'metrics, health and readiness served over HTTP');
    }
    const address = await app.listen({ host: a.listen.host, port: a.listen.port });
    logger.info({ address, engines: engines.length, auth: a.token !== null, tokenizer: a.tokenizer === null ? 'engine' : 'local', routing: a.routingName, loads: shared === null ? 'local' : 'shared', ...(remoteIndex === null ? {} : { index: remoteIndex.replicas, indexDeadlineMs: remoteIndex.deadlineMs, indexHedgeMs: remoteIndex.hedgeMs, indexRegister: indexRegistrar !== null }) }, 'kvindex gateway ready');
  } catch (err) {
    logger.error({ err: (err as Error).message }, 'kvindex gateway could not start');
    shutdown.begin('could not start');
    await app.close();
    await ops?.close();
    await shared?.close();
    await gateway.close();
    return shutdown.finished(1);
  }
  shutdown.serving();
  const signal = await shutdown.signalled();
  logger.info({ signal }, 'shutting down');
  await shutdown.step('close the HTTP listener', () => app.close());
  await shutdown.step('close the metrics listener', async () => ops?.close());
  await shutdown.step('tell the other gateways this one leaves', async () => shared?.close());
  const listeners = gateway.registry.listeners().length;
  await shutdown.step('close the engine listeners and health polls', () => gateway.close());
  logger.info({ listeners }, 'kvindex gateway stopped');
  return shutdown.finished(0);
}
