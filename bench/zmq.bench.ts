/**
 * ZMQ engine events and the standalone HTTP API (issue 11), on loopback:
 * - decode cost: `decodeBatch` (@msgpack/msgpack, `useBigInt64`) of one batch, map and array
 *   encodings, and decode + conversion (token hashing) per event;
 * - throughput: 8 publishers in a worker thread blast batches (4 stores of 4 x 16-token blocks,
 *   one removal) at 8 `ZmqKvSource`s into one `EngineIndex`; events/s and stored blocks/s from
 *   the first batch applied to the last;
 * - lag: the same at a fixed 100k stored blocks/s; publish-to-applied lag per batch (the batch's
 *   `ts` against the clock when its events are applied);
 * - `/query`: fastify with the indexer routes on the main thread, 8 engines ingesting at 50k
 *   blocks/s, an open-loop client in a second worker at 1,000 requests/s of 1,024-token prompts.
 * Targets (issue 11): >= 100k stored blocks/s, lag p99 <= 50 ms, /query p99 <= 2 ms at 1,000 req/s.
 */

import { fork, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Decoder, Encoder } from '@msgpack/msgpack';
import Fastify from 'fastify';
import { Bench } from 'tinybench';
import { EngineRegistry } from '../src/http/engine-registry.js';
import { registerIndexerRoutes } from '../src/http/indexer-routes.js';
import { EventConverter } from '../src/zmq/convert.js';
import { EngineIndex } from '../src/zmq/engine-index.js';
import { ZmqKvSource } from '../src/zmq/source.js';
import { decodeBatch, decodeBatchGeneric, type EngineEvent } from '../src/zmq/wire.js';
import { bytesLeftPerCall, percentile, quiesce, table, type SuiteOptions, type SuiteResult } from './suite.js';
import type { LoadCommand, LoadReply } from './http-load.js';
import { batchEvents, BLOCK_SIZE, BLOCKS_PER_STORE, encodeBatch, STORES_PER_BATCH, type EngineCommand } from './zmq-engines.js';

const TITLE = 'ZMQ engine events and the standalone HTTP API';
const PUBLISHERS = 8;
const BLOCKS_PER_BATCH = STORES_PER_BATCH * BLOCKS_PER_STORE;
/** Seconds of /query load on a fresh `kvindex serve` before the judged window (see run). */
const WARM_SECONDS = 5;
/**
 * Seconds of the judged window against `kvindex serve` (see run): after the warm-up, 5 s
 * windows in a row gave p99 1.0-3.5 ms on this host (a probe, two servers of three windows
 * each: 3.5, 1.0, 1.3 and 1.8, 1.4, 2.9 ms), so one 5 s window judged a moment.
 */
const PRODUCT_WINDOW_SECONDS = 15;

type Row = Record<string, string | number | boolean>;

class Engines {
  readonly worker: Worker;
  endpoints: string[] = [];
  /** Reply key (its first property: endpoints, subscribed, published, latencies) -> waiter. */
  readonly #waiters = new Map<string, (m: Record<string, unknown>) => void>();
  readonly #early = new Map<string, Record<string, unknown>>();

  constructor(publishers = PUBLISHERS) {
    this.worker = new Worker(new URL('./zmq-engines.js', import.meta.url), { workerData: { publishers } });
    this.worker.on('message', (m: Record<string, unknown>) => {
      const key = Object.keys(m)[0]!;
      const w = this.#waiters.get(key);
      if (w === undefined) this.#early.set(key, m);
      else {
        this.#waiters.delete(key);
        w(m);
      }
    });
  }

