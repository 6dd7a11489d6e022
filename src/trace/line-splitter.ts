/**
 * Splits a byte stream into text lines with a cap on a line's length, for the input readers
 * (line-source.ts). Node's readline has no cap: a line past V8's longest string (~512 MiB, e.g.
 * `/dev/zero` or a corrupt file without newlines) threw a RangeError inside the stream's data
 * handler, where no caller could catch it, and the replay crashed with a stack trace (found by
 * fuzzing). Here a line over `maxBytes` is reported as overlong and its bytes are dropped as
 * they arrive, so memory stays bounded by the cap whatever the input.
 *
 * Line breaks are readline's with `crlfDelay: Infinity`: `\n`, `\r\n` and a lone `\r`. Bytes are
 * decoded as UTF-8 per line (a break byte never occurs inside a multi-byte sequence), invalid
 * sequences as U+FFFD. A last line without a break is a line; an input ending in a break has no
 * empty line after it.
 */

/** The default cap: far above any valid line of the inputs (a Mooncake line is a few KiB, a
 * recorded 100,000-block event ~4 MiB), far below V8's longest string. */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;

export interface RawLine {
  /** The line without its break; '' when overlong. */
  text: string;
  /** Its length in bytes, break excluded. */
  bytes: number;
  /** True when it was longer than the cap (its text is dropped). */
  overlong: boolean;
}

const LF = 0x0a;
const CR = 0x0d;

export async function* splitLines(chunks: AsyncIterable<Uint8Array | string>, maxBytes = MAX_LINE_BYTES): AsyncGenerator<RawLine> {
  let parts: Buffer[] = [];
  let bytes = 0;
  let overlong = false;
  let skipLf = false; // the previous chunk ended with '\r': a '\n' first in the next one belongs to it

  const append = (seg: Buffer, copy: boolean): void => {
    if (seg.length === 0) return;
    bytes += seg.length;
    if (overlong) return;
    if (bytes > maxBytes) {
      overlong = true;
      parts = [];
      return;
    }
    parts.push(copy ? Buffer.from(seg) : seg);
  };
  const finish = (): RawLine => {
    const text = overlong ? '' : parts.length === 0 ? '' : parts.length === 1 ? parts[0]!.toString('utf8') : Buffer.concat(parts).toString('utf8');
    const out = { text, bytes, overlong };
    parts = [];
    bytes = 0;
    overlong = false;
    return out;
  };

  for await (const chunk of chunks) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let start = 0;
    if (skipLf && buf.length > 0) {
      skipLf = false;
      if (buf[0] === LF) start = 1;
    }
    // Next break positions, each searched again only once passed: one native scan per chunk
    // for each byte value, however many lines the chunk holds.
    let lf = -2;
    let cr = -2;
    while (start < buf.length) {
      if (lf !== -1 && lf < start) lf = buf.indexOf(LF, start);
      if (cr !== -1 && cr < start) cr = buf.indexOf(CR, start);
      const end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      if (end === -1) {
        // The line goes on in the next chunk: keep a copy of its start (the chunk may be reused).
        append(buf.subarray(start), true);
        break;
      }
      append(buf.subarray(start, end), false);
      yield finish();
      if (buf[end] === CR) {
        if (end + 1 === buf.length) skipLf = true;
        else if (buf[end + 1] === LF) {
          start = end + 2;
          continue;
        }
      }
      start = end + 1;
    }
  }
  if (bytes > 0 || overlong) yield finish();
}
