/**
 * Writes a fleet workload (fleet-workload.ts) in the replay workload format of
 * shared/workloads/README.md: a meta line, every engine's events as `{"op":"event",...}` lines
 * (Dynamo's RouterEvent serde layout), then lookups of the final state as `{"op":"match",...}`
 * lines with each engine's expected score. `kvindex replay` runs the file and checks every
 * score.
 *
 * Bytes are written straight into a reused buffer, u64s from their u32 halves
 * (protocol/u64-decimal.ts): 16.4M pairs are ~1.3 GB of JSON, and a bigint `toString` per hash
 * would be ~33M allocations. The caller drains `take()` into its stream whenever `pending` grows
 * past a chunk, so memory stays at one chunk plus the longest line.
 */
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { writeU64Decimal, writeUintDecimal } from '../protocol/u64-decimal.js';
import type { TraceRequest } from './mooncake.js';
import { FleetWorkload, type FleetLookup, type FleetSink, type FleetWorkloadOptions, type FleetWorkloadStats } from './fleet-workload.js';

const enc = new TextEncoder();
const bytes = (s: string): Uint8Array => enc.encode(s);

const EVENT_HEAD = bytes('{"op":"event","event":{"worker_id":');
const EVENT_ID = bytes(',"event":{"event_id":');
const REMOVED = bytes(',"data":{"removed":{"block_hashes":[');
const REMOVED_END = bytes(']}}}}}\n');
const STORED = bytes(',"data":{"stored":{"parent_hash":');
const NULL = bytes('null');
const BLOCKS = bytes(',"blocks":[');
const BLOCK_HASH = bytes('{"block_hash":');
const TOKENS_HASH = bytes(',"tokens_hash":');
const STORED_END = bytes('}]}}}}}\n');
const MATCH = bytes('{"op":"match","seq":[');
const EXPECT = bytes('],"expect":{');
const MATCH_END = bytes('}}\n');

/** Bytes a line may need per block or hash at most (two u64s and the keys). */
const PER_BLOCK = 80;

/** A `FleetSink` that renders the replay workload format into bytes. */
export class FleetWorkloadWriter implements FleetSink {
  private buf = new Uint8Array(2 << 20);
  private pos = 0;
  private readonly ids: Uint8Array[];

  /** `workerIds`: the engines' worker ids, in engine order (`FleetWorkload.config.workerIds`). */
  constructor(workerIds: readonly bigint[]) {
    this.ids = workerIds.map((id) => bytes(id.toString()));
  }

  /** Bytes written and not yet taken. */
  get pending(): number {
    return this.pos;
  }

  /** The bytes written so far (a copy), leaving the writer empty. */
  take(): Uint8Array {
    const out = this.buf.slice(0, this.pos);
    this.pos = 0;
    return out;
  }

  /** Writes the meta line (`source`: the trace's file name). */
  meta(fleet: FleetWorkload, source: string): void {
    const c = fleet.config;
    const meta = {
      op: 'meta',
      format: 'dynamo-kv-router-replay',
      version: 1,
      generator: 'kvindex fleet',
      source,
      block_size: Math.floor(512 / c.subBlocks),
      sub_blocks_per_hash_id: c.subBlocks,
      workers: c.workerIds.map(String),
      engines: c.engines,
      cache_blocks: c.blocksPerEngine,
      routing: 'session-affine',
      seed: c.seed.toString(),
      shared_fraction: c.sharedFraction,
      streams: c.streams,
      xxh3_seed: 1337,
      external_hash: 'dynamo',
    };
    const line = bytes(`${JSON.stringify(meta)}\n`);
    this.reserve(line.length);
    this.raw(line);
  }

  removed(engine: number, eventId: number, hashes: readonly number[]): void {
    this.reserve(200 + 21 * hashes.length);
    this.head(engine, eventId);
    this.raw(REMOVED);
    for (let i = 0; i < hashes.length; i += 2) {
      if (i > 0) this.buf[this.pos++] = 0x2c;
      this.pos = writeU64Decimal(this.buf, this.pos, hashes[i]!, hashes[i + 1]!);
    }
    this.raw(REMOVED_END);
  }

