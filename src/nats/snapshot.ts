/**
 * Snapshots of the index in the NATS object store (Dynamo reference §1.3, §5.3, §5.4), and the
 * stream purge they allow.
 *
 * Taking one: dump the indexer (its parallel per-shard dump, merged as bytes) covering every
 * event up to stream sequence S, upload it to `<bucket>/radix-state` with `stream_seq` = S and
 * `encoding` in the object's metadata and headers, then purge the stream up to
 * P = min(lowest ack floor > 0 of all consumers, S). Dynamo purges first and dumps second; here
 * the upload comes first, so a failed dump or upload never leaves purged events that no stored
 * snapshot covers, and the cap P <= S keeps that true whatever the ack floors say (Debian's
 * nats-server 2.9.10 can jump a consumer's ack floor past what it delivered to its router after a
 * purge by sequence; a purge from floors alone then deletes events no snapshot holds).
 *
 * Loading one: download, then confirm it is stable (Dynamo re-downloads 100 ms later until two
 * downloads are equal, at most 10 times); a restoring router resumes the stream right after
 * `stream_seq` (a Dynamo snapshot has none: from the start of the stream).
 */

import { headers as natsHeaders, type JetStreamClient, type JetStreamManager, type ObjectInfo, type ObjectStore } from 'nats';
import type { Logger } from 'pino';
import { ErrorCode, EventParseError, KvIndexError, SnapshotDecodeError } from '../errors.js';
import { iterateSnapshot } from '../protocol/snapshot-reader.js';
import type { RouterEvent, SnapshotEncoding } from '../protocol/types.js';
import type { ShardedIndexer } from '../indexer/sharded-indexer.js';
import { sleep, wrap } from './connect.js';
import { API_STREAM_NOT_FOUND, NatsError, NatsErrorCode, errorFields, isApiError, reason } from './errors.js';
import type { KvNames } from './names.js';
import type { SnapshotLease } from './snapshot-lease.js';

/** What the object's metadata says about a snapshot. */
export interface SnapshotMeta {
  /** Last stream sequence the snapshot covers; null for a snapshot without it (Dynamo's). */
  streamSeq: number | null;
  encoding: SnapshotEncoding;
}

export interface DownloadedSnapshot {
  bytes: Uint8Array;
  meta: SnapshotMeta;
  /** Full downloads made (a stable object needs one plus metadata re-reads). */
  downloads: number;
  /** True when two consecutive reads agreed; false when the attempts ran out (the last is used). */
  stable: boolean;
}

/** Outcome of `takeSnapshot`. */
export interface SnapshotReport {
  /** Stream sequence the uploaded snapshot covers. */
  streamSeq: number;
  events: number;
  bytes: number;
  encoding: SnapshotEncoding;
  /** False when a newer snapshot of another router was stored already (this one was dropped). */
  uploaded: boolean;
  /** Messages ≤ this sequence were purged (null: nothing purged). */
  purgedThrough: number | null;
  purged: number;
  durationMs: number;
}

/** Outcome of `restoreSnapshot`. */
export interface RestoreReport {
  /** Where the stream resumes: after this sequence (0 = from the start). */
  resumeAfter: number;
  /**
   * 'restored', 'none' (no bucket or no object), 'reset' (resetStates), 'skipped' (a bad
   * snapshot with onBadSnapshot 'skip') or 'foreign' (a snapshot of an earlier stream of the
   * same name: its `stream_seq` is past the stream's last sequence; not loaded).
   */
  outcome: 'restored' | 'none' | 'reset' | 'skipped' | 'foreign';
  events: number;
  bytes: number;
  downloads: number;
  durationMs: number;
}

export interface SnapshotContext {
  jsm: JetStreamManager;
  js: JetStreamClient;
  names: KvNames;
  indexer: ShardedIndexer;
  logger: Logger | null;
  /** This router's durable consumer, to tell its own ack floor from another router's. */
  consumerName?: string;
  /**
   * Called when a purge is skipped because another consumer's ack floor is below this router's
   * position: `behind` is how many sequences it lags (the scheduler logs it at info).
   */
  onHeldBack?: (holder: { consumer: string; floor: number; behind: number; messages: number }) => void;
  /** One router at a time snapshots (snapshot-lease.ts); absent: no lease. */
  lease?: SnapshotLease;
  /** Called when a snapshot is skipped because another router holds the lease. */
  onDeferred?: () => void;
}

