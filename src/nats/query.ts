/**
 * findMatches over NATS request/reply, for routers in other processes (`kvindex serve` runs the
 * service; `requestFindMatches` is the client side). Not part of Dynamo: Dynamo routers hold
 * their own index.
 *
 * Subject: `namespace-<ns>-component-<comp>.kvindex.find` (`kvNames().querySubject`), served in
 * the queue group `kvindex`, so replicas share the requests. It is outside the stream's subjects
 * (`<stream>.*`), so requests are never stored.
 *
 * Request, a JSON object with exactly one of:
 *   {"tokens":[1,2,3,...]}        token ids (u32), hashed into blocks of the server's block size
 *                                 (xxh3-64, seed 1337, full blocks only)
 *   {"hashes":["14643705804678351452",4945711292740353085]}
 *                                 the LocalBlockHash sequence; each u64 as a decimal string or
 *                                 a JSON integer (read losslessly, never through JSON.parse)
 * With "tokens", Dynamo's block identity options (`computeBlockHashes`'s `BlockHashOptions`):
 *   "lora_name":"sql-lora"        the LoRA adapter (string or null; "" is the base model)
 *   "block_mm_hashes":[null,["5764607523034234880",42]]
 *                                 per block, the mm_hash (u64, as "hashes") of each multimodal
 *                                 object in it; null or [] for a block without any
 * With "hashes" they are an error: the hashes already carry the identity.
 * Other keys are ignored.
 *
 * Reply:
 *   {"scores":{"7587889975016782855":2},"frequencies":[],"stream_seq":1234}
 * `scores` maps worker ids (decimal strings: they exceed 2^53) to the number of leading blocks
 * of the sequence the worker holds (workers at 0 are absent); `frequencies` as Dynamo's
 * OverlapScores (empty unless the indexer has an expiration window); `stream_seq` is the last
 * stream sequence applied when the lookup was sent to the shards: the scores reflect every event
 * through it, and maybe some later ones (null without a subscriber).
 *
 * Error reply: {"error":{"code":"KVX_NATS_BAD_QUERY","message":"hashes[2]: ..."}}, or the
 * indexer's code (e.g. KVX_CLOSED).
 */

import type { Msg, NatsConnection, Subscription } from 'nats';
import type { Logger } from 'pino';
import type { BlockHashOptions } from '../hash/block-hash.js';
import { parseJsonLossless, type JsonObject, type JsonValue } from '../protocol/json-value.js';
import { U64_MAX, type OverlapScores } from '../protocol/types.js';
import type { ShardedIndexer } from '../indexer/sharded-indexer.js';
import { NatsError, NatsErrorCode, errorFields, errorReply, reason } from './errors.js';
import { clipText, showValue } from '../protocol/show-value.js';
import { replySafely } from './reply.js';

/** A parsed findMatches request. */
export type FindRequest =
  | { tokens: Uint32Array; loraName: string | null; blockMmHashes: Array<BigUint64Array | null> | null }
  | { hashes: BigUint64Array };

export interface QueryServiceOptions {
  /** Queue group; null to have every instance answer. Default 'kvindex'. */
  queue?: string | null;
  /** Reported as `stream_seq` in replies (e.g. `() => subscriber.lastAppliedSeq`). */
  appliedSeq?: () => number;
  /** Called with each answered lookup's duration, ms (metrics). */
  onLookup?: (ms: number) => void;
  logger?: Logger;
}

const encoder = new TextEncoder();

function bad(message: string): never {
  throw new NatsError(NatsErrorCode.BadQuery, message);
}

/** A u64 given as a JSON integer (a bigint from the lossless parser) or a decimal string. */
function u64Of(value: JsonValue | undefined, label: string): bigint {
  let v: bigint | null = null;
  if (typeof value === 'bigint') v = value;
  else if (typeof value === 'string' && /^[0-9]{1,20}$/.test(value)) v = BigInt(value);
  if (v === null || v < 0n || v > U64_MAX) bad(`${label}: expected a u64 as a decimal string or integer, got ${showValue(value)}`);
  return v;
}

function u64ArrayOf(value: JsonValue[], label: string): BigUint64Array {
  const out = new BigUint64Array(value.length);
  for (let i = 0; i < value.length; i++) out[i] = u64Of(value[i], `${label}[${i}]`);
  return out;
}

