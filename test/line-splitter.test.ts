/**
 * The capped line splitter (src/trace/line-splitter.ts) against Node's readline, the splitter
 * it replaced, on random inputs cut into random chunks (breaks and multi-byte characters split
 * across chunks), and the cap: an overlong line is reported with its length, without its text,
 * and the lines around it are intact.
 */
import { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { splitLines, type RawLine } from '../src/trace/line-splitter.js';
import { seededRandom } from '../src/router/random.js';

async function viaSplitter(chunks: Buffer[], max?: number): Promise<RawLine[]> {
  const out: RawLine[] = [];
  for await (const l of splitLines(Readable.from(chunks), max)) out.push(l);
  return out;
}

async function viaReadline(chunks: Buffer[]): Promise<string[]> {
  const out: string[] = [];
  for await (const l of createInterface({ input: Readable.from(chunks), crlfDelay: Infinity })) out.push(l);
  return out;
}

function cut(bytes: Buffer, rnd: () => number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length;) {
    const n = 1 + Math.floor(rnd() * 12);
    chunks.push(bytes.subarray(at, at + n));
    at += n;
  }
  return chunks;
}

describe('splitLines', () => {
  it('gives the lines readline gives, however the bytes are chunked', async () => {
    const rnd = seededRandom(7);
    const pieces = ['a', 'bc', '\n', '\r', '\r\n', '', 'é', '€', '😀', '{"x":1}', ' '];
    for (let round = 0; round < 300; round++) {
      let text = '';
      const n = Math.floor(rnd() * 30);
      for (let i = 0; i < n; i++) text += pieces[Math.floor(rnd() * pieces.length)]!;
      const bytes = Buffer.from(text, 'utf8');
      const got = await viaSplitter(cut(bytes, rnd));
      expect(got.map((l) => l.text), JSON.stringify(text)).toEqual(await viaReadline([bytes]));
      expect(got.every((l) => !l.overlong && l.bytes === Buffer.byteLength(l.text))).toBe(true);
    }
  });

  it('reports a line over the cap with its length and no text, keeping the lines around it', async () => {
    const long = 'x'.repeat(1000);
    const bytes = Buffer.from(`first\n${long}\r\nlast`, 'utf8');
    const got = await viaSplitter(cut(bytes, seededRandom(3)), 100);
    expect(got).toEqual([
      { text: 'first', bytes: 5, overlong: false },
      { text: '', bytes: 1000, overlong: true },
      { text: 'last', bytes: 4, overlong: false },
    ]);
    // A final line over the cap, without a break, is reported too.
    expect(await viaSplitter([Buffer.from(long)], 100)).toEqual([{ text: '', bytes: 1000, overlong: true }]);
    // Exactly at the cap is not over it.
    expect(await viaSplitter([Buffer.from('y'.repeat(100))], 100)).toEqual([{ text: 'y'.repeat(100), bytes: 100, overlong: false }]);
  });
});
