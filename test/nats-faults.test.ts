/**
 * Faults: the nats-server process is SIGKILLed mid-stream and restarted on the same port with
 * the same JetStream folder (no event lost, none applied twice); an unreachable server gives
 * `KVX_NATS_UNREACHABLE` after a bounded retry instead of hanging.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsErrorCode } from '../src/nats/errors.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { generateStream } from './support/event-gen.js';
import { NATS_SKIP_MESSAGE, NatsServer, freePort, natsServerInstalled } from './support/nats-server.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

describe.skipIf(!installed)('NATS faults', () => {
  let server: NatsServer;

  beforeAll(async () => {
    server = await NatsServer.start();
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('loses no event and applies none twice when nats-server is killed and restarted mid-stream', async () => {
    const stream = generateStream(21, 4000);
    const events = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    const quarter = Math.floor(events.length / 4);
    const half = Math.floor(events.length / 2);
    // A short ack timeout: publishes sent just as the server comes back can go unanswered.
    const pub = await KvEventPublisher.connect({ namespace: 'faults', component: 'backend', servers: server.url, publishTimeoutMs: 1_000 });
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    let sub: KvEventSubscriber | null = null;
    try {
      const head = await pub.publishAll(events.slice(0, quarter), { msgIdPrefix: 'a' });
      sub = await KvEventSubscriber.start({ indexer: ix, namespace: 'faults', component: 'backend', servers: server.url, batchMessages: 32 });
      const running = sub;
      await running.waitForSeq(head.lastSeq);
      // A backlog the router cannot have read: it is paused while the backlog is published.
      await running.pause();
      const backlog = await pub.publishAll(events.slice(quarter, half), { msgIdPrefix: 'b' });
      const atPause = running.lastAppliedSeq;
      expect(atPause).toBe(head.lastSeq);
      // Kill the server right after the router commits its first pull of the backlog: waitForSeq
      // resolves in the commit's own microtask chain, so no further delivery can be read (that
      // takes I/O) before the kill below, and the ack of that pull is likely still unsent.
      const progressed = running.waitForSeq(atPause + 1);
      running.resume();
      await progressed;
      const atKill = running.lastAppliedSeq;
      await server.kill();
      expect(atKill).toBeGreaterThan(atPause);
      expect(atKill).toBeLessThanOrEqual(atPause + 32); // one pull of batchMessages
      expect(atKill).toBeLessThan(backlog.lastSeq);
      await sleep(500);
      await server.restart();
      const second = await retry(() => pub.publishAll(events.slice(half), { msgIdPrefix: 'c' }));
      expect(second.lastSeq).toBe(events.length);
      await running.waitForSeq(second.lastSeq, 20_000);
      expect(running.stats()).toMatchObject({ applied: events.length, malformed: 0, missedSeqs: 0, lastAppliedSeq: events.length });

      const reference = new RadixTree();
      for (const e of events) reference.applyEvent(e);
      for (const doc of stream.docs) {
        for (let n = 1; n <= doc.length; n++) {
          expect(sortedScores(await ix.findMatches(doc.slice(0, n)))).toEqual(sortedScores(reference.findMatches(doc.slice(0, n))));
        }
      }
      expect(dumpTuples(await ix.dumpEvents())).toEqual(dumpTuples(reference.dumpEvents()));
    } finally {
      await sub?.close();
      await pub.close();
      await ix.close();
    }
  });

  it('gives KVX_NATS_UNREACHABLE within the connect budget when no server listens', async () => {
    const url = `nats://127.0.0.1:${await freePort()}`;
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    try {
      const started = Date.now();
      const err = await KvEventSubscriber.start({ indexer: ix, namespace: 'x', component: 'y', servers: url, connectTimeoutMs: 1_000 }).catch(
        (e: unknown) => e,
      );
      const elapsed = Date.now() - started;
      expect(err).toMatchObject({ name: 'NatsError', code: NatsErrorCode.Unreachable });
      expect((err as Error).message).toContain(url);
      // It retried for its budget rather than giving up at the first refusal. No upper bound:
      // how long past the budget it takes depends on the machine's load, not on the code.
      expect(elapsed).toBeGreaterThanOrEqual(900);
      await expect(KvEventPublisher.connect({ namespace: 'x', component: 'y', servers: url, connectTimeoutMs: 300 })).rejects.toMatchObject({
        code: NatsErrorCode.Unreachable,
      });
    } finally {
      await ix.close();
    }
  });

  it('reads NATS_SERVER when no URL is given', async () => {
    const saved = process.env['NATS_SERVER'];
    process.env['NATS_SERVER'] = `nats://127.0.0.1:${await freePort()}`;
    try {
      await expect(KvEventPublisher.connect({ namespace: 'x', component: 'y', connectTimeoutMs: 200 })).rejects.toThrow(process.env['NATS_SERVER']);
      process.env['NATS_SERVER'] = server.url;
      const pub = await KvEventPublisher.connect({ namespace: 'env', component: 'y' });
      expect(await pub.publish(sampleEvent())).toBe(1);
      await pub.close();
    } finally {
      if (saved === undefined) delete process.env['NATS_SERVER'];
      else process.env['NATS_SERVER'] = saved;
    }
  });
});

function sampleEvent(): RouterEvent {
  return { workerId: 1n, event: { eventId: 0n, data: { type: 'cleared' } } };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Retries `fn` (publishing while the client reconnects) for up to 10 s. */
async function retry<T>(fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(100);
    }
  }
}
