/**
 * Lines of an input file, plain or gzip (detected by the magic bytes 1f 8b, whatever the name),
 * numbered from 1 like an editor does (blank lines count), with the raw bytes read so far for a
 * progress display. Lines are split with a length cap (line-splitter.ts): a longer one comes
 * out as `{ text: '', overlong: bytes }` for the caller to count as bad. A UTF-8 byte order
 * mark opening the file is dropped (editors on Windows write one; it made line 1 a bad line).
 */
import { createReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { createGunzip } from 'node:zlib';
import { ErrorCode, KvIndexError } from '../errors.js';
import { MAX_LINE_BYTES, splitLines } from './line-splitter.js';

/** One line handed out: `overlong` (its length in bytes) is set, and `text` empty, past the cap. */
export interface SourceLine {
  text: string;
  line: number;
  overlong?: number;
}

/** The bad-line reason of an overlong line. */
export function overlongReason(bytes: number): string {
  return `line of ${bytes} bytes, longer than the ${MAX_LINE_BYTES}-byte limit`;
}

export interface LineSource {
  /** Path as given. */
  path: string;
  /** Size of the file in bytes (compressed size for gzip). */
  size: number;
  gzip: boolean;
  /** Bytes of the file read so far (read ahead of the lines handed out, by up to 256 KiB). */
  readonly bytesRead: number;
  /**
   * How far the lines handed out so far are into the file, 0..1: by their bytes for a plain
   * file, by the compressed bytes read for gzip.
   */
  readonly fraction: number;
  /**
   * The lines, without their terminators; `limit` stops after that many lines. A gzip stream
   * that turns out corrupt rejects with `KvIndexError` `KVX_CORRUPT_INPUT` (corruptInput()).
   */
  lines(limit?: number): AsyncGenerator<SourceLine>;
}

/** True when the file starts with the gzip magic bytes. */
export async function isGzipFile(path: string): Promise<boolean> {
  const fh = await open(path, 'r');
  try {
    const head = Buffer.alloc(2);
    const { bytesRead } = await fh.read(head, 0, 2, 0);
    return bytesRead === 2 && head[0] === 0x1f && head[1] === 0x8b;
  } finally {
    await fh.close();
  }
}

/** Opens `path` for line reading. Rejects (ENOENT, EISDIR, ...) when it cannot be read. */
export async function openLineSource(path: string): Promise<LineSource> {
  const info = await stat(path);
  if (info.isDirectory()) {
    throw Object.assign(new Error(`${path} is a directory`), { code: 'EISDIR' });
  }
  const gzip = await isGzipFile(path);
  let bytesRead = 0;
  let consumed = 0;
  return {
    path,
    size: info.size,
    gzip,
    get bytesRead() {
      return bytesRead;
    },
    get fraction() {
      if (info.size === 0) return 1;
      return Math.min(1, (gzip ? bytesRead : consumed) / info.size);
    },
    async *lines(limit = Infinity) {
      const raw = createReadStream(path, { highWaterMark: 256 * 1024 });
      raw.on('data', (chunk) => {
        bytesRead += chunk.length;
      });
      const input = gzip ? raw.pipe(createGunzip()) : raw;
      if (gzip) raw.on('error', (err) => input.destroy(err));
      let line = 0;
      try {
        for await (const l of splitLines(input as AsyncIterable<Uint8Array>)) {
          if (++line > limit) break;
          consumed += l.bytes + 1;
          if (l.overlong) {
            yield { text: '', line, overlong: l.bytes };
            continue;
          }
          yield { text: line === 1 && l.text.charCodeAt(0) === 0xfeff ? l.text.slice(1) : l.text, line };
        }
      } catch (err) {
        throw gzip && isZlibError(err) ? corruptInput(path, Math.min(line, limit), err) : err;
      } finally {
        raw.destroy();
        if (input !== raw) input.destroy();
      }
    },
  };
}

/** zlib's stream errors carry codes `Z_DATA_ERROR`, `Z_BUF_ERROR`, ...; I/O errors do not. */
function isZlibError(err: unknown): err is Error & { code: string } {
  const code = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('Z_');
}

/**
 * The typed error for a gzip stream that failed after `line` lines were handed out. zlib says
 * only "unexpected end of file" or "incorrect header check"; this names the file, the line and
 * what those mean. Lines decoded in the same zlib call as the failure are never handed out (its
 * output is dropped with the error: up to one 16 KiB output chunk, 33 lines of the shipped trace
 * slice with garbage appended), so the last lines before it may be missing too: that is why the
 * message says "after line N", not "at". Bytes after a complete member that are not
 * another member (trailing garbage) are refused too: Node's zlib reads them as the next member
 * (GNU gzip warns and ignores them), and nothing tells them from a member corrupted at its
 * first byte.
 */
export function corruptInput(path: string, line: number, err: Error & { code: string }): KvIndexError {
  const what = err.code === 'Z_BUF_ERROR'
    ? 'gzip data ends early (truncated file)'
    : err.message === 'incorrect header check'
      ? 'bytes that are not gzip data (a corrupt member header, or garbage after the last member)'
      : 'corrupt gzip data';
  return new KvIndexError(ErrorCode.CorruptInput, `${path}: ${what} after line ${line} (zlib ${err.code}: ${err.message})`);
}
