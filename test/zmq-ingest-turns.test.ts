/**
 * The ZMQ sources' shared ingestion clock: once ~0.5 ms of work was done since the event loop's
 * last turn, every caller gets the same pending turn, and after it, work goes on without waiting.
 */
import { describe, expect, it } from 'vitest';
import { ingestTurn } from '../src/zmq/ingest-turns.js';

function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe('ingestTurn', () => {
  it('hands every source the same turn once the slice is used, and lets I/O run before it resolves', async () => {
    await new Promise((r) => setImmediate(r));
    let wait = ingestTurn();
    if (wait !== null) await wait; // a slice left over from module load
    expect(ingestTurn()).toBeNull();
    busy(1);
    const a = ingestTurn();
    const b = ingestTurn();
    expect(a).not.toBeNull();
    expect(b).toBe(a);
    // A timer due now must run before the turn is handed back: the turn waits for the loop.
    let timerRan = false;
    setTimeout(() => (timerRan = true), 0);
    busy(2); // the timer is due
    await a;
    expect(timerRan).toBe(true);
    expect(ingestTurn()).toBeNull();
  });
});
