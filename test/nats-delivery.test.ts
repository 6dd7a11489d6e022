/** The router's stream position rules (DeliveryTracker), without a server. */

import { describe, expect, it } from 'vitest';
import { DeliveryTracker } from '../src/nats/delivery.js';

describe('DeliveryTracker', () => {
  it('advances on in-order deliveries', () => {
    const t = new DeliveryTracker(0);
    expect(t.classify(1, 1)).toEqual({ kind: 'new', missedFrom: 1, missedTo: 0 });
    expect(t.classify(2, 2)).toMatchObject({ kind: 'new' });
    expect(t.position).toBe(2);
  });

  it('skips redelivered sequences at or below the position, whatever their delivery number', () => {
    const t = new DeliveryTracker(10);
    expect(t.classify(11, 1)).toMatchObject({ kind: 'new' });
    // A restarted server lost the acks: it delivers 9..11 again with lower delivery numbers.
    expect(t.classify(9, 1)).toEqual({ kind: 'duplicate' });
    expect(t.classify(11, 2)).toEqual({ kind: 'duplicate' });
    expect(t.classify(12, 3)).toMatchObject({ kind: 'new' });
    expect(t.position).toBe(12);
  });

  it('reports a jump in delivery numbers as lost deliveries without moving', () => {
    const t = new DeliveryTracker(0);
    t.classify(1, 1);
    expect(t.classify(5, 5)).toEqual({ kind: 'lost', expected: 2 });
    expect(t.position).toBe(1);
    t.consumerCreated();
    expect(t.classify(2, 1)).toMatchObject({ kind: 'new' });
  });

  it('reports skipped stream sequences, except before the first message of a router starting from the beginning', () => {
    const fromStart = new DeliveryTracker(0);
    expect(fromStart.classify(40, 1)).toEqual({ kind: 'new', missedFrom: 1, missedTo: 0 });
    expect(fromStart.classify(45, 2)).toEqual({ kind: 'new', missedFrom: 41, missedTo: 44 });
    const fromSnapshot = new DeliveryTracker(20);
    expect(fromSnapshot.classify(31, 1)).toEqual({ kind: 'new', missedFrom: 21, missedTo: 30 });
  });
});
