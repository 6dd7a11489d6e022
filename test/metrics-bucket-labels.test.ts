/**
 * The lookup histogram of `kvindex serve --http --metrics` in the Prometheus text exposition:
 * every bucket bound prints as its decimal (`le="7.29"`, never `le="7.290000000000001"`), so a
 * query naming a bound matches. The NATS server's histogram is checked in serve-ops.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { EngineRegistry } from '../src/http/engine-registry.js';
import { decimalExponentialBuckets } from '../src/serve/lookup-buckets.js';
import { ZmqServeMetrics } from '../src/serve/zmq-metrics.js';
import { LOOKUP_LE, parsePrometheusText, samples } from './support/prometheus-text.js';

describe('lookup histogram bucket labels', () => {
  it('prints every le of kvindex_http_query_ms as a decimal, and counts into the right bucket', async () => {
    const registry = new EngineRegistry({});
    try {
      const metrics = new ZmqServeMetrics(registry, false);
      metrics.observeQuery('/query', 7.29); // on the bound: counted in le="7.29"
      metrics.observeQuery('/query', 7.2900001); // past it
      const { body } = await metrics.scrape();
      expect(body).not.toMatch(/le="[0-9.]*0000000/);
      const buckets = samples(parsePrometheusText(body), 'kvindex_http_query_ms_bucket');
      expect(buckets.map((s) => s.labels.le)).toEqual(LOOKUP_LE);
      const count = (le: string): number => buckets.find((s) => s.labels.le === le)!.value;
      expect([count('2.43'), count('7.29'), count('21.87')]).toEqual([0, 1, 2]);
    } finally {
      await registry.close();
    }
  });

  it('computes each bound on its own: no error carried from one bound to the next', () => {
    const b = decimalExponentialBuckets(0.01, 3, 17);
    expect(b.map(String)).toEqual(LOOKUP_LE.slice(0, -1));
    expect(decimalExponentialBuckets(0.1, 2, 4)).toEqual([0.1, 0.2, 0.4, 0.8]);
  });
});
