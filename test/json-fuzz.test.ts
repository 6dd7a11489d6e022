/**
 * Seeded fuzz tests of the JSON codec against an independent oracle.
 *
 * The oracle decides validity with `JSON.parse` on the original text, then reads the values
 * from a second `JSON.parse` of the text in which every integer token was turned into a marked
 * string (so nothing is rounded), and applies serde's rules for RouterEvent by hand. Duplicate
 * keys are the one known difference: `JSON.parse` keeps the last one, we reject known ones.
 */

import { describe, expect, it } from 'vitest';
import { ErrorCode, KvIndexError } from '../src/errors.js';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import { parseRouterEvent } from '../src/protocol/json-parse.js';
import type { KvCacheEvent, KvCacheEventData, RouterEvent, StoredBlock } from '../src/protocol/types.js';

const U64_MAX = 0xffff_ffff_ffff_ffffn;

/** mulberry32. */
class Rng {
  private s: number;

  constructor(seed: number) {
    this.s = seed >>> 0;
  }

  u32(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  int(n: number): number {
    return this.u32() % n;
  }

  chance(p: number): boolean {
    return this.u32() / 2 ** 32 < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

const EDGES = [0n, 1n, 9n, 10n, 0xffff_ffffn, 0x1_0000_0000n, 999_999_999_999_999n, 10n ** 15n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 10n ** 19n - 1n, 10n ** 19n, U64_MAX - 1n, U64_MAX];

function randomU64(rng: Rng): bigint {
  const r = rng.int(10);
  if (r === 0) return rng.pick(EDGES);
  if (r === 1) return BigInt(rng.int(1000));
  const v = (BigInt(rng.u32()) << 32n) | BigInt(rng.u32());
  return r === 2 ? v >> BigInt(rng.int(64)) : v;
}

function randomEvent(rng: Rng): RouterEvent {
  let data: KvCacheEventData;
  const kind = rng.int(10);
  if (kind < 6) {
    const blocks: StoredBlock[] = [];
    for (let i = rng.int(9); i > 0; i--) blocks.push({ blockHash: randomU64(rng), tokensHash: randomU64(rng) });
    data = { type: 'stored', parentHash: rng.chance(0.4) ? null : randomU64(rng), blocks };
  } else if (kind < 9) {
    const blockHashes: bigint[] = [];
    for (let i = rng.int(9); i > 0; i--) blockHashes.push(randomU64(rng));
    data = { type: 'removed', blockHashes };
  } else {
    data = { type: 'cleared' };
  }
  const eventId = randomU64(rng);
  const event: KvCacheEvent = rng.chance(0.5) ? { eventId, data } : { eventId, data, dpRank: rng.chance(0.5) ? rng.int(8) : rng.u32() };
  return { workerId: randomU64(rng), event };
}

// --- A second, independent writer: a JSON tree printed with random whitespace, key order,
// unknown keys and escaped key characters. ---

type Node =
  | { kind: 'object'; entries: Array<[string, Node]>; closed: boolean }
  | { kind: 'array'; items: Node[] }
  | { kind: 'raw'; text: string };

const raw = (text: string): Node => ({ kind: 'raw', text });
/** `closed` objects get no random unknown keys (the externally tagged `data` object). */
const object = (entries: Array<[string, Node]>, closed = false): Node => ({ kind: 'object', entries, closed });

function toTree(e: RouterEvent, rng: Rng): Node {
  const d = e.event.data;
  let data: Node;
  if (d.type === 'stored') {
    const entries: Array<[string, Node]> = [];
    if (d.parentHash !== null || rng.chance(0.5)) entries.push(['parent_hash', raw(d.parentHash === null ? 'null' : String(d.parentHash))]);
    const blocks = d.blocks.map((b) => object([['block_hash', raw(String(b.blockHash))], ['tokens_hash', raw(String(b.tokensHash))]]));
    entries.push(['blocks', { kind: 'array', items: blocks }]);
    data = object([['stored', object(entries)]], true);
  } else if (d.type === 'removed') {
    data = object([['removed', object([['block_hashes', { kind: 'array', items: d.blockHashes.map((h) => raw(String(h))) }]])]], true);
  } else {
    data = rng.chance(0.8) ? raw('"cleared"') : object([['cleared', raw('null')]], true);
  }
  const inner: Array<[string, Node]> = [['event_id', raw(String(e.event.eventId))], ['data', data]];
  if (e.event.dpRank !== undefined) inner.push(['dp_rank', raw(String(e.event.dpRank))]);
  return object([['worker_id', raw(String(e.workerId))], ['event', object(inner)]]);
}

const STRING_BITS = ['a', 'Z', ' ', '\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t', '\\u00e9', '\\ud83d\\ude00', 'é', '😀', '{', '}', '[', ']', ',', ':'];

function randomJsonValue(rng: Rng, depth: number): Node {
  const r = rng.int(depth > 2 ? 4 : 6);
  if (r === 0) return raw(rng.pick(['0', '-1', '12345678901234567890123', '1.5', '-0.25e-3', '6E+2', '1e400']));
  if (r === 1) return raw(rng.pick(['true', 'false', 'null']));
  if (r === 2 || r === 3) {
    let s = '"';
    for (let i = rng.int(6); i > 0; i--) s += rng.pick(STRING_BITS);
    return raw(`${s}"`);
  }
  if (r === 4) {
    const items: Node[] = [];
    for (let i = rng.int(4); i > 0; i--) items.push(randomJsonValue(rng, depth + 1));
    return { kind: 'array', items };
  }
  const entries: Array<[string, Node]> = [];
  for (let i = rng.int(4); i > 0; i--) entries.push([`k${i}`, randomJsonValue(rng, depth + 1)]);
  return object(entries, true);
}

const UNKNOWN_KEYS = ['mm_extra_info', 'x', 'lora_id', 'token_ids', 'Worker_id', 'blocks_', 'data2', '_'];

function ws(rng: Rng): string {
  if (rng.chance(0.7)) return '';
  let s = '';
  for (let i = 1 + rng.int(3); i > 0; i--) s += rng.pick([' ', '\t', '\n', '\r']);
  return s;
}

function writeKey(key: string, rng: Rng): string {
  if (!rng.chance(0.1)) return `"${key}"`;
  const i = rng.int(key.length);
  return `"${key.slice(0, i)}\\u${key.charCodeAt(i).toString(16).padStart(4, '0')}${key.slice(i + 1)}"`;
}

function print(node: Node, rng: Rng): string {
  if (node.kind === 'raw') return node.text;
  if (node.kind === 'array') return `[${ws(rng)}${node.items.map((n) => print(n, rng)).join(`${ws(rng)},${ws(rng)}`)}${ws(rng)}]`;
  const entries = [...node.entries];
  if (!node.closed) {
    for (let i = rng.chance(0.3) ? 1 + rng.int(2) : 0; i > 0; i--) entries.push([rng.pick(UNKNOWN_KEYS), randomJsonValue(rng, 0)]);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
  }
  const body = entries.map(([k, v]) => `${ws(rng)}${writeKey(k, rng)}${ws(rng)}:${ws(rng)}${print(v, rng)}${ws(rng)}`).join(',');
  return `{${body}${entries.length === 0 ? ws(rng) : ''}}`;
}

// --- The oracle. ---

type Oracle = { ok: true; event: RouterEvent } | { ok: false; syntax: boolean };

const INT_MARK = '\u0000';

function oracleParse(text: string): Oracle {
  try {
    JSON.parse(text);
  } catch {
    return { ok: false, syntax: true };
  }
  const marked = text.replace(/"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g, (m) =>
    m.startsWith('"') || /[.eE]/.test(m) ? m : `"\\u0000${m}"`,
  );
  try {
    return { ok: true, event: oracleEvent(JSON.parse(marked)) };
  } catch {
    return { ok: false, syntax: false };
  }
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function has(o: Obj, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

function need(o: Obj, k: string): unknown {
  if (!has(o, k)) throw new Error(`missing ${k}`);
  return o[k];
}

function u64(v: unknown, max = U64_MAX): bigint {
  if (typeof v !== 'string' || !v.startsWith(INT_MARK) || v[1] === '-') throw new Error('not a u64');
  const n = BigInt(v.slice(1));
  if (n > max) throw new Error('out of range');
  return n;
}

function oracleEvent(root: unknown): RouterEvent {
  if (!isObj(root)) throw new Error('root');
  const workerId = u64(need(root, 'worker_id'));
  const ev = need(root, 'event');
  if (!isObj(ev)) throw new Error('event');
  const eventId = u64(need(ev, 'event_id'));
  const rawData = need(ev, 'data');
  let data: KvCacheEventData;
  if (typeof rawData === 'string') {
    if (rawData !== 'cleared') throw new Error('variant');
    data = { type: 'cleared' };
  } else if (isObj(rawData) && Object.keys(rawData).length === 1) {
    const [tag, payload] = Object.entries(rawData)[0]!;
    if (tag === 'cleared') {
      if (payload !== null) throw new Error('cleared payload');
      data = { type: 'cleared' };
    } else if (tag === 'stored') {
      if (!isObj(payload)) throw new Error('stored');
      const parent = has(payload, 'parent_hash') ? payload['parent_hash'] : null;
      const blocks = need(payload, 'blocks');
      if (!Array.isArray(blocks)) throw new Error('blocks');
      data = {
        type: 'stored',
        parentHash: parent === null ? null : u64(parent),
        blocks: blocks.map((b: unknown) => {
          if (!isObj(b)) throw new Error('block');
          return { blockHash: u64(need(b, 'block_hash')), tokensHash: u64(need(b, 'tokens_hash')) };
        }),
      };
    } else if (tag === 'removed') {
      if (!isObj(payload)) throw new Error('removed');
      const hashes = need(payload, 'block_hashes');
      if (!Array.isArray(hashes)) throw new Error('block_hashes');
      data = { type: 'removed', blockHashes: hashes.map((h: unknown) => u64(h)) };
    } else {
      throw new Error('variant');
    }
  } else {
    throw new Error('data');
  }
  const event: KvCacheEvent = has(ev, 'dp_rank') ? { eventId, data, dpRank: Number(u64(ev['dp_rank'], 0xffff_ffffn)) } : { eventId, data };
  return { workerId, event };
}

// --- Mutations. ---

const MUTATION_CHARS = ['{', '}', '[', ']', '"', ':', ',', '0', '1', '9', '-', '.', 'e', 'E', '+', ' ', '\n', '\\', 'u', 'n', 't', 'f', 'x', 'é', '\u2028', '\ud800', '\u0000'];

function mutate(text: string, rng: Rng): string {
  let s = text;
  for (let m = 1 + rng.int(3); m > 0 && s.length > 0; m--) {
    const at = rng.int(s.length);
    const op = rng.int(6);
    if (op === 0) s = s.slice(0, at);
    else if (op === 1) s = s.slice(0, at) + rng.pick(MUTATION_CHARS) + s.slice(at + 1);
    else if (op === 2) s = s.slice(0, at) + rng.pick(MUTATION_CHARS) + s.slice(at);
    else if (op === 3) s = s.slice(0, at) + s.slice(at + 1);
    else if (op === 4) {
      const len = 1 + rng.int(Math.min(30, s.length - at));
      const to = rng.int(s.length);
      s = s.slice(0, to) + s.slice(at, at + len) + s.slice(to);
    } else {
      s = s.slice(0, at) + String.fromCharCode(rng.int(128)) + s.slice(at + 1);
    }
  }
  return s;
}

function mutateBytes(bytes: Uint8Array, rng: Rng): Uint8Array {
  const out = Array.from(bytes);
  for (let m = 1 + rng.int(3); m > 0 && out.length > 0; m--) {
    const at = rng.int(out.length);
    const op = rng.int(4);
    if (op === 0) out.length = at;
    else if (op === 1) out[at] = rng.int(256);
    else if (op === 2) out.splice(at, 0, rng.int(256));
    else out.splice(at, 1);
  }
  return Uint8Array.from(out);
}

type Outcome = { ok: true; event: RouterEvent } | { ok: false; error: KvIndexError };

/** Parses, failing the test on anything but a KvIndexError. */
function attempt(input: string | Uint8Array): Outcome {
  try {
    return { ok: true, event: parseRouterEvent(input) };
  } catch (e) {
    if (!(e instanceof KvIndexError)) throw new Error(`non-KvIndexError for ${JSON.stringify(String(input))}: ${String(e)}`);
    return { ok: false, error: e };
  }
}

describe('JSON codec fuzz', () => {
  it('format -> parse is the identity on random events', () => {
    const rng = new Rng(1);
    for (let i = 0; i < 2000; i++) {
      const event = randomEvent(rng);
      const text = formatRouterEvent(event);
      expect(parseRouterEvent(text)).toStrictEqual(event);
      expect(parseRouterEvent(new TextEncoder().encode(text))).toStrictEqual(event);
      expect(oracleParse(text)).toStrictEqual({ ok: true, event });
    }
  });

  it('reads randomly spaced, reordered, extended and escaped texts like the compact form', () => {
    const rng = new Rng(2);
    for (let i = 0; i < 2000; i++) {
      const event = randomEvent(rng);
      const text = print(toTree(event, rng), rng);
      const parsed = parseRouterEvent(text);
      expect(parsed, text).toStrictEqual(event);
      expect(formatRouterEvent(parsed)).toBe(formatRouterEvent(event));
      expect(oracleParse(text)).toStrictEqual({ ok: true, event });
    }
  });

  it('mutated text either parses to what the oracle reads or throws a KvIndexError', () => {
    const rng = new Rng(3);
    const encoder = new TextEncoder();
    const counts = { ok: 0, json: 0, field: 0 };
    for (let i = 0; i < 4000; i++) {
      const event = randomEvent(rng);
      const base = rng.chance(0.5) ? formatRouterEvent(event) : print(toTree(event, rng), rng);
      const text = mutate(base, rng);
      const ours = attempt(text);
      // Bytes and string input behave the same.
      const fromBytes = attempt(encoder.encode(text));
      expect(fromBytes.ok, text).toBe(ours.ok);
      if (ours.ok && fromBytes.ok) expect(fromBytes.event).toStrictEqual(ours.event);
      if (!ours.ok && !fromBytes.ok) expect(fromBytes.error.code).toBe(ours.error.code);

      const oracle = oracleParse(text);
      if (ours.ok) {
        counts.ok++;
        expect(oracle, text).toStrictEqual({ ok: true, event: ours.event });
      } else if (ours.error.code === ErrorCode.InvalidJson) {
        counts.json++;
        expect(oracle, `${text}\n${ours.error.message}`).toStrictEqual({ ok: false, syntax: true });
      } else {
        counts.field++;
        expect(oracle.ok === false && oracle.syntax, `${text}\n${ours.error.message}`).toBe(false);
        // JSON.parse silently keeps the last of duplicate keys; we reject duplicate known fields.
        if (oracle.ok) expect(ours.error.message, text).toMatch(/duplicate field|more keys/);
      }
    }
    // The mutations reach every outcome.
    expect(counts.ok).toBeGreaterThan(100);
    expect(counts.json).toBeGreaterThan(1000);
    expect(counts.field).toBeGreaterThan(100);
  });

  it('mutated bytes (including invalid UTF-8) either parse or throw a KvIndexError', () => {
    const rng = new Rng(4);
    const encoder = new TextEncoder();
    const decoder = new TextDecoder();
    for (let i = 0; i < 3000; i++) {
      const event = randomEvent(rng);
      const base = encoder.encode(rng.chance(0.5) ? formatRouterEvent(event) : print(toTree(event, rng), rng));
      const bytes = mutateBytes(base, rng);
      const ours = attempt(bytes);
      if (ours.ok) {
        // Invalid UTF-8 can only have been inside a skipped string; decoding replaces it.
        const oracle = oracleParse(decoder.decode(bytes));
        if (oracle.ok) expect(oracle.event).toStrictEqual(ours.event);
        else expect(oracle.syntax).toBe(false);
      }
    }
  });
});
