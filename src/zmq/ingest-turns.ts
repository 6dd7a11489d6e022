/**
 * One clock for every ZMQ source on a thread: the receive loops of all sources together work
 * at most `YIELD_MS` before the event loop gets a turn (its poll phase: HTTP requests, timers).
 *
 * While messages are queued, zeromq resolves each receive at once, so a receive loop would hold
 * the event loop for its whole backlog (10,000 batches are 0.4-0.7 s of work here). A clock per
 * source bounds each loop, but the loops of 8 sources resume one after the other in the same
 * check phase, so HTTP could wait 8 slices. With the shared clock, /query p99 at 1,000 req/s
 * while 8 engines publish 50k blocks/s measured 1.4-2.4 ms over 6 runs (routes in the
 * benchmark process, client in its own process, 2-core dev VM) against 2.0-4.1 ms over 8 runs
 * with a clock per source.
 */
const YIELD_MS = 0.5;

let sliceStart = performance.now();
let turn: Promise<void> | null = null;

function nextTurn(): Promise<void> {
  turn ??= new Promise<void>((resolve) =>
    setImmediate(() => {
      turn = null;
      sliceStart = performance.now();
      resolve();
    }),
  );
  return turn;
}

/**
 * Resolves at once while the thread's ingestion slice lasts, or (the slice used up) after the
 * event loop's next turn; every source waiting then resumes on a fresh slice.
 */
export function ingestTurn(): Promise<void> | null {
  return performance.now() - sliceStart > YIELD_MS ? nextTurn() : null;
}
