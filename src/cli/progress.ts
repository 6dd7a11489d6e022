/**
 * A one-line progress bar on stderr, drawn only when stderr is a TTY (a pipe or a file gets
 * nothing, so `--json` output and logs stay clean). Redrawn in place with `\r`; `done` erases it.
 */
import type { WriteStream } from 'node:tty';

export interface ProgressBar {
  /** False for the no-op bar: callers can skip building status texts. */
  readonly active: boolean;
  /** Redraws the bar at `fraction` (0..1) with a short status text. */
  update(fraction: number, status: string): void;
  /** Erases the bar. */
  done(): void;
}

const NOOP: ProgressBar = { active: false, update() {}, done() {} };

/** A bar on `stream` if it is a TTY, else a no-op (decided once, not per update). */
export function createProgressBar(stream: NodeJS.WriteStream = process.stderr): ProgressBar {
  if (!stream.isTTY) return NOOP;
  const tty = stream as WriteStream;
  let drawn = false;
  return {
    active: true,
    update(fraction, status) {
      const cols = tty.columns > 0 ? tty.columns : 80; // 0 under some pseudo-terminals
      const width = Math.max(10, Math.min(40, cols - status.length - 10));
      const f = Math.min(1, Math.max(0, fraction));
      const full = Math.round(f * width);
      const line = `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${(f * 100).toFixed(0).padStart(3)}% ${status}`;
      tty.write(`\r${line.slice(0, cols - 1)}\x1b[K`);
      drawn = true;
    },
    done() {
      if (drawn) tty.write('\r\x1b[K');
      drawn = false;
    },
  };
}
