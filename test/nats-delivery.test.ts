/** The router's stream position rules (DeliveryTracker, explainGap), without a server. */

import { describe, expect, it } from 'vitest';
import { DeliveryTracker, GAP_PROBES, explainGap } from '../src/nats/delivery.js';

describe('DeliveryTracker', () => {
  it('advances on contiguous stream sequences', () => {
    const t = new DeliveryTracker(0);
    expect(t.classify(1)).toEqual({ kind: 'new' });
    expect(t.classify(2)).toEqual({ kind: 'new' });
    expect(t.position).toBe(2);
  });

  it('skips redelivered sequences at or below the position', () => {
    const t = new DeliveryTracker(10);
    expect(t.classify(11)).toEqual({ kind: 'new' });
    // A restarted server lost the acks: it delivers 9..11 again.
    expect(t.classify(9)).toEqual({ kind: 'duplicate' });
    expect(t.classify(11)).toEqual({ kind: 'duplicate' });
    expect(t.classify(12)).toEqual({ kind: 'new' });
    expect(t.position).toBe(12);
  });

  it('reports a jump in stream sequences as a gap without moving, until skipGap', () => {
    const t = new DeliveryTracker(0);
    t.classify(1);
    expect(t.classify(5)).toEqual({ kind: 'gap', from: 2, to: 4 });
    expect(t.position).toBe(1);
    t.skipGap(5);
    expect(t.position).toBe(5);
    expect(t.classify(6)).toEqual({ kind: 'new' });
  });

  it('does not call the first sequence of a router starting from the beginning a gap; from a snapshot it does', () => {
    const fromStart = new DeliveryTracker(0);
    expect(fromStart.classify(40)).toEqual({ kind: 'new' });
    expect(fromStart.classify(45)).toEqual({ kind: 'gap', from: 41, to: 44 });
    const fromSnapshot = new DeliveryTracker(20);
    expect(fromSnapshot.classify(31)).toEqual({ kind: 'gap', from: 21, to: 30 });
  });
});

describe('explainGap', () => {
  const holding = (held: Set<number>) => (seq: number) => Promise.resolve(held.has(seq));

  it('counts sequences below the first one as purged without probing them', async () => {
    const probed: number[] = [];
    const r = await explainGap(10, 19, 20, (s) => {
      probed.push(s);
      return Promise.resolve(true);
    });
    expect(r).toEqual({ purged: 10, deleted: 0, inTransit: [] });
    expect(probed).toEqual([]);
  });

  it('tells deleted sequences from ones the stream still holds', async () => {
    expect(await explainGap(10, 19, 15, holding(new Set()))).toEqual({ purged: 5, deleted: 5, inTransit: [] });
    expect(await explainGap(10, 19, 1, holding(new Set([12, 13])))).toEqual({ purged: 0, deleted: 8, inTransit: [12, 13] });
  });

  it(`probes a long gap at its two ends only (${GAP_PROBES} sequences)`, async () => {
    const probed: number[] = [];
    const r = await explainGap(1, 10_000, 1, (s) => {
      probed.push(s);
      return Promise.resolve(s === 10_000);
    });
    expect(probed.length).toBe(GAP_PROBES);
    expect(r.inTransit).toEqual([10_000]);
  });
});
