/**
 * KvRouteService against a real nats-server: route / mark_prefill / free over request/reply
 * with u64 worker ids exact in both directions, typed error replies, and two replicas sharing
 * their in-flight requests through ActiveSequenceEvent messages.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../src/errors.js';
import { computeBlockHashes, computeSequenceHashes } from '../src/hash/block-hash.js';
import { NatsErrorCode } from '../src/nats/errors.js';
import { kvNames } from '../src/nats/names.js';
import { KvRouteService } from '../src/nats/route-service.js';
import { parseJsonLossless, type JsonObject } from '../src/protocol/json-value.js';
import { seededRandom } from '../src/router/random.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

const W1 = 18446744073709551557n; // above 2^53: a double would round it
const W2 = 9007199254740993n;
const BS = 4;
const tokens = Array.from({ length: 16 }, (_, i) => 100 + i);
const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

async function until(check: () => boolean): Promise<void> {
  // A liveness bound only: the test fails if the condition never holds, never on timing.
  for (let i = 0; i < 6000 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
}

describe.skipIf(!installed)('KvRouteService over NATS', () => {
  const env = useNatsServer();
  const ask = async (subject: string, body: string): Promise<JsonObject> => {
    const m = await env.nc.request(subject, new TextEncoder().encode(body), { timeout: 10_000 });
    return parseJsonLossless(m.data) as JsonObject;
  };

  it('routes to the worker holding the prefix, then marks and frees the request', async () => {
    const tree = new RadixTree();
    const local = computeBlockHashes(tokens, BS);
    const seq = computeSequenceHashes(local);
    tree.applyEvent({ workerId: W1, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash })) } } });
    const names = kvNames('route1', 'backend');
    const service = KvRouteService.start(env.nc, names, { indexer: tree, blockSize: BS, workers: [{ workerId: W2, dpRank: 0 }, { workerId: W1, dpRank: 0 }], random: seededRandom(1) });
    try {
      const r = await ask(service.subjects.route, `{"tokens":[${tokens.join(',')}],"request_id":"q1","expected_output_tokens":5}`);
      expect(r).toMatchObject({ request_id: 'q1', worker_id: W1.toString(), dp_rank: 0n, overlap_blocks: 4n, required_blocks: 4n });
      expect(r['candidates']).toEqual([{ worker_id: W2.toString(), dp_rank: 0n }, { worker_id: W1.toString(), dp_rank: 0n }]);
      expect(r['costs']).toEqual([8n, 4n]);
      expect(service.router.sequences.load(W1).activeRequests).toBe(1);
      expect(await ask(service.subjects.markPrefill, '{"request_id":"q1"}')).toEqual({ ok: true });
      expect(await ask(service.subjects.free, '{"request_id":"q1"}')).toEqual({ ok: true });
      expect(await ask(service.subjects.free, '{"request_id":"q1"}')).toEqual({ ok: false });
      expect(service.router.sequences.size).toBe(0);

      const errorCode = async (subject: string, body: string): Promise<unknown> => ((await ask(subject, body))['error'] as JsonObject)['code'];
      expect(await errorCode(service.subjects.route, '{"tokens":[1,-2]}')).toBe(NatsErrorCode.BadQuery);
      expect(await errorCode(service.subjects.route, '{"hashes":["1"]}')).toBe(NatsErrorCode.BadQuery);
      expect(await errorCode(service.subjects.route, 'not json')).toBe(NatsErrorCode.BadQuery);
      expect(await errorCode(service.subjects.free, '{"request_id":7}')).toBe(NatsErrorCode.BadQuery);
      expect(await errorCode(service.subjects.route, `{"tokens":[1,2,3,4],"overrides":{"router_temperature":-1}}`)).toBe(ErrorCode.InvalidOption);
      await ask(service.subjects.route, '{"tokens":[1,2,3,4],"request_id":"dup"}');
      expect(await errorCode(service.subjects.route, '{"tokens":[1,2,3,4],"request_id":"dup"}')).toBe(ErrorCode.DuplicateRequest);
      expect(service.stats().failed).toBe(6);
    } finally {
      await service.stop();
    }
  });

  it('a request of one 1,000,000-digit token is answered with a typed error, and the service goes on', async () => {
    const names = kvNames('routebig', 'backend');
    const service = KvRouteService.start(env.nc, names, { indexer: new RadixTree(), blockSize: BS, workers: [{ workerId: W1, dpRank: 0 }] });
    try {
      // Its error once quoted the whole number: a reply beyond max_payload, whose throw in the
      // subscription callback stopped the client's reader (every later request timed out).
      const big = `{"tokens":[${'7'.repeat(1_000_000)}]}`;
      for (const subject of [service.subjects.route, service.subjects.free]) {
        const r = await ask(subject, big);
        expect((r['error'] as JsonObject)['code'], subject).toBe(NatsErrorCode.BadQuery);
      }
      expect(await ask(service.subjects.route, `{"tokens":[${tokens.join(',')}],"request_id":"after"}`)).toMatchObject({ request_id: 'after', worker_id: W1.toString() });
    } finally {
      await service.stop();
    }
  });

  it('replicas share in-flight requests: the second avoids the worker the first loaded', async () => {
    const names = kvNames('route2', 'backend');
    const workers = [{ workerId: W1, dpRank: 0 }, { workerId: W2, dpRank: 0 }];
    const a = KvRouteService.start(env.nc, names, { indexer: new RadixTree(), blockSize: BS, workers, routerId: 1n });
    const b = KvRouteService.start(env.nc, names, { indexer: new RadixTree(), blockSize: BS, workers, routerId: 2n });
    try {
      await env.nc.flush();
      const first = a.router.route(tokens, { requestId: 'x' });
      await until(() => b.router.sequences.load(first.workerId).activeRequests === 1);
      expect(a.stats().replicaEvents).toBe(0); // its own event is skipped
      const second = b.router.route(tokens, { requestId: 'y' });
      expect(second.workerId).not.toBe(first.workerId);
      await until(() => a.router.sequences.has('y'));
      a.router.free('x');
      await until(() => !b.router.sequences.has('x'));
      expect(b.router.sequences.load(first.workerId).activeRequests).toBe(0);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('a request whose replica event exceeds max_payload is still answered, recorded once, and counted as unshared', async () => {
    // Block size 1 and one-digit tokens: the request is 2 bytes a token, the add event ~21 (a
    // decimal u64 per block), so a request under the server's max_payload makes an event over it.
    const names = kvNames('routeunshared', 'backend');
    const a = KvRouteService.start(env.nc, names, { indexer: new RadixTree(), blockSize: 1, workers: [{ workerId: W1, dpRank: 0 }], routerId: 1n });
    const shared: string[] = [];
    const watch = env.nc.subscribe(a.subjects.sequences, { callback: (_e, m) => shared.push(new TextDecoder().decode(m.data)) });
    try {
      await env.nc.flush();
      const maxPayload = env.nc.info!.max_payload;
      const count = Math.ceil(maxPayload / 20);
      const body = `{"tokens":[${'7,'.repeat(count - 1)}7],"request_id":"huge"}`;
      expect(body.length).toBeLessThan(maxPayload);
      // Before: KVX_INTERNAL for a request left in flight, and the retry a duplicate.
      const r = await ask(a.subjects.route, body);
      expect(r).toMatchObject({ request_id: 'huge', worker_id: W1.toString(), required_blocks: BigInt(count) });
      expect(a.stats()).toMatchObject({ served: 1, failed: 0, unshared: 1 });
      expect(a.router.sequences.has('huge')).toBe(true);
      // Its later events are small and shared: the free goes out, and so do other requests'.
      expect(await ask(a.subjects.free, '{"request_id":"huge"}')).toEqual({ ok: true });
      expect(await ask(a.subjects.route, `{"tokens":[${tokens.join(',')}],"request_id":"small"}`)).toMatchObject({ request_id: 'small' });
      await until(() => shared.length === 2);
      expect(shared.map((t) => /"request_id":"(\w+)"/.exec(t)?.[1])).toEqual(['huge', 'small']);
      expect(shared[0]).toContain('"data":"Free"');
      expect(a.stats().unshared).toBe(1);
    } finally {
      watch.unsubscribe();
      await a.stop();
    }
  });
});
