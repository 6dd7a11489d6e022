/**
 * The subscriber's pause: `pause()` asks the consuming loop to stop after its current pull and
 * resolves once the loop has settled it (events applied and acked); the loop then waits at the
 * gate until `resume()`. A loop that stops for good (closed or failed) lets any `pause()` caller
 * go (`stopped()`).
 */
export class PauseGate {
  private gate: Promise<void> | null = null;
  private open: (() => void) | null = null;
  private acknowledge: (() => void) | null = null;
  /** Whether a pause was asked and not yet resumed: the loop checks it before each pull. */
  wanted = false;

  /** Asks the loop to pause; resolves when it has (at once if a pause is already on). */
  async pause(): Promise<void> {
    if (this.gate !== null) return;
    this.gate = new Promise((res) => {
      this.open = res;
    });
    this.wanted = true;
    await new Promise<void>((res) => {
      this.acknowledge = res;
    });
  }

  resume(): void {
    this.wanted = false;
    this.open?.();
    this.gate = null;
    this.open = null;
  }

  /** The loop paused: tells the `pause()` caller, then waits until `resume()`. */
  async paused(): Promise<void> {
    this.stopped();
    await this.gate;
  }

  /** The loop stopped for good: a `pause()` caller must not wait for it. */
  stopped(): void {
    this.acknowledge?.();
    this.acknowledge = null;
  }
}
