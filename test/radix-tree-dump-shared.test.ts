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

  it('dumps every child of a node that the sessions of 100 workers continue (grouped by worker past 64 edges)', () => {
    const t = new RadixTree();
    const prompt = Array.from({ length: 4 }, (_, i) => ({ tokensHash: 0x2000n + BigInt(i), blockHash: 0n }));
    for (let w = 0; w < 100; w++) {
      const worker = 0xfedc_ba98_0000_0000n + BigInt(w);
      const mine = prompt.map((b, i) => ({ tokensHash: b.tokensHash, blockHash: (BigInt(w + 1) << 32n) | BigInt(i + 1) }));
      t.applyEvent({ workerId: worker, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: mine } } });
      // Two sessions of its own and one of three shared ones, all below the prompt's last block.
      for (let s = 0; s < 3; s++) {
        const tok = (i: number): bigint => (s === 2 ? 0x3000n + BigInt((w % 3) * 8 + i) : 0x4000_0000n + BigInt(w * 64 + s * 8 + i));
        const blocks = Array.from({ length: 2 }, (_, i) => ({ tokensHash: tok(i), blockHash: (BigInt(w + 1) << 32n) | BigInt(100 + s * 8 + i) }));
        t.applyEvent({ workerId: worker, event: { eventId: 1n + BigInt(s), data: { type: 'stored', parentHash: mine[3]!.blockHash, blocks } } });
      }
    }
    expect(t.size).toBe(100 * (4 + 3 * 2));
    const events = t.dumpEvents();
    const got = pairs(events);
    expect(got.length).toBe(t.size);
    expect(new Set(got).size).toBe(got.length);
    // Each worker: its prompt chain, then each session as a chain whose parent is its own hash
    // of the prompt's last block.
    for (const e of events) {
      if (e.event.data.type !== 'stored' || e.event.data.parentHash === null) continue;
      const w = e.workerId - 0xfedc_ba98_0000_0000n;
      expect(e.event.data.parentHash).toBe(((w + 1n) << 32n) | 4n);
    }
    const back = new RadixTree();
    for (const e of events) expect(back.applyEvent(e)).toBe('ok');
    expect(pairs(back.dumpEvents())).toEqual(got);
  });
});