const ENCODINGS: readonly SnapshotEncoding[] = ['bincode', 'bincode-dp', 'jsonl'];
const META_STREAM_SEQ = 'stream_seq';
const META_ENCODING = 'encoding';

/** Checks a snapshot encoding option; throws `KvIndexError` `InvalidOption`. */
export function checkEncoding(encoding: unknown, field = 'encoding'): SnapshotEncoding {
  if (!ENCODINGS.includes(encoding as SnapshotEncoding)) {
    throw new KvIndexError(ErrorCode.InvalidOption, `${field}: expected 'bincode', 'bincode-dp' or 'jsonl', got ${String(encoding)}`);
  }
  return encoding as SnapshotEncoding;
}

/** Number of events in snapshot bytes, from the leading count (bincode) or the line count. */
export function snapshotEventCount(bytes: Uint8Array, encoding: SnapshotEncoding): number {
  if (encoding === 'jsonl') {
    let n = 0;
    for (let i = bytes.indexOf(0x0a); i >= 0; i = bytes.indexOf(0x0a, i + 1)) n++;
    return n;
  }
  if (bytes.length < 8) return 0;
  const v = new DataView(bytes.buffer, bytes.byteOffset, 8);
  return v.getUint32(0, true) + v.getUint32(4, true) * 4294967296;
}

/**
 * The lowest ack floor (stream sequence) over the stream's consumers whose floor is above 0
 * (Dynamo ignores consumers that have acked nothing), or null when none has one.
 */
export async function lowestAckFloor(jsm: JetStreamManager, stream: string): Promise<{ floor: number | null; consumer: string | null }> {
  let floor: number | null = null;
  let consumer: string | null = null;
  try {
    for await (const ci of jsm.consumers.list(stream)) {
      const f = ci.ack_floor.stream_seq;
      if (f > 0 && (floor === null || f < floor)) {
        floor = f;
        consumer = ci.name;
      }
    }
  } catch (err) {
    throw wrap(`list consumers of ${stream}`, err);
  }
  return { floor, consumer };
}

/**
 * Dumps the indexer, uploads the snapshot, then purges the stream up to
 * min(lowest ack floor > 0, covered sequence). `coveredSeq` must return, synchronously, the
 * stream sequence of the last event handed to the indexer: the dump is requested in the same
 * tick, and the indexer serves it after every event enqueued before (shard ports are FIFO), so
 * the dump covers exactly the events up to that sequence. Returns null when the purge would
 * delete nothing (a lagging consumer or this router holds it back), or when another router
 * holds the snapshot lease (it is snapshotting: snapshot-lease.ts), without dumping.
 */
export async function takeSnapshot(
  ctx: SnapshotContext,
  encoding: SnapshotEncoding,
  coveredSeq: () => number,
  streamMessages: number,
): Promise<SnapshotReport | null> {
  const { jsm, names, logger } = ctx;
  const first = (await streamState(jsm, names.stream)).first_seq;
  const before = await lowestAckFloor(jsm, names.stream);
  const cap = coveredSeq();
  const candidate = before.floor === null ? null : Math.min(before.floor, cap);
  if (candidate === null || candidate < first) {
    if (before.consumer !== null && before.floor !== null && before.consumer !== ctx.consumerName && before.floor < cap) {
      ctx.onHeldBack?.({ consumer: before.consumer, floor: before.floor, behind: cap - before.floor, messages: streamMessages });
    }
    logger?.debug(
      { stream: names.stream, messages: streamMessages, firstSeq: first, lowestAckFloor: before.floor, consumer: before.consumer, appliedSeq: cap },
      'snapshot skipped: nothing could be purged',
    );
    return null;
  }
  const grant = ctx.lease === undefined ? 'none' : await ctx.lease.acquire();
  if (grant === 'busy') {
    ctx.onDeferred?.();
    logger?.debug({ stream: names.stream, messages: streamMessages, bucket: names.leaseBucket }, 'snapshot skipped: another router holds the snapshot lease');
    return null;
  }
  try {
    return await snapshotAndPurge(ctx, encoding, coveredSeq, streamMessages, first, cap, before.floor);
  } finally {
    await ctx.lease?.release(grant);
  }
}

