/**
 * The `--index` flags of `kvindex gateway` (remote lookups against replicas of `serve --http`,
 * src/gateway/remote-index.ts), kept out of gateway.ts so its option list grows by one line.
 */

import type { Logger } from 'pino';
import { KvIndexError } from '../errors.js';
import { readReplicaUrl, RemoteIndexClient } from '../gateway/remote-index.js';
import { RemoteIndexMetrics } from '../gateway/remote-index-metrics.js';
import type { GatewayMetrics } from '../gateway/metrics.js';
import { UsageError } from './usage.js';

export const INDEX_USAGE = `  --index <url,...>          ask these replicas of 'kvindex serve --http' for the overlaps
                             (POST /query_by_hash) instead of listening to the engines' KV events;
                             --engines still gives the engines' URLs, health and loads
  --index-deadline-ms <ms>   past this, a lookup routes by load alone (fail-open, counted)
                             (default: 2)
  --index-hedge-ms <ms>      ask a second replica when the first has not answered after this
                             (default: half the deadline, at least 1)
`;

export const INDEX_OPTIONS = {
  index: { type: 'string' },
  'index-deadline-ms': { type: 'string' },
  'index-hedge-ms': { type: 'string' },
} as const;

export interface IndexArgs {
  replicas: string[];
  deadlineMs: number;
  hedgeMs: number | null;
}

function ms(name: string, text: string): number {
  if (!/^[0-9]+$/.test(text) || Number(text) < 1 || Number(text) > 60_000) throw new UsageError(`--${name}: expected an integer from 1 to 60000 (ms), got '${text}'`);
  return Number(text);
}

/** The `--index` flags, or null without `--index`. Throws `UsageError`. */
export function readIndexArgs(values: { index?: string | undefined; 'index-deadline-ms'?: string | undefined; 'index-hedge-ms'?: string | undefined; topic?: string | undefined }): IndexArgs | null {
  if (values.index === undefined) {
    for (const f of ['index-deadline-ms', 'index-hedge-ms'] as const) if (values[f] !== undefined) throw new UsageError(`--${f}: only with --index`);
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
  return { replicas, deadlineMs, hedgeMs };
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
