/**
 * The sharded replay's lookups do not wait for the shards (readYourWrites: false): a stale
 * answer is told from a wrong one (src/cli/replay-stale.ts), and a wrong one still counts as a
 * mismatch. Real shard threads throughout (`npm run build` first: they run from dist/).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { StaleReads } from '../src/cli/replay-stale.js';
import { runReplay } from '../src/cli/replay-run.js';
import { ShardedIndexer } from '../src/index.js';
import type { RouterEvent } from '../src/index.js';

const W = 7n;
const OTHER = 8n;

function stored(workerId: bigint, eventId: bigint, first: number, n: number): RouterEvent {
  const blocks = Array.from({ length: n }, (_, i) => ({ blockHash: BigInt(1000 + first + i), tokensHash: BigInt(first + i + 1) }));
  const parentHash = first === 0 ? null : BigInt(1000 + first - 1);
  return { workerId, event: { eventId, data: { type: 'stored', parentHash, blocks } } };
}

describe('StaleReads with 2 shard threads that do not wait', () => {
  let ix: ShardedIndexer;
  beforeAll(async () => {
    ix = await ShardedIndexer.create({ shards: 2, blockSize: 16, readYourWrites: false, keepWarmMs: 0 });
  });
  afterAll(async () => {
    await ix.close();
  });
  afterEach(async () => {
    await ix.flush();
  });

  it('a lookup right after an event is early; once flushed it is fresh', async () => {
    const check = new StaleReads(ix);
    ix.applyEvent(stored(W, 0n, 0, 4)); // queued, not yet posted: the indexer is not idle
    check.sent(W);
    expect(check.fresh()).toBe(false);
    expect(check.early).toBe(1);
    await ix.flush();
    expect(check.fresh()).toBe(true);
    expect(check.early).toBe(1);
  });

  it('an early answer that is right once the shards caught up counts as stale, not wrong', async () => {
    const check = new StaleReads(ix);
    ix.applyEvent(stored(W, 1n, 4, 2));
    check.sent(W);
    const fresh = check.fresh();
    let asked = 0;
    const wrong = await check.wrong(fresh, [W], () => {
      asked++;
      expect(ix.idle).toBe(true); // re-asked after the flush
      return 0;
    });
    expect({ wrong, asked, stale: check.stale }).toEqual({ wrong: false, asked: 1, stale: 1 });
  });

  it('an early answer still wrong after catching up is a mismatch', async () => {
    const check = new StaleReads(ix);
    ix.applyEvent(stored(W, 2n, 6, 1));
    check.sent(W);
    expect(await check.wrong(check.fresh(), [W], () => 1)).toBe(true);
    expect(check.stale).toBe(0);
  });

  it('a difference for a worker with no event in flight is a mismatch, without re-asking', async () => {
    const check = new StaleReads(ix);
    ix.applyEvent(stored(W, 3n, 7, 1));
    check.sent(W);
    let asked = 0;
    expect(await check.wrong(check.fresh(), [OTHER], () => (asked++, 0))).toBe(true);
    expect(asked).toBe(0);
  });

  it('a fresh answer that differs is a mismatch, without re-asking', async () => {
    const check = new StaleReads(ix);
    await ix.flush();
    const fresh = check.fresh();
    expect(fresh).toBe(true);
    let asked = 0;
    expect(await check.wrong(fresh, [W], () => (asked++, 0))).toBe(true);
    expect(asked).toBe(0);
  });
});

describe('replay of a workload through 2 shard threads that do not wait', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kvindex-stale-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const event = (id: number, first: number, n: number): string => {
    const blocks = Array.from({ length: n }, (_, i) => `{"block_hash":${1000 + first + i},"tokens_hash":${first + i + 1}}`).join(',');
    const parent = first === 0 ? 'null' : String(1000 + first - 1);
    return `{"op":"event","event":{"worker_id":7,"event":{"event_id":${id},"data":{"stored":{"parent_hash":${parent},"blocks":[${blocks}]}}}}}`;
  };
  const match = (n: number, expect: string): string => `{"op":"match","seq":[${Array.from({ length: n }, (_, i) => i + 1).join(',')}],"expect":${expect}}`;

  async function replay(lines: string[], readYourWrites: boolean) {
    const file = join(dir, `w${Math.random().toString(36).slice(2)}.jsonl`);
    writeFileSync(file, ['{"op":"meta","block_size":16}', ...lines].join('\n') + '\n');
    return runReplay({ file, shards: 2, readYourWrites, speed: Infinity, strict: false, limit: Infinity, sim: {} });
  }

  it('counts a right expect right, whether the lookup came early or not', async () => {
    const lines: string[] = [];
    for (let i = 0; i < 40; i++) lines.push(event(i, 4 * i, 4), match(4 * i + 4, `{"7":${4 * i + 4}}`));
    const s = await replay(lines, false);
    expect(s).toMatchObject({ requests: 40, mismatches: 0, readYourWrites: false });
    expect(s.staleLookups).toBeLessThanOrEqual(s.lookupsEarly!);
  });

  it('counts a wrong expect as a mismatch, early or not, never as stale', async () => {
    const lines: string[] = [];
    // Each match follows its event at once (early), and expects one block more than stored.
    for (let i = 0; i < 10; i++) lines.push(event(i, 4 * i, 4), match(4 * i + 5, `{"7":${4 * i + 5}}`));
    const s = await replay(lines, false);
    expect(s).toMatchObject({ requests: 10, mismatches: 10, staleLookups: 0 });
    const waited = await replay(lines, true);
    expect(waited).toMatchObject({ requests: 10, mismatches: 10, readYourWrites: true, staleLookups: null, lookupsEarly: null });
  });
});
