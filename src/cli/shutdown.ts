/**
 * Stop signals and the shutdown deadline of the long-running commands (`kvindex serve` and
 * `kvindex serve --http`). An orchestrator sends SIGTERM and expects the process gone within
 * its grace period; issue 36 asks for 1 s, whoever sent the signal. The orderly shutdown (close
 * the listeners, apply and ack what NATS delivered, close the indexer) takes 50-200 ms measured
 * on a busy 2-core host, but a step can hang on a peer: a replay request to an engine that
 * never answers held it for --replay-timeout (2 s by default), a frozen NATS server for its
 * request timeout. So:
 * - the first SIGTERM/SIGINT starts the shutdown and arms a deadline (`SHUTDOWN_DEADLINE_MS`
 *   after it); if the shutdown has not finished by then, one WARN line names the step that
 *   hangs and the process exits 1;
 * - a second signal during the shutdown exits 1 at once, after one WARN line;
 * - a shutdown that finished but left a handle open (a socket some library did not close) exits
 *   with its own code at the deadline, logging the kinds of the handles left.
 * - a signal before the server is ready (connecting, restoring a snapshot) exits 1 at once,
 *   after one WARN line: nothing is acked or serving yet. Handled, not left to the default
 *   action, because `node` as a container's PID 1 gets no default action: the kernel drops a
 *   signal PID 1 has no handler for, and the orchestrator waited out its grace period.
 * Exit codes: 0 stopped cleanly, 1 stopped forcibly or failed.
 */

import type { Logger } from 'pino';

/** From the first stop signal to a forced exit, ms: the 1 s, less a margin for exit. */
export const SHUTDOWN_DEADLINE_MS = 800;

/** Signals that stop the server. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/** The stop trigger and the deadline of one server process (see the top of the file). */
export class Shutdown {
  readonly #logger: Logger;
  readonly #deadlineMs: number;
  readonly #signals: NodeJS.Signals[] = [];
  #step = 'starting';
  #serving = false;
  #code: number | null = null;
  #timer: NodeJS.Timeout | null = null;
  #onSignal: ((s: NodeJS.Signals) => void) | null = null;
  readonly #listener = (s: NodeJS.Signals): void => this.#signal(s);

  /** Listens for SIGTERM and SIGINT from now on; call it first thing, then `serving()` once ready. */
  constructor(logger: Logger, deadlineMs = SHUTDOWN_DEADLINE_MS) {
    this.#logger = logger;
    this.#deadlineMs = deadlineMs;
    for (const s of STOP_SIGNALS) process.on(s, this.#listener);
  }

  /** The server is ready: a signal from now on starts the orderly shutdown. */
  serving(): void {
    this.#serving = true;
    this.#step = 'serving';
  }

  /** Resolves with the first stop signal's name. */
  signalled(): Promise<NodeJS.Signals> {
    const first = this.#signals[0];
    if (first !== undefined) return Promise.resolve(first);
    return new Promise((resolve) => (this.#onSignal = resolve));
  }

  /**
   * Starts the shutdown without a signal (the server failed): arms the deadline. A signal
   * after this counts as the second.
   */
  begin(why: string): void {
    if (this.#timer !== null) return;
    this.#step = why;
    this.#timer = setTimeout(() => this.#expire(), this.#deadlineMs);
    // Unreferenced: a shutdown that releases everything exits by itself, sooner.
    this.#timer.unref();
  }

  /** Runs one named step of the shutdown; the name is what the deadline's WARN line reports. */
  async step<T>(name: string, work: () => Promise<T>): Promise<T> {
    this.#step = name;
    return work();
  }

  /** Marks the shutdown finished with `code`; returns it. The process exits with it by the deadline. */
  finished(code: number): number {
    this.#code = code;
    this.#step = 'finished';
    for (const s of STOP_SIGNALS) process.off(s, this.#listener);
    return code;
  }

  #signal(s: NodeJS.Signals): void {
    if (!this.#serving && this.#timer === null) {
      this.#logger.warn({ signal: s }, 'stop signal during start-up: exiting now');
      process.exit(1);
    }
    this.#signals.push(s);
    if (this.#signals.length === 1) {
      this.begin(`signal ${s}`);
      this.#onSignal?.(s);
      return;
    }
    this.#logger.warn({ signal: s, step: this.#step }, 'second stop signal during the shutdown: exiting now');
    process.exit(1);
  }

  #expire(): void {
    if (this.#code !== null) {
      // Node's own names for what keeps the loop alive (e.g. 'TCPSocketWrap', 'Timeout').
      this.#logger.warn({ handles: process.getActiveResourcesInfo() }, `handles still open ${this.#deadlineMs} ms after the stop signal: exiting`);
      process.exit(this.#code);
    }
    this.#logger.warn({ step: this.#step, deadlineMs: this.#deadlineMs }, 'shutdown did not finish in time: exiting now');
    process.exit(1);
  }
}
