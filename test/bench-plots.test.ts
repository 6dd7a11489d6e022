/** The plots beside BENCHMARKS.md (bench/plots.ts): drawn from a run's rows, none without them. */
import { describe, expect, it } from 'vitest';
import { plotsOf } from '../bench/plots.js';

const points = (svg: string): number[] => [...svg.matchAll(/<g class="series" data-name="[^"]*" data-points="(\d+)"/g)].map((m) => Number(m[1]));

describe('bench plots', () => {
  it('draws one plot per figure from the rows, every series with its points', () => {
    const plots = plotsOf([
      { name: 'snapshot-scaling', rows: [1, 2, 4].map((k) => ({ pairs: 262_144 * k, 'dump ms (median)': 7 * k, 'fresh buffer: ms (median)': 8 * k })) },
      {
        name: 'replay',
        rows: ['0', '2, readYourWrites false'].flatMap((shards) => [
          ...[10, 100, 1000].map((f) => ({ shards, factor: f, 'offered req/s': f * 3.4, 'achieved req/s': f * 3.3, 'lookup p99 us': 10 + f / 100 })),
          { shards, factor: 'unpaced', 'achieved req/s': 18_000, 'lookup p99 us': 7 },
        ]),
      },
      { name: 'lookup', rows: [{ suite: 'lookup-quiescent', shards: 0, lookup: 'findMatchesInto (sync)', 'p50 us': 0.5, 'p99 us': 3, 'p99.9 us': 14, 'max us': 900 }, { suite: 'lookup-idle', shards: 0, 'p50 us': 4 }] },
    ]);
    expect(plots.map((p) => p.file)).toEqual(['snapshot-scaling.svg', 'sweep-throughput.svg', 'sweep-lookup-p99.svg', 'lookup-channels.svg']);
    const [snap, through, p99, channels] = plots.map((p) => points(p.svg));
    expect(snap).toEqual([3, 3, 3]); // kept writer, fresh memory, the per-pair line
    expect(through).toEqual([3, 3, 2]); // unpaced rows have no offered rate: not drawn
    expect(p99).toEqual([3, 3]);
    expect(channels).toEqual([4]); // only the quiescent rows, at p50, p99, p99.9, max
    expect(plots[0]!.svg).toContain('26.7 ns per pair');
  });

  it('draws nothing for suites that did not run', () => {
    expect(plotsOf([{ name: 'hash', rows: [{ x: 1 }] }])).toEqual([]);
  });
});
