/**
 * Node id allocation (node-store.ts `freeBits`): a free id is reused before a new one is made,
 * the id after the parent's is preferred, then one within the next 256, then the next free id
 * from where the last search ended; ids never repeat among live nodes, through growth.
 */
import { describe, expect, it } from 'vitest';
import { NodeStore, NONE, ROOT, type NodeId, type WorkerSlot } from '../src/tree/node-store.js';
import { LOCAL_STORE } from '../src/tree/array-store.js';

const W = 0 as WorkerSlot;
const alloc = (s: NodeStore, parent: number): number => s.allocUnlinked(parent as NodeId, 1, 2, W, 3, 4);

describe('node id allocation', () => {
  it('makes new ids in order while none is free', () => {
    const s = new NodeStore(LOCAL_STORE, 4);
    expect([alloc(s, ROOT), alloc(s, 1), alloc(s, 2), alloc(s, 3), alloc(s, 4)]).toEqual([1, 2, 3, 4, 5]);
    expect(s.nodeTop).toBe(6);
  });

  it('takes the id after the parent when it is free, else one near it, before any other free id', () => {
    const s = new NodeStore(LOCAL_STORE, 8);
    for (let i = 0; i < 600; i++) alloc(s, ROOT); // ids 1..600
    for (const id of [10, 101, 105, 500]) s.freeNodeId(id as NodeId);
    expect(alloc(s, 100)).toBe(101); // right after the parent
    expect(alloc(s, 100)).toBe(105); // 101 taken: the nearest free id after it
    expect(alloc(s, 400)).toBe(500); // within 256 ids of 401
    s.freeNodeId(300 as NodeId);
    s.freeNodeId(400 as NodeId);
    // Nothing free within 256 ids after 551: next-fit, from the bitmap's start the first time.
    expect(alloc(s, 550)).toBe(10);
    expect(alloc(s, 550)).toBe(300);
    s.freeNodeId(20 as NodeId);
    expect(alloc(s, 550)).toBe(400); // on from where the last search ended, not back to 20
    expect(alloc(s, 550)).toBe(20); // then around
    expect(s.nodeTop).toBe(601);
    expect(alloc(s, 1)).toBe(601); // none free: a new id
  });

  it('clears a freed node (no worker, no parent) and never hands out a live id, through growth', () => {
    const s = new NodeStore(LOCAL_STORE, 2);
    let x = 12345;
    const rand = (n: number): number => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return (x >>> 0) % n;
    };
    const live: number[] = [];
    const liveSet = new Set<number>();
    for (let step = 0; step < 20_000; step++) {
      if (live.length > 0 && rand(100) < 45) {
        const k = rand(live.length);
        const id = live[k]!;
        live[k] = live[live.length - 1]!;
        live.pop();
        liveSet.delete(id);
        s.freeNodeId(id as NodeId);
        expect([s.parent[id], s.w0(id)]).toEqual([NONE, NONE]);
      } else {
        const parent = live.length > 0 && rand(2) === 0 ? live[rand(live.length)]! : ROOT;
        const topBefore = s.nodeTop;
        const freeBefore = topBefore - 1 - liveSet.size;
        const id = alloc(s, parent);
        expect(liveSet.has(id)).toBe(false);
        expect(id).toBeGreaterThan(0);
        // A new id only when none was free.
        expect(s.nodeTop).toBe(freeBefore > 0 ? topBefore : topBefore + 1);
        expect(s.parent[id]).toBe(parent);
        live.push(id);
        liveSet.add(id);
      }
    }
    expect(s.liveNodes).toBe(live.length + 1);
    expect(s.nodeTop).toBeGreaterThan(1000); // grew many times from 2
  });
});
