/**
 * The subscriber's option checks (src/nats/subscriber-options.ts), no server: timer periods stop
 * at Node's longest timer and server durations at nats-server's int64 nanoseconds. Past them a
 * snapshot interval fired every millisecond and a max age came back as the server's "invalid
 * json"; now they are `KVX_INVALID_OPTION` naming the option.
 */
import { describe, expect, it } from 'vitest';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { checkSubscriberOptions } from '../src/nats/subscriber-options.js';
import { MAX_NANOS_S, MAX_TIMER_MS } from '../src/protocol/time-limits.js';

describe('checkSubscriberOptions bounds', () => {
  it('accepts each bound and refuses one past it, naming the option', async () => {
    const ix = await ShardedIndexer.create({ shards: 0, blockSize: 16 });
    const cases: Array<[string, number]> = [
      ['snapshotIntervalMs', MAX_TIMER_MS],
      ['fetchExpiresMs', MAX_TIMER_MS],
      ['streamMaxAgeS', MAX_NANOS_S],
      ['consumerInactiveThresholdS', MAX_NANOS_S],
    ];
    for (const [name, max] of cases) {
      expect(checkSubscriberOptions({ indexer: ix, namespace: 'n', component: 'c', [name]: max })[name as 'snapshotIntervalMs']).toBe(max);
      expect(() => checkSubscriberOptions({ indexer: ix, namespace: 'n', component: 'c', [name]: max + 1 }), name).toThrow(expect.objectContaining({
        code: 'KVX_INVALID_OPTION',
        message: expect.stringContaining(`${name}: expected an integer from`) as unknown,
      }));
    }
    await ix.close();
  });
});
