/**
 * The `--index` flags of `kvindex gateway` (remote lookups against replicas of `serve --http`,
 * src/gateway/remote-index.ts), kept out of gateway.ts so its option list grows by one line.
 */

import type { Logger } from 'pino';
import { KvIndexError } from '../errors.js';
import { readReplicaUrl, RemoteIndexClient } from '../gateway/remote-index.js';
import { RemoteIndexMetrics, watchRegistrar } from '../gateway/remote-index-metrics.js';
import { ReplicaRegistrar } from '../gateway/remote-register.js';
import type { RegisterRequest } from '../http/requests.js';
import type { GatewayMetrics } from '../gateway/metrics.js';
import { UsageError } from './usage.js';

export const INDEX_USAGE = `  --index <url,...>          ask these replicas of 'kvindex serve --http' for the overlaps
                             (POST /query_by_hash) instead of listening to the engines' KV events;
                             --engines still gives the engines' URLs, health and loads
  --index-deadline-ms <ms>   past this, a lookup routes by load alone (fail-open, counted)
                             (default: 2)
  --index-hedge-ms <ms>      ask a second replica when the first has not answered after this
                             (default: half the deadline, at least 1)
  --index-register <on|off>  register every engine of --engines (and of POST /register) on each
                             replica, in the background, retried while one is down or recovering
                             and sent again every 30 s (default: on)
  --index-token <t>          bearer token of the replicas' /register (default: $KVINDEX_TOKEN)
`;

export const INDEX_OPTIONS = {
  index: { type: 'string' },
  'index-deadline-ms': { type: 'string' },
  'index-hedge-ms': { type: 'string' },
  'index-register': { type: 'string' },
  'index-token': { type: 'string' },
} as const;

export interface IndexArgs {
  replicas: string[];
  deadlineMs: number;
  hedgeMs: number | null;
  /** Register the gateway's engines on the replicas. */
  register: boolean;
  /** Bearer token of the replicas' /register, or null. */
  token: string | null;
}

function ms(name: string, text: string): number {
  if (!/^[0-9]+$/.test(text) || Number(text) < 1 || Number(text) > 60_000) throw new UsageError(`--${name}: expected an integer from 1 to 60000 (ms), got '${text}'`);
  return Number(text);
}

/** The `--index` flags, or null without `--index`. Throws `UsageError`. */
export function readIndexArgs(values: {
  index?: string | undefined; 'index-deadline-ms'?: string | undefined; 'index-hedge-ms'?: string | undefined; 'index-register'?: string | undefined; 'index-token'?: string | undefined; topic?: string | undefined;
}): IndexArgs | null {
  if (values.index === undefined) {
    for (const f of ['index-deadline-ms', 'index-hedge-ms', 'index-register', 'index-token'] as const) if (values[f] !== undefined) throw new UsageError(`--${f}: only with --index`);
    return null;
  }
  if (values.topic !== undefined) throw new UsageError('--topic: not with --index (the replicas listen to the engines)');
  const replicas = values.index.split(',').map((u) => u.trim()).filter((u) => u !== '');
  if (replicas.length === 0) throw new UsageError('--index: expected one or more replica URLs, comma-separated');
  const deadlineMs = ms('index-deadline-ms', values['index-deadline-ms'] ?? '2');
  const hedgeMs = values['index-hedge-ms'] === undefined ? null : ms('index-hedge-ms', values['index-hedge-ms']);
  // The URLs are checked here, so a bad one is a usage error (exit 2), not a failed start.
  try {
    for (const u of replicas) readReplicaUrl(u);
  } catch (err) {
    if (err instanceof KvIndexError) throw new UsageError(`--index: ${err.message}`);
    throw err;
  }
  if (new Set(replicas.map(readReplicaUrl)).size !== replicas.length) throw new UsageError('--index: a replica is listed twice');
  const register = values['index-register'] ?? 'on';
  if (register !== 'on' && register !== 'off') throw new UsageError(`--index-register: expected on or off, got '${register}'`);
  const token = values['index-token'] ?? process.env.KVINDEX_TOKEN ?? '';
  return { replicas, deadlineMs, hedgeMs, register: register === 'on', token: token === '' ? null : token };
}

/** The client of `a`, its lookups measured on `metrics` when given. */
export function remoteIndexFor(a: IndexArgs, logger: Logger, metrics: GatewayMetrics | null): RemoteIndexClient {
  const m = metrics === null ? null : new RemoteIndexMetrics(metrics.registry);
  const client = new RemoteIndexClient({
    replicas: a.replicas, deadlineMs: a.deadlineMs, logger,
    ...(a.hedgeMs === null ? {} : { hedgeMs: a.hedgeMs }),
    ...(m === null ? {} : { onLookup: (t: number, answered: boolean) => m.observe(t, answered) }),
  });
  m?.watch(client);
  return client;
}

/**
 * The registrar of `a` (null with `--index-register off`), its counters on `metrics` when
 * given; `current` says whether an engine is still the gateway's.
 */
export function registrarFor(a: IndexArgs, logger: Logger, metrics: GatewayMetrics | null, current: (r: RegisterRequest) => boolean): ReplicaRegistrar | null {
  if (!a.register) return null;
  const registrar = new ReplicaRegistrar({ replicas: a.replicas.map(readReplicaUrl), token: a.token, logger, current });
  if (metrics !== null) watchRegistrar(metrics.registry, registrar);
  return registrar;
}