/** `takeSnapshot` once it decided to snapshot (and holds the lease, if any). */
async function snapshotAndPurge(
  ctx: SnapshotContext,
  encoding: SnapshotEncoding,
  coveredSeq: () => number,
  streamMessages: number,
  first: number,
  cap: number,
  floor: number | null,
): Promise<SnapshotReport> {
  const { jsm, names, logger } = ctx;
  const started = performance.now();
  logger?.info({ stream: names.stream, messages: streamMessages, appliedSeq: cap, lowestAckFloor: floor }, 'purge and snapshot start');
  // No await between reading the sequence and requesting the dump (see above).
  const streamSeq = coveredSeq();
  const bytes = await ctx.indexer.dumpSnapshot(encoding);
  const dumpMs = performance.now() - started;
  // Routers snapshot independently (each at its threshold), so two may race. Three rules keep
  // the stored snapshot covering everything the stream no longer holds (without them, an older
  // snapshot uploaded late overwrote a newer one after its purge: a new router restored it and
  // missed the purged events while reporting ready; found by fuzzing):
  // 1. never overwrite a newer snapshot of this stream;
  const stored = await storedSnapshotSeq(ctx.js, names);
  const newer = stored !== null && stored >= streamSeq && stored <= (await streamState(jsm, names.stream)).last_seq;
  if (!newer) await uploadSnapshot(ctx.js, names, bytes, { streamSeq, encoding });
  const uploadMs = performance.now() - started - dumpMs;
  // 2. never purge past the snapshot stored now (whoever uploaded it);
  const after = await lowestAckFloor(jsm, names.stream);
  const storedNow = await storedSnapshotSeq(ctx.js, names);
  const through = after.floor === null || storedNow === null ? null : Math.min(after.floor, streamSeq, storedNow);
  let purged = 0;
  if (through !== null && through >= first) {
    try {
      // Purge by sequence keeps `seq` itself: everything <= through goes.
      purged = (await jsm.streams.purge(names.stream, { seq: through + 1 })).purged;
    } catch (err) {
      throw wrap(`purge ${names.stream} through ${through}`, err);
    }
  }
  // 3. after acting, check: if the stream starts past what the stored snapshot covers (another
  // router's upload or purge came between), snapshot again from this router's current state.
  // Whoever acts last checks last, so the races settle on a covering snapshot.
  await healStoredSnapshot(ctx, encoding, coveredSeq);
  const report: SnapshotReport = {
    streamSeq,
    events: snapshotEventCount(bytes, encoding),
    bytes: bytes.length,
    encoding,
    uploaded: !newer,
    purgedThrough: purged > 0 ? through : null,
    purged,
    durationMs: Math.round(performance.now() - started),
  };
  logger?.info(
    { ...report, bucket: names.bucket, key: names.snapshotKey, dumpMs: Math.round(dumpMs), uploadMs: Math.round(uploadMs) },
    `snapshot of ${report.events} events (${report.bytes} bytes) ${newer ? 'not uploaded (a newer one is stored)' : 'uploaded'} and ${purged} messages purged in ${report.durationMs} ms`,
  );
  return report;
}

/** Uploads (overwrites) `<bucket>/radix-state`, creating the bucket when missing. */
export async function uploadSnapshot(js: JetStreamClient, names: KvNames, bytes: Uint8Array, meta: SnapshotMeta): Promise<ObjectInfo> {
  const h = natsHeaders();
  const metadata: Record<string, string> = { [META_ENCODING]: meta.encoding };
  if (meta.streamSeq !== null) metadata[META_STREAM_SEQ] = String(meta.streamSeq);
  for (const [k, v] of Object.entries(metadata)) h.set(k, v);
  try {
    const os = await js.views.os(names.bucket);
    return await os.putBlob({ name: names.snapshotKey, headers: h, metadata }, bytes);
  } catch (err) {
    throw wrap(`upload ${names.bucket}/${names.snapshotKey}`, err);
  }
}

/** Deletes the snapshot bucket; false when it did not exist. */
export async function deleteBucket(jsm: JetStreamManager, names: KvNames): Promise<boolean> {
  try {
    return await jsm.streams.delete(`OBJ_${names.bucket}`);
  } catch (err) {
    if (isApiError(err, API_STREAM_NOT_FOUND)) return false;
    throw wrap(`delete bucket ${names.bucket}`, err);
  }
}

