import { describe, expect, it } from 'vitest';
import type { RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';

/**
 * Dumps of nodes held by many workers: the dump asks the pair index instead of walking a
 * worker list past a few steps (src/tree/dump.ts `LIST_STEPS`), so lists of every length, with
 * workers gone from their middle, must still dump every pair once, with its own hash.
 */
const PROMPT = 24;
const WORKERS = 40;

function sharedFleet(): RadixTree {
  const t = new RadixTree();
  const prompt = Array.from({ length: PROMPT }, (_, i) => ({ tokensHash: 0x1000n + BigInt(i), blockHash: 0n }));
  for (let w = 0; w < WORKERS; w++) {
    const worker = 0xfedc_ba98_0000_0000n + BigInt(w);
    // Each worker's own block hashes for the shared tokens (engines hash with their own salt).
    const blocks = prompt.map((b, i) => ({ tokensHash: b.tokensHash, blockHash: (BigInt(w + 1) << 32n) | BigInt(i + 1) }));
    t.applyEvent({ workerId: worker, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks } } });
    const tail = Array.from({ length: 3 }, (_, i) => ({ tokensHash: 0x9000n + BigInt(w * 8 + i), blockHash: (BigInt(w + 1) << 32n) | BigInt(100 + i) }));
    t.applyEvent({ workerId: worker, event: { eventId: 1n, data: { type: 'stored', parentHash: blocks[PROMPT - 1]!.blockHash, blocks: tail } } });
    // Every third worker drops the prompt's second half and its own blocks below it: the lists
    // there lose members in the middle (and no chain is left without its parent, which a dump
    // re-roots: the one inexact case, src/tree/dump.ts).
    if (w % 3 === 0) {
      const gone = [...blocks.slice(PROMPT / 2), ...tail].map((b) => b.blockHash);
      t.applyEvent({ workerId: worker, event: { eventId: 2n, data: { type: 'removed', blockHashes: gone } } });
    }
  }
  return t;
}

/** (worker, block hash, tokens hash) of every stored block of the events. */
function pairs(events: RouterEvent[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    if (e.event.data.type !== 'stored') continue;
    for (const b of e.event.data.blocks) out.push(`${e.workerId}:${b.blockHash}:${b.tokensHash}`);
  }
  return out.sort();
}

describe('RadixTree dump of nodes many workers share', () => {
  it('writes each pair once with the worker\'s own hash, and rebuilds the same tree', () => {
    const t = sharedFleet();
    const kept = WORKERS - Math.ceil(WORKERS / 3);
    expect(t.size).toBe(WORKERS * (PROMPT + 3) - Math.ceil(WORKERS / 3) * (PROMPT / 2 + 3));
    const events = t.dumpEvents();
    const got = pairs(events);
    expect(got.length).toBe(t.size);
    expect(new Set(got).size).toBe(got.length);
    for (let w = 0; w < WORKERS; w++) {
      const mine = got.filter((p) => p.startsWith(`${0xfedc_ba98_0000_0000n + BigInt(w)}:`));
      expect(mine.length).toBe(w % 3 === 0 ? PROMPT / 2 : PROMPT + 3);
      expect(mine).toContain(`${0xfedc_ba98_0000_0000n + BigInt(w)}:${(BigInt(w + 1) << 32n) | 5n}:${0x1000n + 4n}`);
    }
    // Replayed in order into a fresh tree: the same pairs.
    const back = new RadixTree();
    for (const e of events) expect(back.applyEvent(e)).toBe('ok');
    expect(pairs(back.dumpEvents())).toEqual(got);
    // The whole prompt is still held by the workers that kept it.
    const seq = BigUint64Array.from({ length: PROMPT }, (_, i) => 0x1000n + BigInt(i));
    const full = [...back.findMatches(seq).scores.values()].filter((s) => s === PROMPT).length;
    expect(full).toBe(kept);
  });
});
