/** Options of `KvEventSubscriber`: the documented interface, defaults and checks. */

import { randomUUID } from 'node:crypto';
import type { NatsConnection } from 'nats';
import type { Logger } from 'pino';
import { ErrorCode, KvIndexError } from '../errors.js';
import type { SnapshotEncoding } from '../protocol/types.js';
import type { ShardedIndexer } from '../indexer/sharded-indexer.js';
import type { NatsAuthOptions } from './auth.js';
import { DEFAULT_CONSUMER_INACTIVE_S, DEFAULT_STREAM_MAX_AGE_S } from './connect.js';
import { MAX_NANOS_S, MAX_TIMER_MS } from '../protocol/time-limits.js';
import { checkEncoding } from './snapshot.js';
import { DEFAULT_LEASE_MS, leaseMsProblem } from './snapshot-lease.js';
import { showValue } from '../protocol/show-value.js';

export interface KvEventSubscriberOptions {
  /** The index to feed; the subscriber never closes it. */
  indexer: ShardedIndexer;
  namespace: string;
  component: string;
  /** NATS URL(s); default env `NATS_SERVER`, else `nats://127.0.0.1:4222`. Ignored with `connection`. */
  servers?: string | string[];
  /** An open connection to use (and leave open on close) instead of connecting. */
  connection?: NatsConnection;
  /** First-connect retry budget, ms (default 5,000); then `KVX_NATS_UNREACHABLE`. */
  connectTimeoutMs?: number;
  /** Credentials and TLS (see auth.ts); unset fields fall back to the URL, then the environment. */
  auth?: NatsAuthOptions;
  /** Durable consumer name; default a random UUID, as Dynamo names it after the router. */
  consumerName?: string;
  /** `max_age` of the stream when this subscriber creates it, seconds. Default 3,600. */
  streamMaxAgeS?: number;
  /** Snapshot when the stream holds more messages than this; null or absent: never. */
  snapshotThreshold?: number | null;
  /** Period of the snapshot check, ms, ±10 % jitter. Default 1,000 (Dynamo's). */
  snapshotIntervalMs?: number;
  /** Snapshot layout. Default 'bincode' (Dynamo's PR-era layout). */
  encoding?: SnapshotEncoding;
  /**
   * Time to live of the snapshot lease, ms (snapshot-lease.ts: one router at a time snapshots;
   * a router that dies holding it blocks the others this long). Default 60,000; 0: no lease
   * (snapshots still settle on a covering one, see `takeSnapshot`). At least 1,000 otherwise.
   */
  snapshotLeaseMs?: number;
  /** Purge the stream and delete the snapshot bucket instead of loading the snapshot. */
  resetStates?: boolean;
  /** Messages per pull, at most. Default 512. */
  batchMessages?: number;
  /** Target bytes per pull: the pull size shrinks when messages are large. Default 1 MiB. */
  batchBytes?: number;
  /** How long a pull waits for messages, ms (nats.js minimum 1,000). Default 1,000. */
  fetchExpiresMs?: number;
  /**
   * Hand each message's bytes to `indexer.applyEventJson`, so shard threads parse them in
   * parallel, instead of parsing on this thread. A message a shard rejects is counted and logged
   * with its stream sequence. On 2 cores parsing here measured faster (bench/shard.bench.ts):
   * the shards are the busy threads there. Default false.
   */
  parseInShards?: boolean;
  /**
   * The durable consumer's `inactive_threshold`, seconds: the server deletes it after this long
   * without a pull (a crashed router's consumer). Default 60; Dynamo's is 3,600.
   */
  consumerInactiveThresholdS?: number;
  /**
   * A snapshot that cannot be read: 'fail' (default) stops start-up with its error; 'skip'
   * consumes whatever the stream still holds, logs at error that the index is partial, and
   * reports not ready until this router takes a new snapshot.
   */
  onBadSnapshot?: 'fail' | 'skip';
  /** Ready (see `ready()`) when at most this many stream messages are not applied yet. Default 100. */
  readyMaxLag?: number;
  /**
   * Remove a worker from the index when none of its DP ranks sent an event for this long, ms.
   * Default null: never (a silent worker may just be idle; Dynamo removes workers only when
   * service discovery loses them).
   */
  workerIdleMs?: number | null;
  /** Keep the durable consumer on close (Dynamo deletes it, so it stops holding back purges). */
  keepConsumer?: boolean;
  logger?: Logger;
}

