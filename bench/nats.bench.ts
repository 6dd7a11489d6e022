/**
 * NATS benchmark (issue 5), against its own nats-server on a free loopback port with a
 * temporary JetStream folder:
 * - publishing: `KvEventPublisher.publishAll` with one publish in flight (an ack round trip per
 *   event) against a window of 256;
 * - publish -> applied: a `KvEventSubscriber` consumes while the events are published; the time
 *   runs from the first publish until `lastAppliedSeq` reaches the last one. Batched pulls (512
 *   messages) against one message per pull, as Dynamo fetches (both are kvindex's subscriber,
 *   not Dynamo's); in-thread against 2 shards;
 * - snapshot of about a million pairs (the final synthetic tree replicated, as the shard bench
 *   does): dump, upload to the object store, stable download, restore into a fresh indexer.
 * Events are the synthetic workload's (Stored events average ~150 blocks, ~7 KB of JSON), or
 * generated ones when ../shared is absent.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { kvNames } from '../src/nats/names.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { downloadStableSnapshot, uploadSnapshot } from '../src/nats/snapshot.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { iterateSnapshot } from '../src/protocol/snapshot-reader.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { table, type SuiteOptions, type SuiteResult } from './suite.js';
import { loadWorkload, replicatedEvents, workloadPath } from './workloads.js';

const TITLE = 'NATS: publish -> applied, snapshot upload and restore';

/** A throwaway nats-server; `stop()` kills it and removes its folder. */
export async function startServer(): Promise<{ url: string; stop: () => void }> {
  const port = await new Promise<number>((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => res(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });
  const dir = mkdtempSync(join(tmpdir(), 'kvindex-bench-nats-'));
  const proc: ChildProcess = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir], { stdio: 'ignore' });
  const stop = (): void => {
    proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; i < 200; i++) {
    const up = await new Promise<boolean>((res) => {
      const c = createConnection({ host: '127.0.0.1', port });
      const done = (ok: boolean): void => {
        c.destroy();
        res(ok);
      };
      c.once('data', (d) => done(d.toString().startsWith('INFO')));
      c.once('error', () => done(false));
    });
    if (up) return { url: `nats://127.0.0.1:${port}`, stop };
    await new Promise((r) => setTimeout(r, 50));
  }
  stop();
  throw new Error('nats-server did not start');
}

function blocksOf(events: readonly RouterEvent[]): number {
  let n = 0;
  for (const e of events) {
    const d = e.event.data;
    n += d.type === 'stored' ? d.blocks.length : d.type === 'removed' ? d.blockHashes.length : 0;
  }
  return n;
}

/** Generated stand-in for the workload: workers storing 128-block chains under shared prefixes. */
function generatedEvents(count: number): RouterEvent[] {
  const out: RouterEvent[] = [];
  let x = 0x9e3779b9;
  const next = (): bigint => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return BigInt(x >>> 0) * 0x1_0000_0001n;
  };
  for (let i = 0; i < count; i++) {
    const blocks = Array.from({ length: 128 }, () => {
      const h = next();
      return { blockHash: h, tokensHash: h };
    });
    out.push({ workerId: 0x694d99badb9f7c07n + BigInt(i % 4), event: { eventId: BigInt(i), data: { type: 'stored', parentHash: null, blocks } } });
  }
  return out;
}

