/**
 * The JSON fast path (json-words.ts): on serde's canonical layout it writes the same batch words
 * as parsing then encoding; on any other text, valid or not, it declines and writes nothing;
 * and under random byte mutations it never accepts what the full parser rejects or reads to
 * another event.
 */
import { describe, expect, it } from 'vitest';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import { parseRouterEvent } from '../src/protocol/json-parse.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { EventBatchWriter } from '../src/shard/wire/event-batch.js';
import { JsonEventEncoder } from '../src/shard/wire/json-words.js';
import { generateStream } from './support/event-gen.js';

const encoder = new JsonEventEncoder();
const bytesOf = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Words of the fast path, or null when it declines (then it must have written nothing). */
function fast(text: Uint8Array): Uint32Array | null {
  const w = new EventBatchWriter(16);
  w.push(ev(7n, 'cleared')); // something before, which must stay as it is
  const before = w.words;
  const ok = encoder.encode(text, 0, text.length, w);
  if (!ok) {
    expect(w.words).toBe(before);
    expect(w.events).toBe(1);
    return null;
  }
  expect(w.events).toBe(2);
  return w.take().slice(before);
}

/** Words of the full parser plus the checked encoder, or null when the parser rejects. */
function slow(text: Uint8Array): Uint32Array | null {
  let e: RouterEvent;
  try {
    e = parseRouterEvent(text);
  } catch {
    return null;
  }
  const w = new EventBatchWriter(16);
  w.push(e);
  return w.take().slice();
}

function ev(workerId: bigint, type: 'cleared'): RouterEvent {
  return { workerId, event: { eventId: 1n, data: { type } } };
}

const events = generateStream(3, 2000).ops.flatMap((op) => (op.kind === 'event' ? [op.event] : []));

describe('JsonEventEncoder', () => {
  it('writes the words of parse + encode for every canonical event of a random stream', () => {
    const kinds = new Set<string>();
    for (const [i, e] of events.entries()) {
      const withDp = i % 3 === 0 ? { ...e, event: { ...e.event, dpRank: i } } : e;
      const text = bytesOf(formatRouterEvent(withDp));
      kinds.add(withDp.event.data.type);
      expect(fast(text)).toEqual(slow(text));
    }
    expect([...kinds].sort()).toEqual(['cleared', 'removed', 'stored']);
  });

  it('covers parent hashes, empty lists and u64 extremes', () => {
    const max = 0xffff_ffff_ffff_ffffn;
    const cases: RouterEvent[] = [
      { workerId: max, event: { eventId: max, data: { type: 'stored', parentHash: max, blocks: [{ blockHash: 0n, tokensHash: max }] } } },
      { workerId: 0n, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: [] } } },
      { workerId: 2n ** 53n + 1n, event: { eventId: 3n, data: { type: 'removed', blockHashes: [] } } },
      { workerId: 2n ** 53n + 1n, event: { eventId: 3n, dpRank: 0xffff_ffff, data: { type: 'removed', blockHashes: [1n, max] } } },
    ];
    for (const e of cases) {
      const text = bytesOf(formatRouterEvent(e));
      expect(fast(text)).not.toBeNull();
      expect(fast(text)).toEqual(slow(text));
    }
  });

  it('declines valid text in another layout, and invalid text', () => {
    const declined = [
      '{"worker_id":1, "event":{"event_id":1,"data":"cleared"}}', // whitespace
      '{"event":{"event_id":1,"data":"cleared"},"worker_id":1}', // key order
      '{"worker_id":1,"event":{"event_id":1,"data":"cleared"},"extra":[1]}', // unknown key
      '{"worker_id":1,"event":{"event_id":1,"data":{"cleared":null}}}', // other form of a unit variant
      '{"worker_id":1,"event":{"event_id":1,"data":"cleared"}} ', // trailing whitespace
      '{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[]}}}}', // parent_hash omitted
      '{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":1,"tokens_hash":2,"mm_extra_info":null}]}}}}',
      '{"worker_id":18446744073709551616,"event":{"event_id":1,"data":"cleared"}}', // 2^64
      '{"worker_id":-1,"event":{"event_id":1,"data":"cleared"}}',
      '{"worker_id":1.5,"event":{"event_id":1,"data":"cleared"}}',
      '{"worker_id":01,"event":{"event_id":1,"data":"cleared"}}',
      '{"worker_id":1,"event":{"event_id":1,"data":"cleared","dp_rank":4294967296}}',
      '{"worker_id":1,"event":{"event_id":1,"data":"cleared"}',
      '{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[1,]}}}}',
    ];
    for (const t of declined) {
      const text = bytesOf(t);
      expect(fast(text), t).toBeNull();
    }
    // The valid ones among them still parse: the fallback has the final word.
    expect(slow(bytesOf(declined[0]!))).not.toBeNull();
    expect(slow(bytesOf(declined[1]!))).not.toBeNull();
  });

  it('never accepts a mutation the full parser rejects or reads differently', () => {
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    const alphabet = bytesOf('0123456789{}[],:" nul-.e');
    let accepted = 0;
    for (let k = 0; k < 6000; k++) {
      const base = bytesOf(formatRouterEvent(events[k % events.length]!));
      const text = base.slice();
      const edits = 1 + rand(3);
      for (let j = 0; j < edits; j++) text[rand(text.length)] = alphabet[rand(alphabet.length)]!;
      const f = fast(text);
      if (f === null) continue;
      accepted++;
      expect(f).toEqual(slow(text));
    }
    expect(accepted).toBeGreaterThan(100); // digit edits keep many texts valid
  });
});