/**
 * Downloads the snapshot, then re-reads the object's metadata `intervalMs` later until two
 * consecutive reads agree, at most `attempts` reads (Dynamo: 100 ms, 10). Agreement is
 * byte-equality without a second transfer: nats.js checks the downloaded bytes against the
 * object's SHA-256 digest, so an unchanged (nuid, digest) means a second download would return
 * the same bytes; when the object changed, it is downloaded again. Returns null when the bucket
 * or the object does not exist. A failed download is retried within the attempts; when none
 * succeeds, throws `NatsError` `KVX_NATS_REQUEST_FAILED`.
 */
export async function downloadStableSnapshot(
  jsm: JetStreamManager,
  js: JetStreamClient,
  names: KvNames,
  attempts = 10,
  intervalMs = 100,
): Promise<DownloadedSnapshot | null> {
  try {
    await jsm.streams.info(`OBJ_${names.bucket}`);
  } catch (err) {
    if (isApiError(err, API_STREAM_NOT_FOUND)) return null;
    throw wrap(`bucket ${names.bucket}`, err);
  }
  let os: ObjectStore;
  try {
    os = await js.views.os(names.bucket);
  } catch (err) {
    throw wrap(`open bucket ${names.bucket}`, err);
  }
  let held: { bytes: Uint8Array; info: ObjectInfo } | null = null;
  let downloads = 0;
  let lastError: unknown = null;
  for (let i = 0; i < attempts; i++) {
    if (i > 0) await sleep(intervalMs);
    try {
      if (held !== null) {
        const info = await os.info(names.snapshotKey);
        if (info !== null && !info.deleted && info.nuid === held.info.nuid && info.digest === held.info.digest) {
          return { bytes: held.bytes, meta: readMeta(held.info), downloads, stable: true };
        }
        if (info === null || info.deleted) return null;
      }
      downloads++;
      const got = await downloadOnce(os, names.snapshotKey);
      if (got === null) return null;
      held = got;
    } catch (err) {
      lastError = err;
    }
  }
  if (held !== null) return { bytes: held.bytes, meta: readMeta(held.info), downloads, stable: false };
  throw new NatsError(
    NatsErrorCode.RequestFailed,
    `download ${names.bucket}/${names.snapshotKey}: ${attempts} attempts failed, last error: ${reason(lastError)}`,
    { cause: lastError },
  );
}

async function downloadOnce(os: ObjectStore, key: string): Promise<{ bytes: Uint8Array; info: ObjectInfo } | null> {
  const r = await os.get(key);
  if (r === null) return null;
  const out = new Uint8Array(r.info.size);
  let at = 0;
  const reader = r.data.getReader();
  // If the object is overwritten mid-read, its old chunks are purged and nats.js waits for them
  // forever: give up after 10 s, or 5 MB/s for a large object, and let the caller retry.
  const limitMs = Math.max(10_000, r.info.size / 5_000);
  const timer = setTimeout(() => void reader.cancel().catch(() => undefined), limitMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (at + value.length > out.length) throw new Error(`object ${key} is longer than its recorded size ${out.length}`);
      out.set(value, at);
      at += value.length;
    }
  } finally {
    clearTimeout(timer);
  }
  if (at !== out.length) throw new Error(`object ${key}: got ${at} of ${out.length} bytes (timed out after ${limitMs} ms?)`);
  const err = await r.error;
  if (err) throw err;
  return { bytes: out, info: r.info };
}

function readMeta(info: ObjectInfo): SnapshotMeta {
  const pick = (k: string): string | undefined => {
    const m = info.metadata?.[k];
    if (m !== undefined && m !== '') return m;
    const h = info.headers?.get(k);
    return h === undefined || h === '' ? undefined : h;
  };
  const seqText = pick(META_STREAM_SEQ);
  let streamSeq: number | null = null;
  if (seqText !== undefined) {
    if (!/^[0-9]{1,16}$/.test(seqText)) {
      throw new NatsError(NatsErrorCode.RequestFailed, `snapshot ${info.bucket}/${info.name}: bad ${META_STREAM_SEQ} ${JSON.stringify(seqText)}`);
    }
    streamSeq = Number(seqText);
  }
  const enc = pick(META_ENCODING) ?? 'bincode';
  return { streamSeq, encoding: checkEncoding(enc, `snapshot ${info.bucket}/${info.name} ${META_ENCODING}`) };
}