const r1 = (x: number): number => Math.round(x * 10) / 10;

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const rows: SuiteResult['rows'] = [];
  if (spawnSync('nats-server', ['--version'], { stdio: 'ignore' }).status !== 0) {
    return { title: TITLE, markdown: '_skipped: nats-server is not installed (apt-get install nats-server)_', rows };
  }
  const path = workloadPath(opts.shared, 'synthetic');
  const w = path === null ? null : await loadWorkload(path, 'synthetic', opts.quick ? 4_000 : 20_000);
  const events = w === null ? generatedEvents(opts.quick ? 1_500 : 8_000) : w.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
  const source = w === null ? 'generated (128-block Stored events)' : `synthetic workload, first ${opts.quick ? '4,000' : '20,000'} lines`;
  const server = await startServer();
  const nc: NatsConnection = await connect({ servers: server.url });
  const jsm = await nc.jetstreamManager();
  let run = 0;
  const fresh = (): string => `bench${run++}`;
  const sections: string[] = [];
  try {
    // 1. Publishing alone.
    const pubRows: SuiteResult['rows'] = [];
    for (const window of [1, 256]) {
      const sample = window === 1 ? events.slice(0, Math.min(events.length, opts.quick ? 300 : 1_000)) : events;
      const ns = fresh();
      const pub = await KvEventPublisher.connect({ namespace: ns, component: 'b', connection: nc, window });
      const t0 = performance.now();
      await pub.publishAll(sample);
      const ms = performance.now() - t0;
      await jsm.streams.delete(pub.names.stream);
      pubRows.push({ window, events: sample.length, ms: Math.round(ms), 'events/s': Math.round(sample.length / (ms / 1000)), 'blocks/s': Math.round(blocksOf(sample) / (ms / 1000)) });
    }
    rows.push(...pubRows.map((r) => ({ suite: 'nats-publish', ...r })));
    sections.push(`**Publishing** (${source}; JSON as Dynamo's serde writes it), one connection:\n\n${table(pubRows)}`);

    // 2. Publish -> applied.
    const e2eRows: SuiteResult['rows'] = [];
    const configs: Array<{ shards: number; batch: number; inShards: boolean; label: string; sample: RouterEvent[] }> = [
      { shards: 0, batch: 1, inShards: false, label: 'one message per pull (as Dynamo fetches)', sample: events.slice(0, Math.min(events.length, opts.quick ? 300 : 1_000)) },
      { shards: 0, batch: 512, inShards: false, label: 'batched pulls', sample: events },
      { shards: 2, batch: 512, inShards: false, label: 'batched pulls', sample: events },
      { shards: 2, batch: 512, inShards: true, label: 'batched pulls', sample: events },
    ];
    for (const c of configs) {
      const ns = fresh();
      const ix = await ShardedIndexer.create({ shards: c.shards, blockSize: 64 });
      const pub = await KvEventPublisher.connect({ namespace: ns, component: 'b', connection: nc });
      const sub = await KvEventSubscriber.start({
        indexer: ix, namespace: ns, component: 'b', connection: nc, batchMessages: c.batch, parseInShards: c.inShards,
      });
      const t0 = performance.now();
      const { lastSeq } = await pub.publishAll(c.sample);
      await sub.waitForSeq(lastSeq, 600_000);
      const ms = performance.now() - t0;
      await sub.close();
      await ix.close();
      // A second router drains the same events as a backlog: the consuming side alone.
      const ix2 = await ShardedIndexer.create({ shards: c.shards, blockSize: 64 });
      const t1 = performance.now();
      const sub2 = await KvEventSubscriber.start({
        indexer: ix2, namespace: ns, component: 'b', connection: nc, batchMessages: c.batch, parseInShards: c.inShards,
      });
      await sub2.waitForSeq(lastSeq, 600_000);
      const drainMs = performance.now() - t1;
      await sub2.close();
      await ix2.close();
      await jsm.streams.delete(pub.names.stream);
      e2eRows.push({
        pulls: c.label,
        shards: c.shards,
        parse: c.inShards ? 'in shards' : 'main thread',
        events: c.sample.length,
        ms: Math.round(ms),
        'events/s': Math.round(c.sample.length / (ms / 1000)),
        'blocks/s': Math.round(blocksOf(c.sample) / (ms / 1000)),
        'backlog drain ms': Math.round(drainMs),
        'drain events/s': Math.round(c.sample.length / (drainMs / 1000)),
      });
    }
    rows.push(...e2eRows.map((r) => ({ suite: 'nats-e2e', ...r })));
    sections.push(
      `**Publish -> applied**: kvindex's subscriber consumes while the events are published (window 256, same process; ` +
        `"as Dynamo fetches" is its pull size only, one message per pull, not Dynamo's code); time ` +
        `from the first publish until every event is applied (flushed) and acked. **Backlog drain**: a second router ` +
        `started afterwards consumes the same events from the stream (start-up included).\n\n${table(e2eRows)}`,
    );

    // 3. Snapshot of about a million pairs.
    const base = new RadixTree();
    for (const e of events) base.applyEvent(e);
    const copies = Math.max(1, Math.round(1_048_576 / Math.max(1, base.size)));
    const big = replicatedEvents(base, copies);
    const snapRows: SuiteResult['rows'] = [];
    const names = kvNames(fresh(), 'b');
    const js = nc.jetstream();
    for (const shards of opts.quick ? [2] : [0, 2]) {
      const src = await ShardedIndexer.create({ shards, blockSize: 64 });
      await src.restore(big);
      const pairs = (await src.stats()).reduce((s, x) => s + x.pairs, 0);
      let t = performance.now();
      const bytes = await src.dumpSnapshot('bincode');
      const dumpMs = performance.now() - t;
      await src.close();
      t = performance.now();
      await uploadSnapshot(js, names, bytes, { streamSeq: 1, encoding: 'bincode' });
      const uploadMs = performance.now() - t;
      t = performance.now();
      const got = await downloadStableSnapshot(jsm, js, names);
      const downloadMs = performance.now() - t;
      if (got === null || got.bytes.length !== bytes.length) throw new Error('snapshot download failed');
      const dst = await ShardedIndexer.create({ shards, blockSize: 64 });
      t = performance.now();
      await dst.restore(iterateSnapshot(got.bytes, 'bincode'));
      const restoreMs = performance.now() - t;
      await dst.close();
      snapRows.push({
        shards,
        pairs,
        bytes: bytes.length,
        'dump ms': Math.round(dumpMs),
        'upload ms': Math.round(uploadMs),
        'upload MB/s': r1(bytes.length / 1e6 / (uploadMs / 1000)),
        'download ms': Math.round(downloadMs),
        'restore ms': Math.round(restoreMs),
      });
    }
    rows.push(...snapRows.map((r) => ({ suite: 'nats-snapshot', ...r })));
    sections.push(
      `**Snapshot** of the final tree of the events above replicated ${copies}x (bincode): dump (the indexer's ` +
        `\`dumpSnapshot\` as a router runs it: into writers kept between dumps, then copied into fresh memory, ` +
        `in-thread and in the shards alike), upload to the object store (128 KiB chunks), download (one transfer plus the 100 ms ` +
        `stability re-check of the metadata), restore into a fresh indexer.\n\n${table(snapRows)}`,
    );
  } finally {
    await nc.close();
    server.stop();
  }
  return { title: TITLE, markdown: sections.join('\n\n'), rows };
}
