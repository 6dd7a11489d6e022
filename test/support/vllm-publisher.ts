/**
 * A test engine that publishes KV events exactly as vLLM's `ZmqEventPublisher` does (and SGLang's
 * copy): frames `[topic, seq (u64 BE, from 0), msgpack [ts, events, rank?]]`, events as tagged
 * arrays or (vLLM >= 0.26) tagged maps, hashes as u64, i64 or bytes, and a ROUTER replay socket
 * answering a DEALER's `["", start]` with either reply layout. Loopback only.
 *
 * The live socket is an XPUB: on the wire it is a PUB, but it also reads the subscriptions, so a
 * test can wait until the indexer's SUB has subscribed instead of sleeping (the slow joiner).
 */

import * as zmq from 'zeromq';
import { Encoder } from '@msgpack/msgpack';
import { freePort } from './free-port.js';

export type HashEncoding = 'uint' | 'int' | 'bytes';
export type EventEncoding = 'map' | 'array';
/** `garbled`: an out-of-protocol replay server (4-byte seq frames), for the hostile cases. */
export type ReplayLayout = 'legacy' | 'topic' | 'garbled';

export interface StoredSpec {
  hashes: bigint[];
  parent?: bigint | null;
  tokens: number[];
  blockSize: number;
  medium?: string | null;
  loraName?: string | null;
  extraKeys?: unknown[] | null;
  groupIdx?: number | null;
  kind?: string | null;
}

export type EventSpec = { stored: StoredSpec } | { removed: bigint[]; medium?: string | null; groupIdx?: number } | 'cleared';

export interface PublisherOptions {
  /** `tcp://127.0.0.1:0` binds a free port; a connect endpoint makes the engine connect. */
  endpoint?: string;
  connect?: boolean;
  rank?: number | null;
  topic?: string;
  events?: EventEncoding;
  hashes?: HashEncoding;
  replay?: ReplayLayout | null;
  replayEndpoint?: string;
}

const encoder = new Encoder({ useBigInt64: true });
const END_SEQ = new Uint8Array(8).fill(0xff);

function seqBytes(seq: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(seq);
  return b;
}

export class VllmPublisher {
  readonly pub: zmq.XPublisher;
  readonly router: zmq.Router | null;
  readonly topic: string;
  readonly rank: number | null;
  events: EventEncoding;
  hashes: HashEncoding;
  replayLayout: ReplayLayout | null;
  seq = 0n;
  /** seq -> serialised batch, as vLLM's replay ring. */
  readonly ring = new Map<bigint, Buffer>();
  #subscribed: Promise<void>;
  #closed = false;