/**
 * Startup: with `resetStates`, purges the whole stream and deletes the bucket; otherwise loads
 * the stable snapshot into the indexer (then flushed). Logs the outcome: bytes downloaded and
 * events loaded, or a line saying no snapshot exists or that loading was skipped. A snapshot
 * that does not decode throws its `SnapshotDecodeError` (a jsonl line's `EventParseError`)
 * with `onBadSnapshot` 'fail' (starting from part of a snapshot would serve wrong scores);
 * with 'skip' the workers it had loaded are removed again, an error line says the index is
 * partial, and the stream is consumed from its start (outcome 'skipped').
 */
export async function restoreSnapshot(ctx: SnapshotContext, resetStates: boolean, onBadSnapshot: 'fail' | 'skip' = 'fail'): Promise<RestoreReport> {
  const { jsm, js, names, logger } = ctx;
  const started = performance.now();
  if (resetStates) {
    let purged = 0;
    try {
      purged = (await jsm.streams.purge(names.stream)).purged;
    } catch (err) {
      throw wrap(`purge ${names.stream}`, err);
    }
    const deleted = await deleteBucket(jsm, names).catch((err: unknown) => {
      logger?.warn({ bucket: names.bucket, ...errorFields(err) }, 'could not delete the snapshot bucket');
      return false;
    });
    logger?.info(
      { stream: names.stream, purged, bucket: names.bucket, bucketDeleted: deleted },
      'reset states: stream purged and snapshot bucket deleted; initial state loading skipped',
    );
    return { resumeAfter: 0, outcome: 'reset', events: 0, bytes: 0, downloads: 0, durationMs: Math.round(performance.now() - started) };
  }
  let snap: Awaited<ReturnType<typeof downloadStableSnapshot>>;
  try {
    snap = await downloadStableSnapshot(jsm, js, names);
  } catch (err) {
    if (onBadSnapshot === 'fail' || !(err instanceof KvIndexError) || err instanceof NatsError) throw err;
    return skipped(ctx, err, new Set(), started);
  }
  if (snap === null) {
    logger?.info(
      { bucket: names.bucket, key: names.snapshotKey },
      'no snapshot in the object store (likely none taken yet): consuming the stream from the start',
    );
    return { resumeAfter: 0, outcome: 'none', events: 0, bytes: 0, downloads: 0, durationMs: Math.round(performance.now() - started) };
  }
  // A stream_seq past the stream's last sequence cannot be this stream's (sequences only grow,
  // a purge keeps the last): the stream was deleted and created again under the same name while
  // the bucket stayed. Loading it resumed after that sequence and skipped every event of the new
  // stream up to it; its content is the old stream's. It is left alone and not loaded.
  if (snap.meta.streamSeq !== null) {
    const last = (await streamState(jsm, names.stream)).last_seq;
    if (snap.meta.streamSeq > last) {
      logger?.warn(
        { bucket: names.bucket, key: names.snapshotKey, streamSeq: snap.meta.streamSeq, streamLastSeq: last },
        'the stored snapshot is of an earlier stream of this name (its stream_seq is past the stream): not loaded, consuming the stream from the start',
      );
      return { resumeAfter: 0, outcome: 'foreign', events: 0, bytes: snap.bytes.length, downloads: snap.downloads, durationMs: Math.round(performance.now() - started) };
    }
  }
  const downloadMs = performance.now() - started;
  if (!snap.stable) {
    logger?.warn({ downloads: snap.downloads }, 'snapshot kept changing while downloading: using the last download');
  }
  let events = 0;
  const loaded = new Set<bigint>();
  const counted = function* (it: Iterable<RouterEvent>): Generator<RouterEvent> {
    for (const e of it) {
      events++;
      if (onBadSnapshot === 'skip') loaded.add(e.workerId);
      yield e;
    }
  };
  try {
    const enc = snap.meta.encoding;
    // Bincode: words straight from the bytes into trees sized once, checked whole before
    // anything is applied (src/indexer/snapshot-restore.ts); 16.4M pairs restored in ~4 s
    // against ~15 s through event objects (BENCHMARKS.md, "Restore to ready").
    if (enc === 'bincode' || enc === 'bincode-dp') events = (await ctx.indexer.restoreSnapshot(snap.bytes, enc)).events;
    else await ctx.indexer.restore(counted(iterateSnapshot(snap.bytes, enc)));
  } catch (err) {
    // A jsonl snapshot's bad line is an EventParseError (snapshot-reader.ts): as bad a snapshot.
    if (onBadSnapshot === 'fail' || !(err instanceof SnapshotDecodeError || err instanceof EventParseError)) throw err;
    return skipped(ctx, err, loaded, started);
  }
  const report: RestoreReport = {
    resumeAfter: snap.meta.streamSeq ?? 0,
    outcome: 'restored',
    events,
    bytes: snap.bytes.length,
    downloads: snap.downloads,
    durationMs: Math.round(performance.now() - started),
  };
  logger?.info(
    {
      bucket: names.bucket,
      key: names.snapshotKey,
      bytes: report.bytes,
      events,
      encoding: snap.meta.encoding,
      streamSeq: snap.meta.streamSeq,
      downloads: snap.downloads,
      downloadMs: Math.round(downloadMs),
      durationMs: report.durationMs,
    },
    `restored ${events} events (${report.bytes} bytes) from the snapshot; the stream resumes after sequence ${report.resumeAfter}`,
  );
  return report;
}

