import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main as fleetMain } from '../src/cli/fleet.js';
import { runReplay } from '../src/cli/replay-run.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { RadixTree } from '../src/tree/radix-tree.js';
import { FleetWorkload } from '../src/trace/fleet-workload.js';
import { writeFleetWorkload } from '../src/trace/fleet-writer.js';
import { readTraceFile, type TraceRequest } from '../src/trace/mooncake.js';
import { parseWorkloadLine } from '../src/trace/workload.js';

const ENGINES = 20;
const BLOCKS = 256;
const OPTIONS = { engines: ENGINES, blocksPerEngine: BLOCKS, subBlocks: 2, lookups: 200 };

let requests: TraceRequest[];
let dir: string;

async function generate(seed: bigint): Promise<{ text: string; stats: Awaited<ReturnType<typeof writeFleetWorkload>> }> {
  const chunks: Buffer[] = [];
  const out = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk);
      done();
    },
  });
  const stats = await writeFleetWorkload(requests, out, { ...OPTIONS, seed, source: 'head' });
  return { text: Buffer.concat(chunks).toString('utf8'), stats };
}

const key = (w: bigint, h: bigint): string => `${w}:${h}`;

beforeAll(async () => {
  requests = (await readTraceFile(new URL('../data/conversation_trace_head.jsonl', import.meta.url).pathname)).requests;
  dir = mkdtempSync(join(tmpdir(), 'kvx-fleet-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('fleet workload', () => {
  it('is byte-identical for one seed and differs for another', async () => {
    const a = await generate(7n);
    const b = await generate(7n);
    const c = await generate(8n);
    expect(a.text.length).toBeGreaterThan(100_000);
    expect(b.text).toBe(a.text);
    expect(c.text).not.toBe(a.text);
  });

  it('fills every engine to its capacity, never over it, with blocks shared across engines', async () => {
    const { text, stats } = await generate(1n);
    const held = new Map<bigint, Set<bigint>>();
    let peak = 0;
    let evictions = 0;
    const lines = text.split('\n').filter((l) => l.length > 0);
    for (let i = 0; i < lines.length; i++) {
      const op = parseWorkloadLine(lines[i]!, i + 1);
      if (op.op !== 'event') continue;
      const { workerId, event } = op.event as RouterEvent;
      const set = held.get(workerId) ?? new Set<bigint>();
      held.set(workerId, set);
      if (event.data.type === 'stored') {
        // A Stored event extends what the engine holds: its parent is held, its blocks are new.
        if (event.data.parentHash !== null) expect(set.has(event.data.parentHash)).toBe(true);
        for (const b of event.data.blocks) {
          expect(set.has(b.blockHash)).toBe(false);
          set.add(b.blockHash);
        }
      } else if (event.data.type === 'removed') {
        evictions += event.data.blockHashes.length;
        for (const h of event.data.blockHashes) expect(set.delete(h)).toBe(true);
      }
      peak = Math.max(peak, set.size);
    }
    expect(peak).toBe(BLOCKS);
    expect(held.size).toBe(ENGINES);
    for (const set of held.values()) expect(set.size).toBe(BLOCKS);
    expect(stats.pairs).toBe(ENGINES * BLOCKS);
    expect(stats.fullEngines).toBe(ENGINES);
    expect(evictions).toBe(stats.removedBlocks);
    expect(evictions).toBeGreaterThan(0); // engines that filled first kept serving and evicted
    // Sharing: count the engines holding each block; the system prompt is on every engine.
    const holders = new Map<bigint, number>();
    for (const set of held.values()) for (const h of set) holders.set(h, (holders.get(h) ?? 0) + 1);
    const max = Math.max(...holders.values());
    expect(max).toBe(ENGINES);
    expect(holders.size).toBeLessThan(ENGINES * BLOCKS); // fewer distinct blocks than pairs
  });

  it('replays into an indexer holding exactly the generator\'s resident sets, every expected score right', async () => {
    const { text } = await generate(3n);
    const tree = new RadixTree();
    const lines = text.split('\n').filter((l) => l.length > 0);
    let matches = 0;
    for (let i = 0; i < lines.length; i++) {
      const op = parseWorkloadLine(lines[i]!, i + 1);
      if (op.op === 'event') {
        expect(tree.applyEvent(op.event)).toBe('ok');
      } else if (op.op === 'match') {
        matches++;
        const scores = tree.findMatches(op.seq).scores;
        expect(new Map([...scores].filter(([, s]) => s > 0))).toEqual(op.expect);
      }
    }
    expect(matches).toBe(200);
    // The generator's own caches (same seed, driven to the end) against the indexer's dump.
    const fleet = new FleetWorkload(requests, { ...OPTIONS, seed: 3n });
    while (fleet.step({ removed() {}, stored() {} }));
    const want = new Set<string>();
    fleet.config.workerIds.forEach((w, e) => fleet.cache(e).forEach((lo, hi) => want.add(key(w, (BigInt(hi) << 32n) | BigInt(lo)))));
    const got = new Set<string>();
    for (const ev of tree.dumpEvents()) {
      if (ev.event.data.type === 'stored') for (const b of ev.event.data.blocks) got.add(key(ev.workerId, b.blockHash));
    }
    expect(want.size).toBe(ENGINES * BLOCKS);
    expect(got).toEqual(want);
  });

  it('runs through kvindex replay with no mismatch', async () => {
    const { text } = await generate(5n);
    const file = join(dir, 'fleet.jsonl');
    writeFileSync(file, text);
    const summary = await runReplay({ file, shards: 0, speed: Infinity, sim: {}, strict: false, limit: Infinity });
    expect(summary.mismatches).toBe(0);
    expect(summary.requests).toBe(200);
    expect(summary.pairs).toBe(ENGINES * BLOCKS);
  });

  it('kvindex fleet writes the workload to a file and refuses bad flags with exit 2', async () => {
    const file = join(dir, 'cli.jsonl');
    expect(await fleetMain(['--engines', '4', '--blocks', '64', '--lookups', '3', '--seed', '2', '--quiet', '--out', file])).toBe(0);
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(parseWorkloadLine(lines[0]!, 1)).toMatchObject({ op: 'meta' });
    expect(lines.filter((l) => l.startsWith('{"op":"match"'))).toHaveLength(3);
    expect(await fleetMain(['--engines', '0', '--out', file])).toBe(2);
    expect(await fleetMain(['--engines', '4'])).toBe(2); // no --out
    expect(await fleetMain(['--seed', '-1', '--out', file])).toBe(2);
  });
});
