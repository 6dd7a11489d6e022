/**
 * Callers waiting until the subscriber has applied a stream sequence (`waitForSeq`): released
 * when a commit reaches their sequence, rejected on their timeout or when the subscriber closes.
 */
interface Waiter {
  seq: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

export class SeqWaiters {
  private waiters: Waiter[] = [];

  /**
   * Resolves once `release(upTo)` reaches `seq` (at once if `applied` already does); rejects
   * after `timeoutMs`, the message naming `applied()` at that moment.
   */
  wait(seq: number, applied: () => number, timeoutMs: number): Promise<void> {
    if (applied() >= seq) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`stream sequence ${seq} not applied within ${timeoutMs} ms (applied: ${applied()})`));
      }, timeoutMs);
      const w: Waiter = {
        seq,
        resolve: (): void => {
          clearTimeout(t);
          resolve();
        },
        reject: (err: Error): void => {
          clearTimeout(t);
          reject(err);
        },
      };
      this.waiters.push(w);
    });
  }

  /** Resolves every waiter whose sequence is at most `upTo`. */
  release(upTo: number): void {
    if (this.waiters.length === 0) return;
    const ready = this.waiters.filter((w) => w.seq <= upTo);
    this.waiters = this.waiters.filter((w) => w.seq > upTo);
    for (const w of ready) w.resolve();
  }

  /** Rejects every waiter (the subscriber closed); `applied` names the last sequence applied. */
  rejectAll(applied: number): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) w.reject(new Error(`subscriber closed before stream sequence ${w.seq} was applied (applied: ${applied})`));
  }
}