/** onBadSnapshot 'skip': undoes a partial restore and says loudly that the index is partial. */
async function skipped(ctx: SnapshotContext, err: KvIndexError, loaded: Set<bigint>, started: number): Promise<RestoreReport> {
  for (const w of loaded) await ctx.indexer.removeWorker(w);
  await ctx.indexer.flush();
  ctx.logger?.error(
    { bucket: ctx.names.bucket, key: ctx.names.snapshotKey, code: err.code, err: err.message, workersUnloaded: loaded.size },
    'the snapshot cannot be read and was SKIPPED (--on-bad-snapshot skip): the index holds only what the stream still has, so it is PARTIAL and reports not ready until a new snapshot is taken',
  );
  return { resumeAfter: 0, outcome: 'skipped', events: 0, bytes: 0, downloads: 0, durationMs: Math.round(performance.now() - started) };
}

/** Re-snapshot rounds `healStoredSnapshot` makes at most (each one an upload that can race). */
const HEAL_ROUNDS = 3;

/**
 * Makes the stored snapshot cover every event the stream no longer holds (rule 3 in
 * `takeSnapshot`): while the stored `stream_seq` + 1 is below the stream's first sequence,
 * uploads a new snapshot of this router's current state, if that covers the gap.
 */
async function healStoredSnapshot(ctx: SnapshotContext, encoding: SnapshotEncoding, coveredSeq: () => number): Promise<void> {
  const { jsm, names, logger } = ctx;
  for (let round = 0; round < HEAL_ROUNDS; round++) {
    const { first_seq: first, last_seq: last } = await streamState(jsm, names.stream);
    const storedSeq = await storedSnapshotSeq(ctx.js, names);
    const stored = storedSeq !== null && storedSeq <= last ? storedSeq : null; // past the stream: an earlier stream's
    if ((stored ?? 0) + 1 >= first) return;
    const seq = coveredSeq();
    if (seq + 1 < first) {
      logger?.error({ stream: names.stream, storedSeq: stored, firstSeq: first, appliedSeq: seq }, 'the stored snapshot misses purged events and this router cannot cover them');
      return;
    }
    logger?.warn({ stream: names.stream, storedSeq: stored, firstSeq: first, appliedSeq: seq }, 'the stored snapshot misses purged events (a concurrent snapshot): snapshotting again');
    const bytes = await ctx.indexer.dumpSnapshot(encoding);
    await uploadSnapshot(ctx.js, names, bytes, { streamSeq: seq, encoding });
  }
}

/** The stored snapshot's `stream_seq`, or null (no bucket, no object, or a snapshot without it). */
export async function storedSnapshotSeq(js: JetStreamClient, names: KvNames): Promise<number | null> {
  let info: ObjectInfo | null;
  try {
    info = await (await js.views.os(names.bucket)).info(names.snapshotKey);
  } catch (err) {
    throw wrap(`info ${names.bucket}/${names.snapshotKey}`, err);
  }
  if (info === null || info.deleted) return null;
  return readMeta(info).streamSeq;
}

async function streamState(jsm: JetStreamManager, stream: string): Promise<{ first_seq: number; last_seq: number }> {
  try {
    return (await jsm.streams.info(stream)).state;
  } catch (err) {
    throw wrap(`stream info ${stream}`, err);
  }
}