function blockMmHashesOf(value: JsonValue | undefined): Array<BigUint64Array | null> | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) bad('block_mm_hashes: expected an array (one entry per block) or null');
  return value.map((entry, i) => {
    if (entry === null) return null;
    if (!Array.isArray(entry)) bad(`block_mm_hashes[${i}]: expected an array of u64 or null`);
    return u64ArrayOf(entry, `block_mm_hashes[${i}]`);
  });
}

/** A request body as a JSON object (integers exact); throws `NatsError` `KVX_NATS_BAD_QUERY`. */
export function parseRequestObject(body: Uint8Array | string): JsonObject {
  let value: JsonValue;
  try {
    value = parseJsonLossless(body);
  } catch (err) {
    return bad(`request is not JSON: ${reason(err)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) bad('request: expected a JSON object');
  return value as JsonObject;
}

/** Parses a request body; throws `NatsError` `KVX_NATS_BAD_QUERY` naming the bad field. */
export function parseFindRequest(body: Uint8Array | string): FindRequest {
  const obj = parseRequestObject(body);
  const tokens = obj['tokens'];
  const hashes = obj['hashes'];
  if ((tokens === undefined) === (hashes === undefined)) bad('request: expected exactly one of "tokens" and "hashes"');
  const loraName = obj['lora_name'];
  const mm = obj['block_mm_hashes'];
  if (tokens !== undefined) {
    if (!Array.isArray(tokens)) bad('tokens: expected an array');
    const out = new Uint32Array(tokens.length);
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (typeof t !== 'bigint' || t < 0n || t > 0xffff_ffffn) bad(`tokens[${i}]: expected an integer in [0, 2^32-1], got ${showValue(t)}`);
      out[i] = Number(t);
    }
    if (loraName !== undefined && loraName !== null && typeof loraName !== 'string') {
      bad(`lora_name: expected a string or null, got ${showValue(loraName)}`);
    }
    return { tokens: out, loraName: loraName ?? null, blockMmHashes: blockMmHashesOf(mm) };
  }
  if ((loraName !== undefined && loraName !== null) || (mm !== undefined && mm !== null)) {
    bad('lora_name, block_mm_hashes: only with "tokens" (block hashes already carry the block identity)');
  }
  if (!Array.isArray(hashes)) bad('hashes: expected an array');
  return { hashes: u64ArrayOf(hashes, 'hashes') };
}

/** The reply body for scores (worker ids as decimal-string keys). */
export function formatFindReply(scores: OverlapScores, streamSeq: number | null): string {
  let s = '{"scores":{';
  let first = true;
  for (const [worker, n] of scores.scores) {
    s += (first ? '"' : ',"') + worker.toString() + '":' + n;
    first = false;
  }
  return s + '},"frequencies":[' + scores.frequencies.join(',') + '],"stream_seq":' + (streamSeq === null ? 'null' : String(streamSeq)) + '}';
}


/** Answers findMatches requests for one indexer on one subject. */
export class KvQueryService {
  readonly subject: string;
  private readonly sub: Subscription;
  private served = 0;
  private failed = 0;

  private constructor(sub: Subscription, subject: string) {
    this.sub = sub;
    this.subject = subject;
  }

  /** Subscribes on `subject` (see the file comment for the format). */
  static start(nc: NatsConnection, indexer: ShardedIndexer, subject: string, options: QueryServiceOptions = {}): KvQueryService {
    const logger = options.logger ?? null;
    const applied = options.appliedSeq ?? null;
    const onLookup = options.onLookup ?? null;
    const queue = options.queue === undefined ? 'kvindex' : options.queue;
    let service: KvQueryService | null = null;
    const answer = async (m: Msg): Promise<void> => {
      let reply: string;
      try {
        const req = parseFindRequest(m.data);
        // Read before the lookup is sent: everything through this sequence was applied before
        // the lookup reaches the shards (FIFO per shard), so the scores reflect at least it.
        // Read after, a commit landing during the lookup would claim events the scores lack.
        const seq = applied === null ? null : applied();
        const t0 = performance.now();
        const scores = 'tokens' in req ? await indexer.findMatchesForTokens(req.tokens, req) : await indexer.findMatches(req.hashes);
        onLookup?.(performance.now() - t0);
        reply = formatFindReply(scores, seq);
        if (service !== null) service.served++;
      } catch (err) {
        reply = errorReply(err);
        if (service !== null) service.failed++;
        logger?.debug({ subject, ...errorFields(err) }, 'findMatches request failed');
      }
      replySafely(m, reply, subject, logger);
    };
    const sub = nc.subscribe(subject, {
      ...(queue === null ? {} : { queue }),
      callback: (err, m) => {
        if (err !== null) {
          logger?.warn({ subject, ...errorFields(err) }, 'query subscription failed');
          return;
        }
        void answer(m);
      },
    });
    service = new KvQueryService(sub, subject);
    logger?.debug({ subject, queue }, 'findMatches service started');
    return service;
  }

  /** Requests answered with scores, and with an error. */
  stats(): { served: number; failed: number } {
    return { served: this.served, failed: this.failed };
  }

  /** Stops taking requests; requests already received are still answered. */
  async stop(): Promise<void> {
    if (!this.sub.isClosed()) await this.sub.drain().catch(() => undefined);
  }
}

/** Scores from a remote `kvindex serve`, with the stream sequence it had applied. */
export interface RemoteScores extends OverlapScores {
  streamSeq: number | null;
}

/** What `requestFindMatches` asks: tokens (with the block identity options) or block hashes. */
export type FindQuery =
  | ({ tokens: ArrayLike<number> } & Pick<BlockHashOptions, 'loraName'> & {
      blockMmHashes?: ReadonlyArray<ArrayLike<bigint> | null | undefined> | null | undefined;
    })
  | { hashes: ArrayLike<bigint> };

/** The request body for `query`, every u64 as a decimal string. */
export function formatFindRequest(query: FindQuery): string {
  if (!('tokens' in query)) return `{"hashes":[${Array.from(query.hashes, (h) => `"${h.toString()}"`).join(',')}]}`;
  let body = `{"tokens":[${Array.from(query.tokens).join(',')}]`;
  if (query.loraName !== undefined && query.loraName !== null) body += `,"lora_name":${JSON.stringify(query.loraName)}`;
  const mm = query.blockMmHashes;
  if (mm !== undefined && mm !== null) {
    const entries = Array.from(mm, (e) => (e === undefined || e === null ? 'null' : `[${Array.from(e, (h) => `"${h.toString()}"`).join(',')}]`));
    body += `,"block_mm_hashes":[${entries.join(',')}]`;
  }
  return body + '}';
}

/**
 * Sends a findMatches request to the `KvQueryService` (what `kvindex serve --nats` runs) on
 * `subject` and parses the reply. The service listens on
 * `namespace-<ns>-component-<comp>.kvindex.find` (queue group `kvindex`): pass
 * `kvNames(namespace, component).querySubject`, e.g.
 * `namespace-dynamo-component-backend.kvindex.find` for Dynamo's default names. Throws
 * `NatsError` `KVX_NATS_BAD_QUERY` for an error reply, `KVX_NATS_REQUEST_FAILED` when no
 * service answers within `timeoutMs`.
 */
export async function requestFindMatches(
  nc: NatsConnection,
  subject: string,
  query: FindQuery,
  timeoutMs = 5_000,
): Promise<RemoteScores> {
  const body = formatFindRequest(query);
  let m: Msg;
  try {
    m = await nc.request(subject, encoder.encode(body), { timeout: timeoutMs });
  } catch (err) {
    throw new NatsError(NatsErrorCode.RequestFailed, `findMatches on ${subject}: ${reason(err)}`, { cause: err });
  }
  const value = parseJsonLossless(m.data);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) bad('reply: expected a JSON object');
  const obj = value as JsonObject;
  const error = obj['error'];
  if (error !== undefined) {
    // The service's message, and its code when it is not the one thrown here: printed as
    // `[KVX_NATS_BAD_QUERY] ... failed: [KVX_NATS_BAD_QUERY] ...` it read twice.
    const e = (typeof error === 'object' && error !== null ? error : {}) as JsonObject;
    const text = typeof e['message'] === 'string' ? clipText(e['message']) : showValue(e['message']);
    const code = typeof e['code'] === 'string' ? clipText(e['code'], 40) : showValue(e['code']);
    bad(`findMatches on ${subject} failed: ${text}${code === NatsErrorCode.BadQuery ? '' : ` (the service's code: ${code})`}`);
  }
  const scores = new Map<bigint, number>();
  const raw = obj['scores'];
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) bad('reply.scores: expected an object');
  for (const [k, v] of Object.entries(raw as JsonObject)) {
    if (!/^[0-9]{1,20}$/.test(k) || typeof v !== 'bigint') bad(`reply.scores: bad entry ${k}`);
    scores.set(BigInt(k), Number(v));
  }
  const freq = obj['frequencies'];
  const frequencies = Array.isArray(freq) ? freq.map((f) => Number(f)) : [];
  const seq = obj['stream_seq'];
  return { scores, frequencies, streamSeq: typeof seq === 'bigint' ? Number(seq) : null };
}
