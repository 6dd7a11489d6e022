/**
 * `applyEventJson`: raw serde-JSON events routed on the worker id and parsed in the shards; and
 * `applyEventJsonOnCaller`, parsed on the calling thread straight into the shard batches.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, EventParseError, KvIndexError } from '../src/errors.js';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { peekWorkerId } from '../src/shard/main/json-peek.js';
import { dumpTuples, sortedScores } from './support/compare.js';
import { generateStream } from './support/event-gen.js';

const W1 = 0xf694d99badb9f7c0n; // above 2^63: 20 decimal digits
const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

function chain(workerId: bigint, n: number, salt: bigint): RouterEvent {
  const blocks = Array.from({ length: n }, (_, i) => ({ blockHash: 0xf000_0000_0000_0000n + salt * 1000n + BigInt(i), tokensHash: 0xe000_0000_0000_0000n + BigInt(i) }));
  return { workerId, event: { eventId: 7n, data: { type: 'stored', parentHash: null, blocks } } };
}
const toks = (n: number): bigint[] => Array.from({ length: n }, (_, i) => 0xe000_0000_0000_0000n + BigInt(i));

let open: ShardedIndexer[] = [];
afterEach(async () => {
  await Promise.all(open.map((ix) => ix.close()));
  open = [];
});
async function make(shards: number): Promise<ShardedIndexer> {
  const ix = await ShardedIndexer.create({ shards, blockSize: 4 });
  open.push(ix);
  return ix;
}

describe('peekWorkerId', () => {
  it('reads the leading worker id exactly, above 2^53 too', () => {
    expect(peekWorkerId(enc(formatRouterEvent(chain(W1, 1, 0n))))).toBe(W1);
    expect(peekWorkerId(enc('{"worker_id":18446744073709551615,"event":{}}'))).toBe(18446744073709551615n);
    expect(peekWorkerId(enc('{"worker_id":7}'))).toBe(7n);
  });

  it('declines anything else, so the caller parses it fully', () => {
    for (const s of ['{"event":{},"worker_id":1}', '{"worker_id":18446744073709551616,', '{"worker_id":-1,', '{"worker_id":01,', '{"worker_id":1x', '']) {
      expect(peekWorkerId(enc(s))).toBeNull();
    }
  });
});

describe('applyEventJson', () => {
  it('gives the same index as applyEvent, interleaved in order with it', async () => {
    const viaJson = await make(2);
    const viaObjects = await make(2);
    const events: RouterEvent[] = [];
    for (let w = 0n; w < 6n; w++) events.push(chain(W1 + w, 2 + Number(w), w));
    events.push({ workerId: W1 + 3n, event: { eventId: 9n, data: { type: 'removed', blockHashes: [0xf000_0000_0000_0000n + 3n * 1000n + 4n] } } });
    events.forEach((e, i) => {
      if (i % 2 === 0) viaJson.applyEventJson(enc(formatRouterEvent(e)));
      else viaJson.applyEvent(e);
      viaObjects.applyEvent(e);
    });
    expect(await viaJson.findMatches(toks(8))).toEqual(await viaObjects.findMatches(toks(8)));
    expect(dumpTuples(await viaJson.dumpEvents())).toEqual(dumpTuples(await viaObjects.dumpEvents()));
  });

  it('counts and reports a malformed event parsed in a shard, keeping everything else', async () => {
    const ix = await make(2);
    const reported: KvIndexError[] = [];
    const tags: (number | undefined)[] = [];
    ix.on('malformed', (e: KvIndexError, tag?: number) => {
      reported.push(e);
      tags.push(tag);
    });
    ix.applyEventJson(enc(formatRouterEvent(chain(W1, 3, 0n))), 1);
    ix.applyEventJson(enc(`{"worker_id":${W1},"event":{"event_id":1,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":1`), 2);
    ix.applyEventJson(enc(formatRouterEvent(chain(W1 + 1n, 2, 1n))));
    ix.applyEventJson(enc(`{"worker_id":${W1 + 1n},"event":{"event_id":1,"data":{"moved":{}}}}`), 3);
    await ix.flush();
    const stats = await ix.stats();
    expect(stats.reduce((n, s) => n + s.malformed, 0)).toBe(2);
    expect(stats.reduce((n, s) => n + s.events.ok, 0)).toBe(2);
    expect(reported.map((e) => e.code).sort()).toEqual([ErrorCode.InvalidJson, ErrorCode.UnknownVariant].sort());
    expect(tags.sort()).toEqual([2, 3]);
    const { scores } = await ix.findMatches(toks(3));
    expect(scores.get(W1)).toBe(3);
    expect(scores.get(W1 + 1n)).toBe(2);
  });

  it('throws on malformed input it parses on the calling thread', async () => {
    const ix = await make(0);
    expect(() => ix.applyEventJson(enc('{"worker_id":1,"event":'))).toThrow(KvIndexError);
    const threaded = await make(2);
    expect(() => threaded.applyEventJson(enc('{"event":{},"worker_id":1}'))).toThrow(KvIndexError);
    expect((await threaded.stats()).reduce((n, s) => n + s.events.ok + s.malformed, 0)).toBe(0);
  });

  it('logs a malformed event itself only when nothing listens to the malformed event', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => { lines.push(chunk.toString()); done(); } });
    const ix = await ShardedIndexer.create({ shards: 1, blockSize: 4, logger: pino({ level: 'warn' }, sink) });
    open.push(ix);
    const bad = enc(`{"worker_id":${W1},"event":{"event_id":1,"data":{"moved":{}}}}`);
    ix.applyEventJson(enc(formatRouterEvent(chain(W1, 1, 0n))));
    ix.applyEventJson(bad, 11);
    await ix.flush();
    expect(lines.filter((l) => l.includes('"tag":11'))).toHaveLength(1); // no listener: logged here
    const heard: (number | undefined)[] = [];
    ix.on('malformed', (_e, tag) => heard.push(tag));
    ix.applyEventJson(bad, 12);
    await ix.flush();
    expect(heard).toEqual([12]);
    expect(lines.filter((l) => l.includes('"tag":12'))).toHaveLength(0); // the listener logs it
  });

  it("parses a worker's first event on the calling thread, so a malformed one claims no shard", async () => {
    const ix = await make(2);
    const bad = `{"worker_id":${W1},"event":{"event_id":1,"data":{"moved":{}}}}`;
    expect(() => ix.applyEventJson(enc(bad), 7)).toThrow(expect.objectContaining({ code: ErrorCode.UnknownVariant }));
    // Had W1 claimed shard 0, the next two workers would share shard 1; unclaimed, they split.
    ix.applyEventJson(enc(formatRouterEvent(chain(W1 + 1n, 2, 1n))));
    ix.applyEventJson(enc(formatRouterEvent(chain(W1 + 2n, 2, 2n))));
    const stats = await ix.stats();
    expect(stats.map((s) => s.workers)).toEqual([1, 1]);
    expect(stats.reduce((n, s) => n + s.malformed, 0)).toBe(0);
  });
});

describe('applyEventJsonOnCaller', () => {
  it('gives the same index as applyEvent for every event of a random stream, canonical or not', async () => {
    const stream = generateStream(17, 3000);
    const events = stream.ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));
    for (const shards of [0, 2]) {
      const viaText = await make(shards);
      const viaObjects = await make(shards);
      events.forEach((e, i) => {
        const text = formatRouterEvent(e);
        // Every fifth event in another layout (whitespace), which the fast path declines.
        viaText.applyEventJsonOnCaller(enc(i % 5 === 4 ? text.replace('"event":', '"event": ') : text));
        viaObjects.applyEvent(e);
      });
      expect(dumpTuples(await viaText.dumpEvents())).toEqual(dumpTuples(await viaObjects.dumpEvents()));
      for (const doc of stream.docs.slice(0, 50)) expect(sortedScores(await viaText.findMatches(doc))).toEqual(sortedScores(await viaObjects.findMatches(doc)));
      expect((await viaText.stats()).map((s) => s.events)).toEqual((await viaObjects.stats()).map((s) => s.events));
    }
  });

  it('throws EventParseError on malformed text and changes nothing, a first event included', async () => {
    const ix = await make(2);
    ix.applyEventJsonOnCaller(enc(formatRouterEvent(chain(W1, 3, 0n))));
    const bad = [
      `{"worker_id":${W1},"event":{"event_id":1,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":1`,
      `{"worker_id":${W1},"event":{"event_id":1,"data":{"moved":{}}}}`,
      `{"worker_id":${W1 + 1n},"event":{"event_id":1,"data":"cleared","dp_rank":-1}}`, // a new worker
    ];
    for (const b of bad) expect(() => ix.applyEventJsonOnCaller(enc(b))).toThrow(EventParseError);
    const stats = await ix.stats();
    expect(stats.map((s) => s.workers)).toEqual([1, 0]); // the malformed newcomer got no shard
    expect(stats.reduce((n, s) => n + s.events.ok, 0)).toBe(1);
    expect((await ix.findMatches(toks(3))).scores.get(W1)).toBe(3);
  });
});
