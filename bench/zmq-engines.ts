/**
 * The load side of the ZMQ benchmark, run in a worker thread so that it does not share the
 * event loop with the indexer it measures: `publishers` loopback XPUB sockets that publish
 * vLLM 0.26 batches (map events, u64 hashes), each `[ts, events, rank]` with `ts` the publish
 * time in seconds (sub-millisecond, from `performance.timeOrigin + performance.now()`), and an
 * HTTP client that sends `/query` at a fixed rate and reports each latency.
 *
 * A batch: 4 Stored events of 4 blocks of 16 tokens (random tokens, fresh hashes), plus, from
 * the 256th batch on, one Removed event dropping the blocks of the batch 256 before, so the
 * index stays at a steady ~16k blocks per publisher.
 */

import { Agent, request } from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';
import { Encoder } from '@msgpack/msgpack';
import * as zmq from 'zeromq';

export interface EngineLoadData {
  publishers: number;
}

export type EngineCommand =
  | { cmd: 'publish'; batches: number; batchesPerSecond: number }
  | { cmd: 'query'; url: string; perSecond: number; durationMs: number; bodies: string[] }
  | { cmd: 'close' };

export const BLOCK_SIZE = 16;
export const STORES_PER_BATCH = 4;
export const BLOCKS_PER_STORE = 4;
const KEEP = 256;

const enc = new Encoder({ useBigInt64: true });
const now = (): number => (performance.timeOrigin + performance.now()) / 1000;

/** One batch of publisher `p`, number `i` (deterministic hashes and tokens). */
export function batchEvents(p: number, i: number): unknown[] {
  const events: unknown[] = [];
  let rnd = (p * 1_000_003 + i * 7919 + 1) >>> 0;
  const next = (): number => (rnd = (Math.imul(rnd, 1_664_525) + 1_013_904_223) >>> 0);
  const hashes = (k: number): bigint[] =>
    Array.from({ length: BLOCKS_PER_STORE }, (_, b) => (BigInt(p + 1) << 48n) | (BigInt(k) * 8n + BigInt(b)) | (1n << 63n));
  for (let s = 0; s < STORES_PER_BATCH; s++) {
    const tokens = Array.from({ length: BLOCK_SIZE * BLOCKS_PER_STORE }, () => next() % 128_000);
    events.push({ type: 'BlockStored', block_hashes: hashes(i * STORES_PER_BATCH + s), parent_block_hash: null, token_ids: tokens, block_size: BLOCK_SIZE, lora_id: null, medium: 'GPU', lora_name: null, extra_keys: null, group_idx: 0, kv_cache_spec_kind: 'full_attention' });
  }
  if (i >= KEEP) {
    const old: bigint[] = [];
    for (let s = 0; s < STORES_PER_BATCH; s++) old.push(...hashes((i - KEEP) * STORES_PER_BATCH + s));
    events.push({ type: 'BlockRemoved', block_hashes: old, medium: 'GPU' });
  }
  return events;
}

/** The payload of one batch, msgpack-encoded. */
export function encodeBatch(p: number, i: number, ts: number): Uint8Array {
  return enc.encode([ts, batchEvents(p, i), 0]);
}

// node:http with keep-alive: fetch (undici) cost ~3x more client CPU per request here, and the
// client shares the 2 cores with the server it measures.
const agent = new Agent({ keepAlive: true, maxSockets: 32 });

/** POSTs `body` and resolves with the latency in ms, once the whole answer is read. */
function post(url: string, body: string): Promise<number> {
  const t0 = performance.now();
  // The send time on the shared clock (timeOrigin + now), so the server can tell how long the
  // request waited before its event loop took it.
  const sent = String(performance.timeOrigin + t0);
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-sent-at': sent } }, (res) => {
      res.resume();
      res.on('end', () => resolve(performance.now() - t0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function main(): Promise<void> {
  const port = parentPort!;
  const { publishers } = workerData as EngineLoadData;
  const pubs: zmq.XPublisher[] = [];
  for (let p = 0; p < publishers; p++) {
    const s = new zmq.XPublisher({ linger: 0, sendHighWaterMark: 1_000_000 });
    await s.bind('tcp://127.0.0.1:0');
    pubs.push(s);
  }
  port.postMessage({ endpoints: pubs.map((s) => s.lastEndpoint) });
  if (publishers === 0) port.postMessage({ subscribed: true });
  // Wait for every subscription (the slow joiner), read from the XPUB.
  await Promise.all(pubs.map(async (s) => {
    for (;;) if ((await s.receive())[0]?.[0] === 1) return;
  }));
  port.postMessage({ subscribed: true });
  const seqs = pubs.map(() => 0);
  port.on('message', (m: EngineCommand) => {
    void (async () => {
      if (m.cmd === 'close') {
        for (const s of pubs) s.close();
        port.close();
        return;
      }
      if (m.cmd === 'publish') {
        const start = performance.now();
        const seqFrame = Buffer.alloc(8);
        for (let i = 0; i < m.batches; i++) {
          if (m.batchesPerSecond > 0) {
            const due = start + (i * 1000) / m.batchesPerSecond;
            const wait = due - performance.now();
            if (wait > 1) await new Promise((r) => setTimeout(r, wait));
          }
          const p = i % pubs.length;
          seqFrame.writeBigUInt64BE(BigInt(seqs[p]!));
          await pubs[p]!.send(['', seqFrame, encodeBatch(p, seqs[p]!, now())]);
          seqs[p]!++;
        }
        port.postMessage({ published: m.batches, ms: performance.now() - start });
        return;
      }
      // Open loop: request k leaves at start + k / rate whatever the earlier ones do.
      const lat: number[] = [];
      const start = performance.now();
      const n = Math.floor((m.durationMs / 1000) * m.perSecond);
      const inflight: Array<Promise<void>> = [];
      for (let k = 0; k < n; k++) {
        const due = start + (k * 1000) / m.perSecond;
        const wait = due - performance.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        const body = m.bodies[k % m.bodies.length]!;
        inflight.push(post(m.url, body).then((ms) => void lat.push(ms)));
      }
      await Promise.all(inflight);
      port.postMessage({ latencies: lat, ms: performance.now() - start });
    })();
  });
}

if (parentPort !== null && (workerData as EngineLoadData | undefined)?.publishers !== undefined) void main();
