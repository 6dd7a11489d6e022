/**
 * Fault injection for indexer tests, through a fixture shard thread (test/fixtures/
 * faulty-shard.mjs) that runs the product's shard code with faults armed: no test hook lives in
 * the product. Started through the indexer's one internal hatch.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { BroadcastChannel } from 'node:worker_threads';
import type { KvIndexError } from '../../src/errors.js';
import { ShardedIndexer, type ShardedIndexerOptions } from '../../src/indexer/sharded-indexer.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/faulty-shard.mjs', import.meta.url));

export interface Faults {
  /** Shards throw while applying a Stored event of this worker. */
  failOnWorker?: bigint;
  /** The shards' trees start with this node and edge capacity (tiny: growth under lookups). */
  initialCapacity?: number;
  /** Every that many units joining or leaving a node, a shard stops ~1 ms inside the unit. */
  stallEvery?: number;
}

export interface FaultyIndexer {
  ix: ShardedIndexer;
  /** Makes shard `index`'s thread exit abruptly; resolves once the indexer has noticed. */
  kill(index: number): Promise<KvIndexError>;
}

export async function createFaultyIndexer(options: ShardedIndexerOptions, faults: Faults = {}): Promise<FaultyIndexer> {
  const killChannel = `kvindex-kill-${randomUUID()}`;
  const data = {
    killChannel, failOnWorker: faults.failOnWorker?.toString() ?? null, initialCapacity: faults.initialCapacity ?? null,
    stallEvery: faults.stallEvery ?? null,
  };
  const ix = await ShardedIndexer.unsafeInternals.create(options, { file: FIXTURE, data });
  const kill = (index: number): Promise<KvIndexError> => {
    const failed = new Promise<KvIndexError>((res) => ix.once('shardFailed', res));
    const channel = new BroadcastChannel(killChannel);
    channel.postMessage(index);
    channel.close();
    return failed;
  };
  return { ix, kill };
}
