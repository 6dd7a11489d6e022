/**
 * ZmqKvSource against real ZMQ sockets on 127.0.0.1, fed by a publisher that follows vLLM's
 * wire format. Every expected score comes from an in-process RadixTree fed the same events.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { computeBlockHashes } from '../src/hash/block-hash.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { EngineIndex } from '../src/zmq/engine-index.js';
import { MAX_RANKS_PER_SOURCE, ZmqKvSource, type ZmqKvSourceOptions } from '../src/zmq/source.js';
import { offsetEndpoint } from '../src/zmq/endpoint.js';
import { closedEndpoint, until, VllmPublisher, zmqAvailable, type EventSpec } from './support/vllm-publisher.js';
import { captureLog } from './support/log-capture.js';

const BS = 4;
const W = 0xfedc_ba98_7654_3210n; // above 2^53
const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

/** Blocks of a chain: tokens 0..4n-1 offset by `salt`, external hashes `ext0 + i`. */
function chain(n: number, salt: number, ext0: bigint, parent: bigint | null = null): { spec: EventSpec; tokens: number[]; ext: bigint[] } {
  const tokens = Array.from({ length: n * BS }, (_, i) => salt + i);
  const ext = Array.from({ length: n }, (_, i) => ext0 + BigInt(i));
  return { spec: { stored: { hashes: ext, parent, tokens, blockSize: BS } }, tokens, ext };
}

async function connect(pub: VllmPublisher, index: EngineIndex, o: Partial<ZmqKvSourceOptions> = {}): Promise<ZmqKvSource> {
  const src = await ZmqKvSource.start({ index, workerId: W, endpoint: pub.endpoint, replayTimeoutMs: 500, ...o });
  open.push(src);
  await pub.subscribed();
  return src;
}

/** A publisher, an index and a source connected to it (closed after the test). */
async function started(o: Partial<ZmqKvSourceOptions> = {}): Promise<{ pub: VllmPublisher; index: EngineIndex; src: ZmqKvSource }> {
  const pub = await VllmPublisher.start();
  open.push(pub);
  const index = new EngineIndex({ blockSize: BS });
  return { pub, index, src: await connect(pub, index, o) };
}

/** Chain a published as rank 0, then chain b as rank 1, both applied. */
async function twoRanks(pub: VllmPublisher, src: ZmqKvSource): Promise<{ a: ReturnType<typeof chain>; b: ReturnType<typeof chain> }> {
  const a = chain(2, 0, 1n);
  const b = chain(2, 500, 100n);
  setRank(pub, 0);
  await pub.publish([a.spec]);
  setRank(pub, 1);
  await pub.publish([b.spec]);
  await until(() => src.stats().batches === 2);
  return { a, b };
}

/** The rank the publisher's next batches name. */
function setRank(pub: VllmPublisher, rank: number): void {
  (pub as { rank: number | null }).rank = rank;
}

/** Device scores of (W, rank) for these tokens, in blocks. */
function score(index: EngineIndex, tokens: number[], rank = 0): number {
  return index.query(computeBlockHashes(tokens, BS)).scores.get(W)?.get(rank) ?? 0;
}

