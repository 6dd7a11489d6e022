/**
 * Lines of an input file, plain or gzip (detected by the magic bytes 1f 8b, whatever the name),
 * numbered from 1 like an editor does (blank lines count), with the raw bytes read so far for a
 * progress display.
 */
import { createReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { createGunzip } from 'node:zlib';

export interface LineSource {
  /** Path as given. */
  path: string;
  /** Size of the file in bytes (compressed size for gzip). */
  size: number;
  gzip: boolean;
  /** Bytes of the file read so far (read ahead of the lines handed out, by up to 256 KiB). */
  readonly bytesRead: number;
  /**
   * How far the lines handed out so far are into the file, 0..1: by their length for a plain
   * file (exact for ASCII), by the compressed bytes read for gzip.
   */
  readonly fraction: number;
  /** The lines, without their terminators; `limit` stops after that many lines. */
  lines(limit?: number): AsyncGenerator<{ text: string; line: number }>;
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
      const reader = createInterface({ input, crlfDelay: Infinity });
      let line = 0;
      try {
        for await (const text of reader) {
          if (++line > limit) break;
          consumed += text.length + 1;
          yield { text, line };
        }
      } finally {
        reader.close();
        raw.destroy();
        if (input !== raw) input.destroy();
      }
    },
  };
}