/** Counters of a subscriber (a snapshot of them; cheap to call). */
export interface SubscriberStats {
  stream: string;
  consumer: string;
  /** Messages received (including duplicates and malformed ones). */
  received: number;
  /** Events handed to the indexer. */
  applied: number;
  malformed: number;
  /** Messages at or below the router's position, skipped. */
  duplicates: number;
  /** Stream sequences that never arrived because the stream no longer held them (purged, expired, deleted). */
  missedSeqs: number;
  /** Applied events by type (serde-compact messages; others are applied but not typed here). */
  eventsByType: { stored: number; removed: number; cleared: number };
  /** Event-id jumps within a worker's (and DP rank's) events, and the events they skipped. */
  workerEventIdGaps: number;
  workerMissingEvents: number;
  /** Workers removed for idleness or by request. */
  workersRemoved: number;
  /** Stream messages not applied yet (estimate: see readiness.ts). */
  lag: number;
  /** Sequences the stream still held that were delivered but never reached this router (each makes it recreate its consumer). */
  lostDeliveries: number;
  /** Times the consumer was recreated after a lost delivery or its disappearance. */
  consumerResets: number;
  snapshots: number;
  /** Snapshots skipped because another router held the snapshot lease (it was taking one). */
  snapshotsDeferred: number;
  /** Every event up to this stream sequence is applied (and acked). */
  lastAppliedSeq: number;
  /** Messages the server still had for the consumer at the last delivery. */
  pending: number;
}

/** Options after defaults and checks. */
export interface SubscriberConfig {
  servers: string | string[] | undefined;
  consumerName: string;
  streamMaxAgeS: number;
  snapshotThreshold: number | null;
  snapshotIntervalMs: number;
  encoding: SnapshotEncoding;
  snapshotLeaseMs: number;
  resetStates: boolean;
  batchMessages: number;
  batchBytes: number;
  fetchExpiresMs: number;
  parseInShards: boolean;
  keepConsumer: boolean;
  consumerInactiveThresholdS: number;
  onBadSnapshot: 'fail' | 'skip';
  readyMaxLag: number;
  workerIdleMs: number | null;
}

/** Applies defaults; throws `KvIndexError` `InvalidOption` naming the bad option. */
export function checkSubscriberOptions(o: KvEventSubscriberOptions): SubscriberConfig {
  const bad = (what: string): never => {
    throw new KvIndexError(ErrorCode.InvalidOption, what);
  };
  // Timer periods stop at MAX_TIMER_MS (Node fires a longer one at once: a huge snapshot
  // interval checked every millisecond), server durations at MAX_NANOS_S (int64 nanoseconds).
  const int = (name: string, v: number | undefined, dflt: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    if (v === undefined) return dflt;
    if (!Number.isInteger(v) || v < min || v > max) bad(`${name}: expected an integer ${max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`}, got ${showValue(v)}`);
    return v;
  };
  if (typeof o !== 'object' || o === null) bad('options: expected an object');
  if (typeof o.indexer?.applyEvent !== 'function') bad('indexer: expected a ShardedIndexer');
  const name = o.consumerName ?? randomUUID();
  if (typeof name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(name)) bad(`consumerName: expected 1-64 of [A-Za-z0-9_-], got ${JSON.stringify(name)}`);
  const leaseMs = int('snapshotLeaseMs', o.snapshotLeaseMs, DEFAULT_LEASE_MS, 0, MAX_TIMER_MS);
  const leaseProblem = leaseMsProblem(leaseMs);
  if (leaseProblem !== null) bad(`snapshotLeaseMs: ${leaseProblem}, got ${leaseMs}`);
  const threshold = o.snapshotThreshold ?? null;
  if (threshold !== null && !(Number.isInteger(threshold) && threshold >= 0)) bad(`snapshotThreshold: expected an integer >= 0, got ${String(threshold)}`);
  return {
    servers: o.servers,
    consumerName: name,
    streamMaxAgeS: int('streamMaxAgeS', o.streamMaxAgeS, DEFAULT_STREAM_MAX_AGE_S, 1, MAX_NANOS_S),
    snapshotThreshold: threshold,
    snapshotIntervalMs: int('snapshotIntervalMs', o.snapshotIntervalMs, 1_000, 10, MAX_TIMER_MS),
    encoding: checkEncoding(o.encoding ?? 'bincode'),
    snapshotLeaseMs: leaseMs,
    resetStates: o.resetStates === true,
    batchMessages: int('batchMessages', o.batchMessages, 512, 1),
    batchBytes: int('batchBytes', o.batchBytes, 1 << 20, 1),
    fetchExpiresMs: int('fetchExpiresMs', o.fetchExpiresMs, 1_000, 1_000, MAX_TIMER_MS),
    parseInShards: o.parseInShards === true,
    keepConsumer: o.keepConsumer === true,
    onBadSnapshot: o.onBadSnapshot === undefined || o.onBadSnapshot === 'fail' ? 'fail' : o.onBadSnapshot === 'skip' ? 'skip' : bad(`onBadSnapshot: expected 'fail' or 'skip', got ${JSON.stringify(o.onBadSnapshot)}`),
    readyMaxLag: int('readyMaxLag', o.readyMaxLag, 100, 0),
    workerIdleMs: o.workerIdleMs === undefined || o.workerIdleMs === null ? null : int('workerIdleMs', o.workerIdleMs, 0, 1),
    consumerInactiveThresholdS: int('consumerInactiveThresholdS', o.consumerInactiveThresholdS, DEFAULT_CONSUMER_INACTIVE_S, 1, MAX_NANOS_S),
  };
}