  stored(engine: number, eventId: number, seq: BigUint64Array, local: BigUint64Array, from: number, to: number): void {
    this.reserve(200 + PER_BLOCK * (to - from));
    const s = new Uint32Array(seq.buffer, seq.byteOffset, seq.length * 2);
    const l = new Uint32Array(local.buffer, local.byteOffset, local.length * 2);
    this.head(engine, eventId);
    this.raw(STORED);
    if (from === 0) this.raw(NULL);
    else this.pos = writeU64Decimal(this.buf, this.pos, s[2 * from - 2]!, s[2 * from - 1]!);
    this.raw(BLOCKS);
    for (let i = from; i < to; i++) {
      if (i > from) {
        this.buf[this.pos++] = 0x7d; // }
        this.buf[this.pos++] = 0x2c; // ,
      }
      this.raw(BLOCK_HASH);
      this.pos = writeU64Decimal(this.buf, this.pos, s[2 * i]!, s[2 * i + 1]!);
      this.raw(TOKENS_HASH);
      this.pos = writeU64Decimal(this.buf, this.pos, l[2 * i]!, l[2 * i + 1]!);
    }
    this.raw(STORED_END);
  }

  /** Writes a lookup with its expected scores (engines with a score of 0 are absent). */
  match(lookup: FleetLookup): void {
    const { seq, expect } = lookup;
    this.reserve(100 + 21 * seq.length + 40 * expect.size);
    const w = new Uint32Array(seq.buffer, seq.byteOffset, seq.length * 2);
    this.raw(MATCH);
    for (let i = 0; i < seq.length; i++) {
      if (i > 0) this.buf[this.pos++] = 0x2c;
      this.pos = writeU64Decimal(this.buf, this.pos, w[2 * i]!, w[2 * i + 1]!);
    }
    this.raw(EXPECT);
    let first = true;
    for (const [engine, score] of expect) {
      if (!first) this.buf[this.pos++] = 0x2c;
      first = false;
      this.buf[this.pos++] = 0x22; // "
      this.raw(this.ids[engine]!);
      this.buf[this.pos++] = 0x22;
      this.buf[this.pos++] = 0x3a; // :
      this.pos = writeUintDecimal(this.buf, this.pos, score);
    }
    this.raw(MATCH_END);
  }

  private head(engine: number, eventId: number): void {
    this.raw(EVENT_HEAD);
    this.raw(this.ids[engine]!);
    this.raw(EVENT_ID);
    this.pos = writeUintDecimal(this.buf, this.pos, eventId);
  }

  private raw(b: Uint8Array): void {
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** Room for `n` more bytes. */
  private reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.pos + n, this.buf.length * 2));
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }
}

/** Bytes gathered before they are handed to the stream. */
const CHUNK = 1 << 20;

export interface WriteFleetOptions extends FleetWorkloadOptions {
  /** Lookups of the final state written at the end, with expected scores (default 1,000). */
  lookups?: number;
  /** The trace's name for the meta line. */
  source?: string;
  /** Called after each chunk written (for progress): the stats so far. */
  onChunk?: (stats: FleetWorkloadStats) => void;
}

/**
 * Generates a fleet workload from `requests` and writes it to `out` (honouring backpressure),
 * then ends nothing: the caller owns `out`. Resolves to the generator's stats.
 */
export async function writeFleetWorkload(requests: readonly TraceRequest[], out: Writable, options: WriteFleetOptions = {}): Promise<FleetWorkloadStats> {
  const fleet = new FleetWorkload(requests, options);
  const w = new FleetWorkloadWriter(fleet.config.workerIds);
  const drain = async (): Promise<void> => {
    if (!out.write(w.take())) await once(out, 'drain');
    options.onChunk?.(fleet.stats);
  };
  w.meta(fleet, options.source ?? 'trace');
  while (fleet.step(w)) if (w.pending >= CHUNK) await drain();
  let pendingMatch: FleetLookup[] = [];
  fleet.lookups(options.lookups ?? 1000, (l) => pendingMatch.push(l));
  for (const l of pendingMatch) {
    w.match(l);
    if (w.pending >= CHUNK) await drain();
  }
  pendingMatch = [];
  await drain();
  return fleet.stats;
}