describe.skipIf(!(await zmqAvailable()))('ZmqKvSource', () => {
  it.each([
    ['map', 'uint'],
    ['array', 'int'],
    ['map', 'bytes'],
  ] as const)('applies %s-encoded events with %s hashes: scores equal a RadixTree fed the same events', async (events, hashes) => {
    const pub = await VllmPublisher.start({ events, hashes });
    open.push(pub);
    const index = new EngineIndex({ blockSize: BS });
    const src = await connect(pub, index);
    const a = chain(3, 0, 2n ** 63n + 5n);
    const b = chain(2, 1000, 2n ** 64n - 10n, a.ext[1]!);
    await pub.publish([a.spec]);
    await pub.publish([b.spec, { removed: [a.ext[2]!] }]);
    await until(() => src.stats().batches === 2);
    // The reference: the same blocks as Dynamo RouterEvents into a plain tree.
    const ref = new RadixTree();
    const la = computeBlockHashes(a.tokens, BS);
    const lb = computeBlockHashes(b.tokens, BS);
    ref.applyEvent({ workerId: W, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: a.ext.map((h, i) => ({ blockHash: h, tokensHash: la[i]! })) } } });
    ref.applyEvent({ workerId: W, event: { eventId: 1n, data: { type: 'stored', parentHash: a.ext[1]!, blocks: b.ext.map((h, i) => ({ blockHash: h, tokensHash: lb[i]! })) } } });
    ref.applyEvent({ workerId: W, event: { eventId: 1n, data: { type: 'removed', blockHashes: [a.ext[2]!] } } });
    for (const q of [a.tokens, [...a.tokens.slice(0, 8), ...b.tokens], b.tokens]) {
      const h = computeBlockHashes(q, BS);
      expect(index.query(h).scores.get(W)?.get(0) ?? 0).toBe(ref.findMatches(h).scores.get(W) ?? 0);
    }
    expect(score(index, [...a.tokens.slice(0, 8), ...b.tokens])).toBe(4);
    expect(src.stats()).toMatchObject({ batches: 2, events: 3, storedBlocks: 5, gaps: 0, badEvents: 0 });
  });

  it('keeps data-parallel ranks apart: one socket per rank on port offsets, scores per (worker, rank)', async () => {
    const pubs = await VllmPublisher.startRanks(2);
    open.push(...pubs);
    expect(pubs[1]!.endpoint).toBe(offsetEndpoint(pubs[0]!.endpoint, 1));
    const index = new EngineIndex({ blockSize: BS });
    const srcs = [await connect(pubs[0]!, index), await connect(pubs[1]!, index, { endpoint: pubs[1]!.endpoint, dpRank: 1 })];
    const a = chain(2, 0, 1n);
    const b = chain(3, 0, 1n); // same tokens and external hashes on the other rank
    await pubs[0]!.publish([a.spec]);
    await pubs[1]!.publish([b.spec]);
    await until(() => srcs.every((s) => s.stats().batches === 1));
    const r = index.query(computeBlockHashes(b.tokens, BS));
    expect(r.scores.get(W)).toEqual(new Map([[0, 2], [1, 3]]));
    // Removing on rank 1 leaves rank 0 untouched.
    await pubs[1]!.publish([{ removed: [b.ext[0]!] }]);
    await until(() => srcs[1]!.stats().batches === 2);
    expect(index.query(computeBlockHashes(b.tokens, BS)).scores.get(W)).toEqual(new Map([[0, 2]]));
    index.removeWorker(W);
    expect(index.query(computeBlockHashes(b.tokens, BS)).scores.size).toBe(0);
  });

  it.each(['legacy', 'topic'] as const)('heals a gap by replay (%s reply layout), applying missed batches before buffered live ones', async (replay) => {
    const pub = await VllmPublisher.start({ replay, topic: 'kv@pod-1@m' });
    open.push(pub);
    const index = new EngineIndex({ blockSize: BS });
    const src = await connect(pub, index, { replayEndpoint: pub.replayEndpoint, topic: 'kv@' });
    const a = chain(2, 0, 10n);
    const b = chain(2, 500, 20n, a.ext[1]!);
    await pub.publish([a.spec]);
    pub.drop([b.spec]); // seq 1 never reaches the SUB
    pub.drop([{ removed: [b.ext[0]!] }]); // nor seq 2
    const c = chain(1, 900, 30n);
    await pub.publish([c.spec]); // seq 3 reveals the gap
    const d = chain(1, 1900, 40n);
    await pub.publish([d.spec]); // seq 4, live, waits in the SUB queue during the replay
    await until(() => src.stats().batches === 5);
    expect(src.stats()).toMatchObject({ gaps: 1, gapsReplayed: 1, replayedBatches: 2, gapsUnreplayable: 0, restarts: 0 });
    // In order: b stored under a, then b0 removed (b1 stays below it, held, but past the gap
    // it scores nothing). The removal before the store would have left all of b (a score of 4).
    expect(score(index, [...a.tokens, ...b.tokens])).toBe(2);
    expect(score(index, c.tokens)).toBe(1);
    expect(score(index, d.tokens)).toBe(1);
    expect(index.blockCount(W, 0)).toBe(5);
  });

  it('a gap older than the replay ring is unreplayable: the worker is cleared and excluded', async () => {
    const pub = await VllmPublisher.start({ replay: 'topic' });
    open.push(pub);
    const index = new EngineIndex({ blockSize: BS });
    const src = await connect(pub, index, { replayEndpoint: pub.replayEndpoint });
    const a = chain(2, 0, 1n);
    await pub.publish([a.spec]);
    pub.drop([chain(1, 99, 70n).spec]);
    pub.drop([chain(1, 199, 71n).spec]);
    pub.ring.delete(1n); // the ring has moved past seq 1: only seq 2 can be replayed
    const c = chain(1, 3000, 80n);
    await pub.publish([c.spec]);
    await until(() => src.stats().batches === 2);
    expect(src.stats()).toMatchObject({ gaps: 1, gapsReplayed: 0, gapsUnreplayable: 1, replayedBatches: 0 });
    expect(score(index, a.tokens)).toBe(0);
    expect(index.isExcluded(W, 0)).toBe(true);
  });

  it('an out-of-protocol replay answer makes the gap unreplayable, counted, with the error kept', async () => {
    const pub = await VllmPublisher.start({ replay: 'garbled' });
    open.push(pub);
    const index = new EngineIndex({ blockSize: BS });
    const src = await connect(pub, index, { replayEndpoint: pub.replayEndpoint });
    const a = chain(2, 0, 1n);
    await pub.publish([a.spec]);
    pub.drop([chain(1, 99, 70n).spec]);
    await pub.publish([chain(1, 3000, 80n).spec]);
    await until(() => src.stats().batches === 2);
    expect(src.stats()).toMatchObject({ gapsUnreplayable: 1, replayedBatches: 0 });
    expect(src.lastError).toMatch(/seq frame of 4 bytes/);
    expect(src.state).toBe('active');
  });

  it("a batch's data_parallel_rank overrides the rank the source was started with", async () => {
    const pub = await VllmPublisher.start({ rank: 3 });
    open.push(pub);
    const index = new EngineIndex({ blockSize: BS });
    const src = await connect(pub, index, { dpRank: 0 });
    const a = chain(2, 0, 1n);
    await pub.publish([a.spec]);
    await until(() => src.stats().batches === 1);
    expect(index.query(computeBlockHashes(a.tokens, BS)).scores.get(W)).toEqual(new Map([[3, 2]]));
  });

  it('takes at most MAX_RANKS_PER_SOURCE distinct ranks from one endpoint, counting the rest as bad payloads', async () => {
    const pub = await VllmPublisher.start();
    open.push(pub);
    const index = new EngineIndex({ blockSize: BS });
    const src = await connect(pub, index);
    const extra = 3;
    const chains = [];
    for (let r = 0; r < MAX_RANKS_PER_SOURCE + extra; r++) {
      // A publisher naming a new rank in every batch: each rank once made a tree of its own.
      (pub as { rank: number | null }).rank = r;
      const c = chain(1, 100 * r, BigInt(r + 1));
      chains.push(c);
      await pub.publish([c.spec]);
    }
    await until(() => src.stats().batches + src.stats().badPayloads === MAX_RANKS_PER_SOURCE + extra);
    expect(src.stats()).toMatchObject({ batches: MAX_RANKS_PER_SOURCE, badPayloads: extra, gaps: 0 });
    expect(score(index, chains[MAX_RANKS_PER_SOURCE - 1]!.tokens, MAX_RANKS_PER_SOURCE - 1)).toBe(1);
    expect(index.query(computeBlockHashes(chains[MAX_RANKS_PER_SOURCE]!.tokens, BS)).scores.size).toBe(0);
    // A rank it already has is still taken.
    (pub as { rank: number | null }).rank = 5;
    await pub.publish([chain(1, 9000, 999n).spec]);
    await until(() => src.stats().batches === MAX_RANKS_PER_SOURCE + 1);
  });

  it('an engine restart (seq back to 0) clears the worker before applying', async () => {
    const pub = await VllmPublisher.start();
    open.push(pub);
    const index = new EngineIndex({ blockSize: BS });
    const src = await connect(pub, index);
    const a = chain(3, 0, 1n);
    await pub.publish([a.spec]);
    await pub.publish([chain(1, 77, 50n).spec]);
    await until(() => src.stats().batches === 2);
    expect(score(index, a.tokens)).toBe(3);
    pub.restart();
    const c = chain(1, 5000, 9n);
    await pub.publish([c.spec]);
    await until(() => src.stats().batches === 3);
    expect(src.stats().restarts).toBe(1);
    expect(score(index, a.tokens)).toBe(0);
    expect(score(index, c.tokens)).toBe(1);
  });

  it('an unreplayable gap (replay socket unreachable) clears the worker and keeps it out of scores until AllBlocksCleared', async () => {
    const pub = await VllmPublisher.start();
    open.push(pub);
    const index = new EngineIndex({ blockSize: BS });
    const src = await connect(pub, index, { replayEndpoint: await closedEndpoint(), replayTimeoutMs: 300 });
    const a = chain(2, 0, 1n);
    await pub.publish([a.spec]);
    pub.drop([chain(1, 99, 70n).spec]);
    const c = chain(2, 3000, 80n);
    await pub.publish([c.spec]);
    await until(() => src.stats().batches === 2);
    expect(src.stats()).toMatchObject({ gaps: 1, gapsReplayed: 0, gapsUnreplayable: 1 });
    expect(index.blockCount(W, 0)).toBe(2); // a cleared, c applied
    expect(score(index, a.tokens)).toBe(0);
    expect(score(index, c.tokens)).toBe(0); // held but excluded
    // Left out of /dump as well: a peer starting from it would have scored c.
    expect(index.dumpEvents().filter((e) => e.workerId === W)).toEqual([]);
    await pub.publish(['cleared', chain(1, 3000, 90n).spec]);
    await until(() => src.stats().batches === 3);
    expect(score(index, c.tokens)).toBe(1);
    expect(index.dumpEvents().filter((e) => e.workerId === W)).toHaveLength(1);
  });

  it('one endpoint carrying two ranks, interleaved: one seq per socket, no gap, both ranks scored', async () => {
    const { pub, index, src } = await started();
    const chains = [chain(2, 0, 1n), chain(3, 500, 100n), chain(1, 900, 200n), chain(2, 1300, 300n)];
    for (let i = 0; i < chains.length; i++) {
      setRank(pub, i % 2);
      await pub.publish([chains[i]!.spec]);
    }
    await until(() => src.stats().batches === 4);
    // A cursor per rank saw 0, 2 on rank 0 and 1, 3 on rank 1: a gap on each, unreplayable here.
    expect(src.stats()).toMatchObject({ gaps: 0, gapsUnreplayable: 0 });
    expect(chains.map((c, i) => score(index, c.tokens, i % 2))).toEqual([2, 3, 1, 2]);
    expect(src.ranks()).toEqual([0, 1]);
  });

  it('a gap on a two-rank endpoint (unreplayable) clears and excludes both ranks; each comes back with its own AllBlocksCleared', async () => {
    const { pub, index, src } = await started({ replayEndpoint: await closedEndpoint(), replayTimeoutMs: 300 });
    const { a, b } = await twoRanks(pub, src);
    pub.drop([chain(1, 99, 70n).spec]); // which rank it was for, the router cannot know
    setRank(pub, 0);
    await pub.publish([chain(1, 3000, 80n).spec]);
    await until(() => src.stats().batches === 3);
    expect(src.stats()).toMatchObject({ gaps: 1, gapsUnreplayable: 1 });
    expect(score(index, a.tokens, 0)).toBe(0);
    expect(score(index, b.tokens, 1)).toBe(0);
    expect(index.blockCount(W, 1)).toBe(0);
    // Rank 1's AllBlocksCleared brings rank 1 back, not rank 0.
    const c = chain(2, 7000, 400n);
    const d = chain(2, 8000, 500n);
    setRank(pub, 1);
    await pub.publish(['cleared', c.spec]);
    setRank(pub, 0);
    await pub.publish([d.spec]);
    await until(() => src.stats().batches === 5);
    expect(score(index, c.tokens, 1)).toBe(2);
    expect(score(index, d.tokens, 0)).toBe(0); // held, still excluded
    expect(index.blockCount(W, 0)).toBe(3);
  });

  it('a message that does not decode still shows the gap before it', async () => {
    const { pub, index, src } = await started();
    const a = chain(2, 0, 1n);
    await pub.publish([a.spec]);
    pub.drop([{ removed: [a.ext[1]!] }]); // lost: a's second block is gone at the engine
    await pub.publishRaw(Buffer.from([0xc1])); // not msgpack
    await until(() => src.stats().badPayloads === 1);
    // Before, the undecodable message only moved the cursor on, and a stayed scored 2.
    expect(src.stats()).toMatchObject({ gaps: 1, gapsUnreplayable: 1 });
    expect(score(index, a.tokens)).toBe(0);
    // The next message is the next seq: no second gap.
    await pub.publish(['cleared', chain(1, 40, 9n).spec]);
    await until(() => src.stats().batches === 2);
    expect(src.stats().gaps).toBe(1);
  });

  it('an engine restart clears every rank its socket carried', async () => {
    const { pub, index, src } = await started();
    await twoRanks(pub, src);
    pub.restart();
    await pub.publish([chain(1, 900, 7n).spec]);
    await until(() => src.stats().batches === 3);
    expect(src.stats().restarts).toBe(1);
    expect(index.blockCount(W, 0)).toBe(0);
    expect(index.blockCount(W, 1)).toBe(1);
  });

  it('counts malformed frames, payloads and events without losing what was indexed', async () => {
    const pub = await VllmPublisher.start();
    open.push(pub);
    const index = new EngineIndex({ blockSize: BS });
    const src = await connect(pub, index);
    const a = chain(2, 0, 1n);
    await pub.publish([a.spec]);
    await pub.pub.send(['', Buffer.from([1, 2, 3]), Buffer.from([0x90])]); // seq of 3 bytes
    await pub.pub.send(['only-two', Buffer.alloc(8)]);
    await pub.publishRaw(Buffer.from([0xc1, 0xc1])); // not msgpack
    await pub.publish([{ stored: { hashes: [5n], tokens: [1, 2, 3, 4, 5, 6, 7, 8], blockSize: 8 } }]); // block size mismatch
    await pub.publish([{ stored: { hashes: [6n, 6n], tokens: a.tokens, blockSize: BS } }]); // repeated hash
    await pub.publish([{ stored: { hashes: [7n], tokens: [1, 1, 1, 1], blockSize: BS, kind: 'sliding_window', groupIdx: 1 } }]);
    await pub.publish([{ stored: { hashes: [8n], tokens: [2, 2, 2, 2], blockSize: BS, medium: 'CPU' } }]);
    await until(() => src.stats().messages === 8);
    expect(src.stats()).toMatchObject({ badFrames: 2, badPayloads: 1, blockSizeMismatch: 1, duplicateHash: 1, nonFullAttention: 1, lowerTier: 1, gaps: 0 });
    expect(score(index, a.tokens)).toBe(2);
    const r = index.query(computeBlockHashes([2, 2, 2, 2], BS));
    expect(r.scores.size).toBe(0); // a CPU block never counts in device scores
    expect(r.lowerTiers.get('host_pinned')?.get(W)?.get(0)).toBe(1);
  });

  it('binds for engines that connect to the indexer, and filters topics', async () => {
    const index = new EngineIndex({ blockSize: BS });
    const src = await ZmqKvSource.start({ index, workerId: W, endpoint: 'tcp://127.0.0.1:0', mode: 'bind', topic: 'kv@' });
    open.push(src);
    const other = await VllmPublisher.start({ connect: true, endpoint: src.boundEndpoint, topic: 'other' });
    const pub = await VllmPublisher.start({ connect: true, endpoint: src.boundEndpoint, topic: 'kv@pod@m' });
    open.push(pub, other);
    await pub.subscribed();
    await other.subscribed();
    const a = chain(1, 0, 1n);
    await other.publish([chain(1, 0, 2n).spec]); // filtered out by the SUB
    await pub.publish([a.spec]);
    await until(() => src.stats().batches === 1);
    await new Promise((r) => setTimeout(r, 50));
    expect(src.stats().messages).toBe(1);
    expect(score(index, a.tokens)).toBe(1);
  });

  it('bound, a rank is connecting until an engine connects, and again once it leaves; each change is logged', async () => {
    const log = captureLog();
    const index = new EngineIndex({ blockSize: BS });
    const src = await ZmqKvSource.start({ index, workerId: W, endpoint: 'tcp://127.0.0.1:0', mode: 'bind', logger: log.logger, connectWarnMs: 200 });
    open.push(src);
    expect(src.health()).toEqual([expect.objectContaining({ rank: 0, state: 'connecting', reason: 'never_connected' })]);
    // No engine within connectWarnMs: a WARN naming the endpoint.
    await until(() => log.find('no engine publisher yet').length === 1, 10_000, 'the not-connected line');
    expect(log.find('no engine publisher yet')[0]).toMatchObject({ level: 40, endpoint: 'tcp://127.0.0.1:0' });
    const pub = await VllmPublisher.start({ connect: true, endpoint: src.boundEndpoint });
    await until(() => src.health()[0]!.state === 'active', 10_000, 'active');
    expect(src.stats().messages).toBe(0); // the handshake, not a message
    expect(log.find('engine publisher connected')).toHaveLength(1);
    pub.close();
    await until(() => src.health()[0]!.state === 'connecting', 10_000, 'connecting again');
    expect(src.health()[0]).toMatchObject({ reason: 'disconnected' });
    expect(log.find('engine publisher disconnected')[0]).toMatchObject({ level: 40 });
    // Closing the source is not an engine leaving.
    await src.close();
    expect(log.find('engine publisher disconnected')).toHaveLength(1);
  });

  it('readmitAfterMs: 0 counts the worker back in right after an unreplayable gap, with what came after it', async () => {
    const { pub, index, src } = await started({ readmitAfterMs: 0 });
    const a = chain(2, 0, 1n);
    await pub.publish([a.spec]);
    pub.drop([chain(1, 99, 70n).spec]);
    const c = chain(2, 3000, 80n);
    await pub.publish([c.spec]);
    await until(() => src.stats().batches === 2 && src.stats().readmissions === 1);
    expect(src.stats()).toMatchObject({ gapsUnreplayable: 1 });
    expect(src.health()[0]).toMatchObject({ state: 'active' });
    expect(score(index, c.tokens)).toBe(2);
    expect(score(index, a.tokens)).toBe(0); // stored before the gap: cleared
  });

  it('another gap while excluded restarts the readmission delay, keeping since; an engine restart ends the exclusion and the delay', async () => {
    const { pub, index, src } = await started({ readmitAfterMs: 1_500 });
    await pub.publish([chain(1, 0, 1n).spec]);
    pub.drop([chain(1, 99, 70n).spec]);
    await pub.publish([chain(1, 200, 2n).spec]);
    await until(() => src.stats().gapsUnreplayable === 1);
    const first = src.health()[0]!;
    expect(first).toMatchObject({ state: 'excluded', reason: 'unreplayable_gap' });
    await new Promise((r) => setTimeout(r, 300));
    pub.drop([chain(1, 99, 71n).spec]);
    const c = chain(2, 3000, 80n);
    await pub.publish([c.spec]);
    await until(() => src.stats().gapsUnreplayable === 2);
    const second = src.health()[0]!;
    expect(second.since).toBe(first.since);
    expect(second.readmitAt!).toBeGreaterThanOrEqual(first.readmitAt! + 300);
    // Past the first gap's readmission time: still out (unless the host stalled past the second's).
    await until(() => Date.now() > first.readmitAt! + 100);
    if (Date.now() < second.readmitAt!) expect(src.health()[0]!.state).toBe('excluded');
    expect(score(index, c.tokens)).toBe(src.health()[0]!.state === 'excluded' ? 0 : 2);
    // The engine restarts: cleared, back in at once, and no readmission is counted later.
    pub.restart();
    const d = chain(1, 5000, 9n);
    await pub.publish([d.spec]);
    await until(() => src.stats().restarts === 1);
    expect(src.health()[0]).toMatchObject({ state: 'active', readmitAt: null });
    expect(score(index, d.tokens)).toBe(1);
    const readmissions = src.stats().readmissions;
    await until(() => Date.now() > second.readmitAt! + 200);
    expect(src.stats().readmissions).toBe(readmissions);
  });
});
