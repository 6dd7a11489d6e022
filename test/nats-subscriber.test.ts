/**
 * KvEventSubscriber and KvEventPublisher against a real nats-server: published events reach the
 * sharded indexer with the scores an in-process RadixTree gives for the same events; malformed
 * messages are skipped, counted and acked; the findMatches request/reply service.
 */

import { describe, expect, it } from 'vitest';
import { computeBlockHashes, computeSequenceHashes } from '../src/hash/block-hash.js';
import { NatsErrorCode } from '../src/nats/errors.js';
import { kvNames } from '../src/nats/names.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { KvQueryService, requestFindMatches } from '../src/nats/query.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { createFaultyIndexer } from './support/faulty-shards.js';
import { generateStream } from './support/event-gen.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

describe.skipIf(!installed)('KvEventSubscriber', () => {
  const env = useNatsServer();

  it('applies published events: two routers equal in-process indexers fed the same events', async () => {
    const stream = generateStream(11, 3000);
    const events = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    // shards: 0 is one RadixTree. With shards, a worker's blocks live in its shard's own tree
    // (a node emptied in one shard is detached there even if another shard's worker holds the
    // same path), so the sharded router is compared with a sharded indexer fed directly.
    const reference = new RadixTree();
    for (const e of events) reference.applyEvent(e);
    const direct = await ShardedIndexer.create({ shards: 2, blockSize: 4 });
    for (const e of events) direct.applyEvent(e);

    const inThread = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    const sharded = await ShardedIndexer.create({ shards: 2, blockSize: 4 });
    const pub = await KvEventPublisher.connect({ namespace: 'apply', component: 'backend', servers: env.server.url });
    const subs = [
      await KvEventSubscriber.start({ indexer: inThread, namespace: 'apply', component: 'backend', servers: env.server.url }),
      await KvEventSubscriber.start({ indexer: sharded, namespace: 'apply', component: 'backend', servers: env.server.url, batchMessages: 100 }),
    ];
    try {
      const { count, lastSeq } = await pub.publishAll(events);
      expect(count).toBe(events.length);
      for (const sub of subs) {
        await sub.waitForSeq(lastSeq);
        expect(sub.stats()).toMatchObject({ applied: events.length, malformed: 0, duplicates: 0, lastAppliedSeq: lastSeq });
      }
      for (const doc of stream.docs) {
        for (let n = 1; n <= doc.length; n++) {
          const q = doc.slice(0, n);
          expect(sortedScores(await inThread.findMatches(q))).toEqual(sortedScores(reference.findMatches(q)));
          expect(sortedScores(await sharded.findMatches(q))).toEqual(sortedScores(await direct.findMatches(q)));
        }
      }
      expect(dumpTuples(await inThread.dumpEvents())).toEqual(dumpTuples(reference.dumpEvents()));
      expect(dumpTuples(await sharded.dumpEvents())).toEqual(dumpTuples(await direct.dumpEvents()));
    } finally {
      for (const sub of subs) await sub.close();
      await pub.close();
      for (const ix of [inThread, sharded, direct]) await ix.close();
    }
  });

  it.each([
    { shards: 0, parseInShards: false },
    { shards: 2, parseInShards: true },
  ])('skips, counts and acks malformed and truncated messages (shards $shards, parse in shards $parseInShards)', async ({ shards, parseInShards }) => {
    const events = sampleEvents();
    const texts = events.map(formatRouterEvent);
    const ns = `malformed${shards}`;
    const indexer = await ShardedIndexer.create({ shards, blockSize: 4 });
    const pub = await KvEventPublisher.connect({ namespace: ns, component: 'backend', connection: env.nc });
    const sub = await KvEventSubscriber.start({ indexer, namespace: ns, component: 'backend', connection: env.nc, keepConsumer: true, parseInShards });
    try {
      await pub.publishRaw(texts[0]!);
      await pub.publishRaw('not json at all');
      await pub.publishRaw(texts[1]!.slice(0, Math.floor(texts[1]!.length / 2))); // truncated
      await pub.publishRaw('{"worker_id":18446744073709551616,"event":{"event_id":0,"data":"cleared"}}'); // u64 overflow
      await pub.publishRaw('{"worker_id":1,"event":{"event_id":0,"data":{"evicted":{}}}}'); // unknown variant
      await pub.publishRaw(new Uint8Array(0));
      // A 200,000-digit DP rank: its header read once overflowed the stack outside the parse,
      // and the fetch loop retried the batch until the server redelivered it 30 s later.
      await pub.publishRaw(`{"worker_id":7,"event":{"event_id":1,"data":"cleared","dp_rank":${'1'.repeat(200_000)}}}`);
      const last = await pub.publishRaw(texts[2]!);
      await sub.waitForSeq(last);
      expect(sub.stats()).toMatchObject({ applied: 2, malformed: 6, lastAppliedSeq: last });
      const reference = new RadixTree();
      reference.applyEvent(events[0]!);
      reference.applyEvent(events[2]!);
      expect(dumpTuples(await indexer.dumpEvents())).toEqual(dumpTuples(reference.dumpEvents()));
      // Everything is acked, the malformed messages included: they do not hold the stream back.
      const jsm = await env.nc.jetstreamManager();
      await eventually(async () => {
        const ci = await jsm.consumers.info(sub.names.stream, sub.consumerName);
        expect(ci.ack_floor.stream_seq).toBe(last);
        expect(ci.num_ack_pending).toBe(0);
      });
    } finally {
      await sub.close();
      await indexer.close();
    }
  });

  it('answers findMatches over request/reply for tokens and for hashes', async () => {
    const blockSize = 4;
    const tokens = Array.from({ length: 16 }, (_, i) => i + 1);
    const local = computeBlockHashes(tokens, blockSize);
    const seq = computeSequenceHashes(local);
    const worker = 7587889975016782855n;
    const indexer = await ShardedIndexer.create({ shards: 1, blockSize });
    const names = kvNames('query', 'backend');
    const sub = await KvEventSubscriber.start({ indexer, namespace: 'query', component: 'backend', connection: env.nc });
    const service = KvQueryService.start(env.nc, indexer, names.querySubject, { appliedSeq: () => sub.lastAppliedSeq });
    const pub = await KvEventPublisher.connect({ namespace: 'query', component: 'backend', connection: env.nc });
    try {
      const last = await pub.publish({
        workerId: worker,
        event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: Array.from(local.subarray(0, 3), (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash })) } },
      });
      await sub.waitForSeq(last);
      const byTokens = await requestFindMatches(env.nc, names.querySubject, { tokens });
      expect([...byTokens.scores]).toEqual([[worker, 3]]);
      expect(byTokens.streamSeq).toBe(last);
      const byHashes = await requestFindMatches(env.nc, names.querySubject, { hashes: Array.from(local.subarray(0, 2)) });
      expect([...byHashes.scores]).toEqual([[worker, 2]]);
      // Raw JSON: integer hashes read losslessly, worker ids as string keys.
      const raw = await env.nc.request(names.querySubject, new TextEncoder().encode(`{"hashes":[${local[0]},"${local[1]}"]}`));
      expect(new TextDecoder().decode(raw.data)).toBe(`{"scores":{"${worker}":2},"frequencies":[],"stream_seq":${last}}`);
      const badReply = await env.nc.request(names.querySubject, new TextEncoder().encode('{"hashes":["-1"]}'));
      expect(JSON.parse(new TextDecoder().decode(badReply.data))).toMatchObject({ error: { code: NatsErrorCode.BadQuery } });
      await expect(requestFindMatches(env.nc, names.querySubject, { tokens: [2 ** 32] })).rejects.toMatchObject({ code: NatsErrorCode.BadQuery });
      expect(service.stats()).toEqual({ served: 3, failed: 2 });
    } finally {
      await service.stop();
      await sub.close();
      await indexer.close();
    }
  });


  it('never reports a stream_seq ahead of its scores while events arrive', async () => {
    // Each event adds one worker holding the first block, so a reply with stream_seq s must
    // count at least s - base workers. Lookups run while commits land (the race a stream_seq
    // read after the lookup would lose).
    const blockSize = 4;
    const tokens = [1, 2, 3, 4];
    const [local] = computeBlockHashes(tokens, blockSize);
    const [block] = computeSequenceHashes(computeBlockHashes(tokens, blockSize));
    const indexer = await ShardedIndexer.create({ shards: 2, blockSize });
    const names = kvNames('seqrace', 'backend');
    const pub = await KvEventPublisher.connect({ namespace: 'seqrace', component: 'backend', connection: env.nc });
    const sub = await KvEventSubscriber.start({ indexer, namespace: 'seqrace', component: 'backend', connection: env.nc });
    const service = KvQueryService.start(env.nc, indexer, names.querySubject, { appliedSeq: () => sub.lastAppliedSeq });
    const events = 500;
    let published = false;
    let checked = 0;
    try {
      const publishing = (async () => {
        for (let i = 0; i < events; i++) {
          await pub.publish({
            workerId: (1n << 60n) + BigInt(i),
            event: { eventId: BigInt(i), data: { type: 'stored', parentHash: null, blocks: [{ blockHash: block!, tokensHash: local! }] } },
          });
        }
        published = true;
      })();
      const base = sub.lastAppliedSeq;
      const query = async (): Promise<void> => {
        while (!published || sub.lastAppliedSeq < base + events) {
          const reply = await requestFindMatches(env.nc, names.querySubject, { tokens });
          expect(reply.scores.size).toBeGreaterThanOrEqual((reply.streamSeq ?? 0) - base);
          checked++;
        }
      };
      await Promise.all([publishing, query(), query(), query(), query()]);
      const last = await requestFindMatches(env.nc, names.querySubject, { tokens });
      expect(last.scores.size).toBe(events);
      expect(checked).toBeGreaterThan(1);
    } finally {
      await service.stop();
      await sub.close();
      await pub.close();
      await indexer.close();
    }
  });
  it('stops with the indexer error when a shard thread dies, and still cleans up on close', async () => {
    const [a, b] = sampleEvents();
    const { ix: indexer, kill } = await createFaultyIndexer({ shards: 1, blockSize: 4 });
    const pub = await KvEventPublisher.connect({ namespace: 'fatal', component: 'backend', connection: env.nc });
    const sub = await KvEventSubscriber.start({ indexer, namespace: 'fatal', component: 'backend', connection: env.nc });
    try {
      await sub.waitForSeq(await pub.publish(a!));
      await kill(0);
      const pending = sub.waitForSeq(await pub.publish(b!));
      expect(await sub.whenStopped()).toMatchObject({ code: 'KVX_SHARD_FAILED' });
      await sub.close();
      await expect(pending).rejects.toThrow(/not applied|closed/);
      const jsm = await env.nc.jetstreamManager();
      await expect(jsm.consumers.info(sub.names.stream, sub.consumerName)).rejects.toThrow(/consumer not found/);
    } finally {
      await sub.close();
      await indexer.close();
    }
  });

  it('rejects bad options with KVX_INVALID_OPTION before connecting', async () => {
    const indexer = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    try {
      await expect(KvEventSubscriber.start({ indexer, namespace: '', component: 'b', connection: env.nc })).rejects.toMatchObject({ code: 'KVX_INVALID_OPTION' });
      await expect(KvEventSubscriber.start({ indexer, namespace: 'a', component: 'b', connection: env.nc, batchMessages: 0 })).rejects.toMatchObject({
        code: 'KVX_INVALID_OPTION',
      });
      await expect(KvEventSubscriber.start({ indexer, namespace: 'a', component: 'b', connection: env.nc, encoding: 'json' as never })).rejects.toMatchObject({
        code: 'KVX_INVALID_OPTION',
      });
    } finally {
      await indexer.close();
    }
  });
});

/** Three small events of one worker: a chain of two blocks, then a third block under it. */
function sampleEvents(): RouterEvent[] {
  const w = 0x694d99badb9f7c07n;
  const stored = (id: bigint, parent: bigint | null, blocks: Array<[bigint, bigint]>): RouterEvent => ({
    workerId: w,
    event: { eventId: id, data: { type: 'stored', parentHash: parent, blocks: blocks.map(([blockHash, tokensHash]) => ({ blockHash, tokensHash })) } },
  });
  return [
    stored(0n, null, [
      [14643705804678351452n, 14643705804678351452n],
      [4945711292740353085n, 16777012769546811212n],
    ]),
    stored(1n, 4945711292740353085n, [[100n, 200n]]),
    stored(2n, 4945711292740353085n, [[300n, 400n]]),
  ];
}

/** Retries `check` every 50 ms until it passes or 5 s have passed. */
async function eventually(check: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      await check();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