  private constructor(pub: zmq.XPublisher, router: zmq.Router | null, o: PublisherOptions) {
    this.pub = pub;
    this.router = router;
    this.topic = o.topic ?? '';
    this.rank = o.rank === undefined ? 0 : o.rank;
    this.events = o.events ?? 'map';
    this.hashes = o.hashes ?? 'uint';
    this.replayLayout = o.replay ?? null;
    this.#subscribed = (async () => {
      for (;;) {
        const [frame] = await pub.receive();
        if (frame !== undefined && frame[0] === 1) return;
      }
    })();
    this.#subscribed.catch(() => {});
    if (router !== null) void this.#serveReplay(router);
  }

  static async start(o: PublisherOptions = {}): Promise<VllmPublisher> {
    const pub = new zmq.XPublisher({ linger: 0, sendHighWaterMark: 100_000 });
    if (o.connect === true) pub.connect(o.endpoint!);
    else await pub.bind(o.endpoint ?? 'tcp://127.0.0.1:0');
    let router: zmq.Router | null = null;
    if (o.replay != null) {
      router = new zmq.Router({ linger: 0 });
      await router.bind(o.replayEndpoint ?? 'tcp://127.0.0.1:0');
    }
    return new VllmPublisher(pub, router, o);
  }

  /** Rank 0 and rank 1 publishers on ports P and P+1, as vLLM offsets them. */
  static async startRanks(n: number, o: PublisherOptions = {}): Promise<VllmPublisher[]> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const first = await VllmPublisher.start({ ...o, rank: 0 });
      const port = Number(/:(\d+)$/.exec(first.endpoint)![1]);
      const rest: VllmPublisher[] = [];
      try {
        for (let r = 1; r < n; r++) rest.push(await VllmPublisher.start({ ...o, rank: r, endpoint: `tcp://127.0.0.1:${port + r}` }));
        return [first, ...rest];
      } catch {
        first.close();
        for (const p of rest) p.close();
      }
    }
    throw new Error('no run of free ports');
  }

  get endpoint(): string {
    return this.pub.lastEndpoint!;
  }

  get replayEndpoint(): string {
    return this.router!.lastEndpoint!;
  }

  /** Resolves once a subscriber has subscribed. */
  subscribed(): Promise<void> {
    return this.#subscribed;
  }

  hash(h: bigint): bigint | Uint8Array {
    if (this.hashes === 'int') return BigInt.asIntN(64, h);
    if (this.hashes === 'bytes') {
      // A sha256-sized digest whose last 8 bytes are the hash.
      const b = new Uint8Array(32).fill(0xab);
      new DataView(b.buffer).setBigUint64(24, h);
      return b;
    }
    return h;
  }

  encodeEvent(e: EventSpec): unknown {
    if (e === 'cleared') return this.events === 'map' ? { type: 'AllBlocksCleared' } : ['AllBlocksCleared'];
    if ('removed' in e) {
      const hashes = e.removed.map((h) => this.hash(h));
      if (this.events === 'map') return { type: 'BlockRemoved', block_hashes: hashes, medium: e.medium ?? 'GPU', ...(e.groupIdx === undefined ? {} : { group_idx: e.groupIdx }) };
      return e.groupIdx === undefined ? ['BlockRemoved', hashes, e.medium ?? 'GPU'] : ['BlockRemoved', hashes, e.medium ?? 'GPU', e.groupIdx];
    }
    const s = e.stored;
    const f = {
      block_hashes: s.hashes.map((h) => this.hash(h)),
      parent_block_hash: s.parent == null ? null : this.hash(s.parent),
      token_ids: s.tokens,
      block_size: s.blockSize,
      lora_id: null,
      medium: s.medium === undefined ? 'GPU' : s.medium,
      lora_name: s.loraName ?? null,
      extra_keys: s.extraKeys ?? null,
      group_idx: s.groupIdx ?? 0,
      kv_cache_spec_kind: s.kind === undefined ? 'full_attention' : s.kind,
    };
    if (this.events === 'map') return { type: 'BlockStored', ...f, some_future_field: [1, 2] };
    // Older vLLM / SGLang: positional, and SGLang stops after lora_id when the rest is default.
    const arr: unknown[] = ['BlockStored', f.block_hashes, f.parent_block_hash, f.token_ids, f.block_size, f.lora_id];
    if (s.medium !== undefined || s.loraName != null || s.extraKeys != null || s.kind !== undefined || s.groupIdx != null) {
      arr.push(f.medium, f.lora_name, f.extra_keys, f.group_idx, f.kv_cache_spec_kind);
    }
    return arr;
  }

  payload(events: EventSpec[], ts = Date.now() / 1000): Buffer {
    const batch: unknown[] = [ts, events.map((e) => this.encodeEvent(e))];
    if (this.rank !== null) batch.push(this.rank);
    const bytes = encoder.encode(batch);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Publishes one batch and returns its seq. */
  async publish(events: EventSpec[]): Promise<bigint> {
    return this.publishRaw(this.payload(events));
  }

  async publishRaw(payload: Buffer): Promise<bigint> {
    const seq = this.seq++;
    this.ring.set(seq, payload);
    await this.pub.send([this.topic, seqBytes(seq), payload]);
    return seq;
  }

  /** Records a batch in the replay ring without sending it live (a message the SUB missed). */
  drop(events: EventSpec[]): bigint {
    const seq = this.seq++;
    this.ring.set(seq, this.payload(events));
    return seq;
  }

  /** The engine restarted: seq back to 0, the ring empty. */
  restart(): void {
    this.seq = 0n;
    this.ring.clear();
  }

  async #serveReplay(router: zmq.Router): Promise<void> {
    for (;;) {
      let msg: Buffer[];
      try {
        msg = await router.receive();
      } catch {
        return;
      }
      if (msg.length !== 3 || this.#closed) continue;
      const [id, , start] = msg as [Buffer, Buffer, Buffer];
      const from = start.readBigUInt64BE(0);
      if (this.replayLayout === 'garbled') {
        await router.send([id, '', Buffer.alloc(4), Buffer.from([0x90])]);
        continue;
      }
      const legacy = this.replayLayout === 'legacy';
      for (const [seq, payload] of [...this.ring].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
        if (seq < from) continue;
        await router.send(legacy ? [id, '', seqBytes(seq), payload] : [id, '', this.topic, seqBytes(seq), payload]);
      }
      await router.send(legacy ? [id, '', END_SEQ, ''] : [id, '', '', END_SEQ, '']);
    }
  }

  close(): void {
    this.#closed = true;
    this.pub.close();
    this.router?.close();
  }
}

/** A loopback endpoint on which nothing listens (a port below the ephemeral range: free-port.ts). */
export async function closedEndpoint(): Promise<string> {
  return `tcp://127.0.0.1:${await freePort()}`;
}

/** Polls `cond` every 10 ms until true, failing after `timeoutMs` (generous: CPU is shared). */
export async function until(cond: () => boolean, timeoutMs = 15_000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** True when the optional ZMQ dependencies are installed (tests skip otherwise). */
export async function zmqAvailable(): Promise<boolean> {
  try {
    await import('zeromq');
    await import('@msgpack/msgpack');
    return true;
  } catch {
    return false;
  }
}
