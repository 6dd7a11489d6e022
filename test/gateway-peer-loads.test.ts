/**
 * The peers' requests in a gateway's routers (src/gateway/peer-loads.ts), on real
 * `ActiveSequences` with a manual clock: own events skipped, peers' ids kept apart from each
 * other's and from the gateway's own, a silent peer with heartbeats dropped with its loads and
 * one without kept, requests the routers expired forgotten.
 */
import { describe, expect, it } from 'vitest';
import { ApplyResult, PeerLoads } from '../src/gateway/peer-loads.js';
import { ActiveSequences } from '../src/router/active-sequences.js';
import type { ActiveSequenceEvent } from '../src/router/sequence-event.js';

function setup(ttlMs = 300_000) {
  let t = 0;
  const now = (): number => t;
  const seqs = new ActiveSequences({ blockSize: 4, now, ttlMs });
  const peers = new PeerLoads({ routerId: 1n, expiryMs: 1_000, now, sequencesOf: (w) => (w === 7n ? [seqs] : []) });
  return { seqs, peers, advance: (ms: number) => (t += ms) };
}

const add = (requestId: string, routerId: bigint, workerId = 7n): ActiveSequenceEvent => ({
  requestId, workerId, dpRank: 0, routerId, loraName: null,
  data: { type: 'add_request', blockHashes: new BigUint64Array([11n, 12n]), trackPrefillTokens: true, expectedOutputTokens: null, prefillTokens: null },
});
const free = (requestId: string, routerId: bigint): ActiveSequenceEvent => ({ requestId, workerId: 7n, dpRank: 0, routerId, loraName: null, data: { type: 'free' } });

describe('PeerLoads', () => {
  it('skips its own events and keeps two peers\' equal ids, and the gateway\'s own, apart', () => {
    const { seqs, peers } = setup();
    seqs.addRequest('gw-0', 7n, [11n]); // the gateway's own request
    expect(peers.apply(add('gw-0', 1n))).toBe(ApplyResult.Own);
    expect(peers.apply(add('gw-0', 2n))).toBe(ApplyResult.Applied);
    expect(peers.apply(add('gw-0', 3n))).toBe(ApplyResult.Applied);
    expect(peers.apply(add('gw-0', 3n))).toBe(ApplyResult.Duplicate);
    expect(peers.apply(add('x', 2n, 8n))).toBe(ApplyResult.UnknownWorker);
    expect(seqs.load(7n).activeRequests).toBe(3);
    // Peer 2 frees its gw-0: the gateway's own gw-0 and peer 3's stay.
    expect(peers.apply(free('gw-0', 2n))).toBe(ApplyResult.Applied);
    expect(seqs.has('gw-0')).toBe(true);
    expect(seqs.load(7n).activeRequests).toBe(2);
    expect(peers.apply(free('gw-0', 2n))).toBe(ApplyResult.UnknownRequest);
    expect(peers.remoteRequests).toBe(1);
  });

  it('drops a peer whose heartbeats stopped, with its loads, and keeps one that never sent any', () => {
    const { seqs, peers, advance } = setup();
    peers.heartbeat(2n, 100);
    peers.apply(add('a', 2n));
    peers.apply(add('b', 2n));
    peers.apply(add('c', 3n)); // no heartbeats: a Dynamo router
    advance(900);
    expect(peers.sweep()).toEqual([]);
    peers.heartbeat(2n, 100); // alive again: the silence restarts
    advance(1_001);
    const dropped = peers.sweep();
    expect(dropped.map((d) => [d.routerId, d.requests])).toEqual([[2n, 2]]);
    expect(seqs.load(7n).activeRequests).toBe(1);
    expect(peers.stats()).toMatchObject({ peers: 1, remoteRequests: 1, expiredPeers: 1, expiredRequests: 2 });
    advance(60_000);
    expect(peers.sweep()).toEqual([]);
    expect(seqs.load(7n).activeRequests).toBe(1);
  });

  it('waits 3 of a peer\'s own intervals when they are longer than its expiry', () => {
    const { peers, advance } = setup();
    peers.heartbeat(2n, 1_000);
    peers.apply(add('a', 2n));
    advance(2_500);
    expect(peers.sweep()).toEqual([]);
    advance(600);
    expect(peers.sweep()).toHaveLength(1);
  });

  it('forgets requests the routers expired, and a leaving peer at once', () => {
    const { seqs, peers, advance } = setup(10_000);
    peers.apply(add('a', 3n));
    advance(10_000);
    seqs.expire();
    expect(peers.remoteRequests).toBe(1);
    peers.sweep();
    expect(peers.remoteRequests).toBe(0);
    peers.heartbeat(4n, 100);
    peers.apply(add('b', 4n));
    expect(peers.leave(4n)).toMatchObject({ routerId: 4n, requests: 1 });
    expect(seqs.size).toBe(0);
    expect(peers.leave(1n)).toBeNull();
  });
});
