/**
 * `runReplay` with shard threads counts the time the shards spend applying: the indexer time
 * of an event stream covers every event from the first enqueue through the final flush. The
 * check is a lower bound taken from the replay's own `onEvent` hook, so a loaded machine can
 * only make it easier to meet; summing the time inside `applyEvent` calls (which only enqueue)
 * falls far short of it.
 */
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runReplay } from '../src/cli/replay-run.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

describe.each([
  ['recorder', 'recorded-small.jsonl'],
  ['events', 'router-events-small.jsonl.gz'],
])('replay of a %s file through 2 shard threads', (kind, name) => {
  it('reports an indexer time spanning every event through the flush', async () => {
    const seen: number[] = [];
    const s = await runReplay({
      file: `${FIXTURES}${name}`,
      shards: 2,
      speed: Infinity,
      strict: false,
      limit: Infinity,
      sim: {},
      onEvent: () => {
        seen.push(performance.now());
        // A slow caller between events (1 ms each): the shards apply meanwhile.
        const until = performance.now() + 1;
        while (performance.now() < until);
      },
    });
    expect(s.kind).toBe(kind);
    // No lookups: the shards' applying is what is timed, and the indexer waited for nothing.
    expect({ readYourWrites: s.readYourWrites, callerMs: s.callerMs, lookupsEarly: s.lookupsEarly }).toEqual({ readYourWrites: false, callerMs: null, lookupsEarly: null });
    expect(s.events).toBe(62);
    expect(seen).toHaveLength(62);
    // The hook runs just before each event is enqueued: the first enqueue opened the busy span
    // before the second call, and the span closed after the flush, after the last call.
    expect(s.indexerMs).toBeGreaterThanOrEqual(seen[57]! - seen[1]!);
    expect(s.indexerMs).toBeLessThanOrEqual(s.wallMs);
    expect(s.blockOpsPerSec).toBeCloseTo((s.blockOps / s.indexerMs) * 1000, 6);
  });
});