  reply(key: string): Promise<Record<string, unknown>> {
    const early = this.#early.get(key);
    if (early !== undefined) {
      this.#early.delete(key);
      return Promise.resolve(early);
    }
    return new Promise((r) => this.#waiters.set(key, r));
  }

  send(c: EngineCommand): Promise<Record<string, unknown>> {
    const p = this.reply(c.cmd === 'publish' ? 'published' : 'latencies');
    this.worker.postMessage(c);
    return p;
  }

  async close(): Promise<void> {
    this.worker.postMessage({ cmd: 'close' } satisfies EngineCommand);
    await this.worker.terminate();
  }
}

function decodeRows(quick: boolean): Promise<Row[]> {
  const dec = new Decoder({ useBigInt64: true });
  const map = encodeBatch(0, 300, 1.5); // 4 stores + 1 removal
  const arrEnc = new Encoder({ useBigInt64: true });
  const asArray = arrEnc.encode([1.5, batchEvents(0, 300).map((e) => {
    const o = e as Record<string, unknown>;
    return o.type === 'BlockStored'
      ? ['BlockStored', o.block_hashes, o.parent_block_hash, o.token_ids, o.block_size, null, o.medium, null, null, 0, 'full_attention']
      : ['BlockRemoved', o.block_hashes, o.medium];
  }), 0]);
  const conv = new EventConverter(BLOCK_SIZE);
  // decodeBatch reads these shapes directly (src/zmq/direct-batch.ts); decodeBatchGeneric is the
  // msgpack decoder's path, which every batch took before and odd shapes still take.
  const cases: Array<[string, Uint8Array, () => unknown]> = [
    ['decode, map events', map, () => decodeBatch(dec, map)],
    ['decode, array events', asArray, () => decodeBatch(dec, asArray)],
    ['generic msgpack path, map events (before)', map, () => decodeBatchGeneric(dec, map)],
    ['generic msgpack path, array events (before)', asArray, () => decodeBatchGeneric(dec, asArray)],
    ['decode + convert (token hashing), map', map, () => {
      for (const e of decodeBatch(dec, map).events) conv.convert(e as EngineEvent);
    }],
  ];
  const bench = new Bench({ time: quick ? 300 : 1500, warmupTime: 200 });
  for (const [name, , call] of cases) bench.add(name, () => void call());
  return bench.run().then((tasks) =>
    tasks.map((t, k) => {
      const r = t.result as { latency?: { p50?: number; p99?: number }; median?: number } | undefined;
      const p50 = (r?.latency?.p50 ?? NaN) * 1000;
      const [, bytes, call] = cases[k]!;
      return {
        case: t.name, 'batch bytes': bytes.length, 'us per batch (p50)': p50, 'us per event (p50)': p50 / (STORES_PER_BATCH + 1),
        'us p99': (r?.latency?.p99 ?? NaN) * 1000, 'bytes left per batch': bytesLeftPerCall(() => void call()),
      };
    }),
  );
}

async function ingest(batches: number, batchesPerSecond: number): Promise<Row> {
  const engines = new Engines();
  const ready = (await engines.reply('endpoints')) as { endpoints: string[] };
  const index = new EngineIndex({ blockSize: BLOCK_SIZE });
  const lags: number[] = [];
  let applied = 0;
  let first = 0;
  let last = 0;
  let done: () => void = () => {};
  const all = new Promise<void>((r) => (done = r));
  const onBatch = (_rank: number, _seq: bigint, ts: number): void => {
    const t = performance.now();
    if (applied === 0) first = t;
    lags.push((performance.timeOrigin + t) - ts * 1000);
    last = t;
    if (++applied === batches) done();
  };
  const sources = await Promise.all(ready.endpoints.map((endpoint, i) => ZmqKvSource.start({ index, workerId: BigInt(i + 1), endpoint, onBatch })));
  await engines.reply('subscribed');
  await quiesce(200);
  const pub = engines.send({ cmd: 'publish', batches, batchesPerSecond });
  await all;
  await pub;
  const st = sources.map((s) => s.stats());
  const sum = (k: 'events' | 'storedBlocks' | 'gaps' | 'badEvents'): number => st.reduce((a, s) => a + s[k], 0);
  for (const s of sources) await s.close();
  await engines.close();
  lags.sort((a, b) => a - b);
  const secs = (last - first) / 1000;
  return {
    mode: batchesPerSecond === 0 ? 'as fast as possible' : `paced at ${(batchesPerSecond * BLOCKS_PER_BATCH).toLocaleString('en-US')} blocks/s`,
    batches,
    'events/s': Math.round(sum('events') / secs),
    'stored blocks/s': Math.round(sum('storedBlocks') / secs),
    'lag p50 ms': percentile(lags, 50),
    'lag p99 ms': percentile(lags, 99),
    'lag p99.9 ms': percentile(lags, 99.9),
    'lag max ms': lags[lags.length - 1]!,
    gaps: sum('gaps'),
  };
}

/** Prompts of 1,024 tokens whose first 64 tokens are a stored chain of publisher k % 8. */
function queryBodies(): string[] {
  return Array.from({ length: 64 }, (_, k) => {
    const store = (batchEvents(k % PUBLISHERS, 200 + k)[0] as { token_ids: number[] }).token_ids;
    const tail = Array.from({ length: 1024 - store.length }, (_, j) => (j * 31 + k) % 128_000);
    return JSON.stringify({ token_ids: [...store, ...tail], model_name: 'm' });
  });
}

/**
 * The index first holds what a second of ingestion brings, then ingestion goes on at
 * `blocksPerSecond` for `seconds` + 1 (or stops: the idle baseline) while the client queries;
 * resolves with the promise of the second phase.
 */
async function startIngesting(engines: Engines, seconds: number, blocksPerSecond: number): Promise<Promise<unknown>> {
  const rate = 50_000 / BLOCKS_PER_BATCH;
  await engines.send({ cmd: 'publish', batches: Math.round(rate), batchesPerSecond: rate });
  const going = blocksPerSecond / BLOCKS_PER_BATCH;
  return going === 0 ? Promise.resolve() : engines.send({ cmd: 'publish', batches: Math.round(going * (seconds + 1)), batchesPerSecond: going });
}

/**
 * `/query` against the product itself: `kvindex serve --http` in its own process (its own heap,
 * nothing of the benchmark's in it), engines registered over `POST /register`, the load client
 * in a third process.
 */
async function queryProductServer(warmSeconds: number, seconds: number, ingestBlocksPerSecond: number): Promise<Row> {
  const engines = new Engines();
  const ready = (await engines.reply('endpoints')) as { endpoints: string[] };
  const cli = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
  const server = spawn(process.execPath, [cli, 'serve', '--http', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    const address = await new Promise<string>((resolve, reject) => {
      let text = '';
      server.stderr!.on('data', (d: Buffer) => {
        text += d.toString();
        const m = /"address":"([^"]+)".*kvindex serve ready/.exec(text) ?? /kvindex serve ready.*"address":"([^"]+)"/.exec(text);
        if (m !== null) resolve(m[1]!);
      });
      server.once('exit', (code) => reject(new Error(`kvindex serve exited (${code}): ${text}`)));
    });
    const base = address.startsWith('http') ? address : `http://${address}`;
    for (let i = 0; i < ready.endpoints.length; i++) {
      const res = await fetch(`${base}/register`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ instance_id: i + 1, endpoint: ready.endpoints[i], model_name: 'm', block_size: BLOCK_SIZE }),
      });
      if (res.status !== 201) throw new Error(`/register answered ${res.status}: ${await res.text()}`);
    }
    await engines.reply('subscribed');
    const pub = await startIngesting(engines, warmSeconds + seconds, ingestBlocksPerSecond);
    const url = new URL(base);
    const client = new LoadProcess();
    const load = { host: url.hostname, port: Number(url.port), path: '/query', perSecond: 1000, bodies: queryBodies() };
    const first = await client.run({ ...load, durationMs: warmSeconds * 1000 });
    const q = await client.run({ ...load, durationMs: seconds * 1000 });
    await client.close();
    await pub;
    if (q.errors > 0) throw new Error(`/query answered ${q.errors} requests with an error status`);
    const lat = q.latencies.sort((a, b) => a - b);
    return {
      server: 'kvindex serve --http (own process)',
      client: 'own process (raw keep-alive socket)',
      requests: lat.length,
      'achieved req/s': Math.round(lat.length / (q.ms / 1000)),
      'ingest blocks/s': ingestBlocksPerSecond,
      'blocks ingested': '-',
      'p50 ms': percentile(lat, 50),
      'p99 ms': percentile(lat, 99),
      'p99.9 ms': percentile(lat, 99.9),
      'max ms': lat[lat.length - 1]!,
      'first seconds p99 ms': percentile(first.latencies.sort((a, b) => a - b), 99),
      'server: waited p99 ms': '-',
      'server: handled p99 ms': '-',
    };
  } finally {
    server.kill('SIGTERM');
    await engines.close();
  }
}

