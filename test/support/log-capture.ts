/** A pino logger at `debug` whose lines are kept in memory, to assert what was (not) logged. */

import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

export interface CapturedLog {
  logger: Logger;
  /** Every line written so far (raw JSON text). */
  lines(): string[];
  /** Parsed lines whose `msg` contains `text`. */
  find(text: string): Array<Record<string, unknown>>;
}

export function captureLog(level = 'debug'): CapturedLog {
  const out: string[] = [];
  let partial = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      const text = partial + chunk.toString();
      const parts = text.split('\n');
      partial = parts.pop() ?? '';
      for (const p of parts) if (p !== '') out.push(p);
      cb();
    },
  });
  const logger = pino({ level }, sink);
  return {
    logger,
    lines: () => (partial === '' ? [...out] : [...out, partial]),
    find: (text) =>
      out.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => typeof l['msg'] === 'string' && (l['msg'] as string).includes(text)),
  };
}
