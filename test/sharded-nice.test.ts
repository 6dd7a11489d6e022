/**
 * `shardNice`: shard threads lower their own priority (Linux: per-thread niceness), checked
 * from outside through /proc, not from what the threads report; the calling thread keeps its
 * own. Elsewhere the option is accepted and has no effect (the test skips).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';

/** Niceness of a thread of this process, from /proc/self/task/<tid>/stat (field 19). */
function niceOf(tid: string | number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  // Fields after the parenthesised command name, which may itself hold spaces.
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

function threadNiceness(): number[] {
  return readdirSync('/proc/self/task').map(niceOf);
}

const open: ShardedIndexer[] = [];
afterAll(async () => {
  await Promise.all(open.map((ix) => ix.close()));
});

describe.skipIf(!existsSync('/proc/thread-self'))('shardNice', () => {
  it('lowers the priority of exactly the shard threads', async () => {
    const before = threadNiceness().filter((n) => n === 7).length;
    const ix = await ShardedIndexer.create({ shards: 3, blockSize: 16, shardNice: 7 });
    open.push(ix);
    expect(threadNiceness().filter((n) => n === 7).length - before).toBe(3);
    expect(niceOf(process.pid)).toBe(0); // the calling thread is unchanged
    // And the shards still work.
    ix.applyEvent({ workerId: 1n, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: [{ blockHash: 5n, tokensHash: 9n }] } } });
    expect((await ix.findMatches([9n])).scores.get(1n)).toBe(1);
  });

  it('leaves shard threads at the caller priority by default, and rejects values outside 0..19', async () => {
    const before = threadNiceness().filter((n) => n !== 0).length;
    const ix = await ShardedIndexer.create({ shards: 2, blockSize: 16 });
    open.push(ix);
    expect(threadNiceness().filter((n) => n !== 0).length).toBe(before);
    await expect(ShardedIndexer.create({ shards: 1, blockSize: 16, shardNice: 20 })).rejects.toMatchObject({ code: 'KVX_INVALID_OPTION' });
    await expect(ShardedIndexer.create({ shards: 1, blockSize: 16, shardNice: -1 })).rejects.toMatchObject({ code: 'KVX_INVALID_OPTION' });
  });
});