/** The load client of http-load.ts in a child process. */
class LoadProcess {
  private readonly child: ChildProcess;
  private readonly ready: Promise<void>;

  constructor() {
    this.child = fork(fileURLToPath(new URL('./http-load.js', import.meta.url)), ['--http-load'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.ready = new Promise((r) => this.child.once('message', () => r()));
  }

  async run(c: LoadCommand): Promise<LoadReply> {
    await this.ready;
    return new Promise((resolve) => {
      this.child.once('message', (m) => resolve(m as LoadReply));
      this.child.send(c);
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.send('exit');
    });
  }
}

type Client = 'worker thread (node:http)' | 'own process (raw keep-alive socket)';

async function queryWhileIngesting(seconds: number, ingestBlocksPerSecond: number, clientKind: Client): Promise<Row> {
  const engines = new Engines();
  const ready = (await engines.reply('endpoints')) as { endpoints: string[] };
  const registry = new EngineRegistry();
  const app = Fastify({ logger: false });
  // Where a slow answer's time goes: waiting for the server's event loop (sent -> onRequest) or
  // being handled (onRequest -> onResponse).
  const waited: number[] = [];
  const handled: number[] = [];
  app.addHook('onRequest', async (req) => {
    (req as { t0?: number }).t0 = performance.now();
    waited.push(performance.timeOrigin + performance.now() - Number(req.headers['x-sent-at']));
  });
  app.addHook('onResponse', async (req) => {
    handled.push(performance.now() - ((req as { t0?: number }).t0 ?? 0));
  });
  await registerIndexerRoutes(app, registry);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/query`;
  for (let i = 0; i < ready.endpoints.length; i++) {
    await registry.register({ instanceId: BigInt(i + 1), endpoint: ready.endpoints[i]!, modelName: 'm', blockSize: BLOCK_SIZE, tenantId: 'default', dpRank: 0, replayEndpoint: null });
  }
  await engines.reply('subscribed');
  const bodies = queryBodies();
  const pub = await startIngesting(engines, seconds, ingestBlocksPerSecond);
  // Warm the route up (JIT, sockets) for half a second, unrecorded, then start from a
  // collected heap: the first hundreds of requests and the earlier phases' garbage otherwise
  // land in the p99 (idle p99 measured 31 ms without this, with p50 0.31 ms).
  let q: { latencies: number[]; ms: number };
  if (clientKind === 'worker thread (node:http)') {
    const client = new Engines(0);
    await client.reply('subscribed');
    await client.send({ cmd: 'query', url, perSecond: 1000, durationMs: 500, bodies });
    await quiesce(300);
    q = (await client.send({ cmd: 'query', url, perSecond: 1000, durationMs: seconds * 1000, bodies })) as { latencies: number[]; ms: number };
    await client.close();
  } else {
    const client = new LoadProcess();
    const port = (app.server.address() as { port: number }).port;
    const load = { host: '127.0.0.1', port, path: '/query', perSecond: 1000, bodies };
    await client.run({ ...load, durationMs: 500 });
    await quiesce(300);
    const r = await client.run({ ...load, durationMs: seconds * 1000 });
    if (r.errors > 0) throw new Error(`/query answered ${r.errors} requests with an error status`);
    q = r;
    await client.close();
  }
  await pub;
  const lat = q.latencies.sort((a, b) => a - b);
  // The recorded phase's requests are the last ones (the warm-up came first).
  const wait = waited.slice(-lat.length).sort((a, b) => a - b);
  const handle = handled.slice(-lat.length).sort((a, b) => a - b);
  const blocks = registry.listeners().reduce((a, l) => a + l.source.stats().storedBlocks, 0);
  await app.close();
  await registry.close();
  await engines.close();
  return {
    server: 'fastify routes in the benchmark process',
    client: clientKind,
    requests: lat.length,
    'achieved req/s': Math.round(lat.length / (q.ms / 1000)),
    'ingest blocks/s': ingestBlocksPerSecond,
    'blocks ingested': blocks,
    'p50 ms': percentile(lat, 50),
    'p99 ms': percentile(lat, 99),
    'p99.9 ms': percentile(lat, 99.9),
    'max ms': lat[lat.length - 1]!,
    'first seconds p99 ms': '-',
    'server: waited p99 ms': percentile(wait, 99),
    'server: handled p99 ms': percentile(handle, 99),
  };
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const decode = await decodeRows(opts.quick);
  const blast = await ingest(opts.quick ? 10_000 : 40_000, 0);
  const paced = await ingest(opts.quick ? 12_500 : 31_250, 100_000 / BLOCKS_PER_BATCH);
  const seconds = opts.quick ? 3 : 5;
  const queries: Row[] = [];
  // A fresh server's first seconds are slow: in a probe (no ingestion, 0.5 s of queries first),
  // answers over 1.5 ms per 500 requests fell 58, 46, 33, 20, 12, 7 over the next 3 s (V8
  // compiles and the heap grows beside the server on 2 cores shared with the client and the
  // engines); 5 s windows after 5 s of load gave p99 0.9-3.5 ms. The judged window follows
  // WARM_SECONDS of the same load and lasts PRODUCT_WINDOW_SECONDS; the warm-up's own p99 is a
  // column of its own.
  const warmSeconds = opts.quick ? 1 : WARM_SECONDS;
  const window = opts.quick ? seconds : PRODUCT_WINDOW_SECONDS;
  for (const ingest of [0, 50_000]) queries.push(await queryProductServer(warmSeconds, window, ingest));
  for (const client of ['own process (raw keep-alive socket)', 'worker thread (node:http)'] as const) {
    for (const ingest of [0, 50_000]) queries.push(await queryWhileIngesting(seconds, ingest, client));
  }
  const query = queries[1]!;
  const ok = (b: boolean): string => (b ? 'met' : 'MISSED');
  const markdown = [
    `Batches of ${STORES_PER_BATCH} Stored events (${BLOCKS_PER_STORE} blocks of ${BLOCK_SIZE} tokens each, vLLM 0.26 map encoding, u64 hashes) plus one Removed event; ${PUBLISHERS} loopback publishers in a worker thread, the indexer on the main thread.`,
    '',
    '### Decode cost (one batch, 5 events)',
    '',
    table(decode),
    '',
    '### Engine events -> applied',
    '',
    table([blast, paced]),
    '',
    `Targets: >= 100k stored blocks/s sustained (${ok((blast['stored blocks/s'] as number) >= 100_000)}); lag p99 <= 50 ms at 100k blocks/s (${ok((paced['lag p99 ms'] as number) <= 50)}).`,
    '',
    '### /query over HTTP while ingesting',
    '',
    table(queries),
    '',
    `Target: p99 <= 2 ms at 1,000 requests/s while ingesting, against \`kvindex serve --http\` in its own process, end to end ` +
      `from a client in another process, on the same 2 cores as the server and the 8 engines: ${(query['p99 ms'] as number).toFixed(2)} ms ` +
      `(${ok((query['p99 ms'] as number) <= 2)}), in a ${window} s window after ${warmSeconds} s of the same load on the fresh server ` +
      `(that warm-up's own p99: ${(query['first seconds p99 ms'] as number).toFixed(2)} ms, the column "first seconds": V8 compiles and ` +
      'the heap grows during a server\'s first seconds, on the same 2 cores). The client (bench/http-load.ts) writes prepared requests on keep-alive sockets ' +
      'and reads answers by their length. The other rows serve the same routes from the benchmark process, whose heap also ' +
      'holds the earlier phases\' data, with that client or with a node:http client in a worker thread of the server\'s ' +
      'process; their last two columns split the server\'s part: the p99 wait between the client sending a request and the ' +
      'server\'s event loop taking it (a garbage collection or other work in the way), and the p99 handling time.',
  ].join('\n');
  return { title: TITLE, markdown, rows: [...decode, blast, paced, ...queries] };
}
