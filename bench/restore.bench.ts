/**
 * Restore to ready (issue 40: a snapshot of 16.4M pairs restored and answering in <= 5 s).
 * A fleet of 1,000 engines x 16,384 resident blocks written straight as a bincode snapshot (as
 * a kvindex dump lays it out: per engine one event down a shared system prompt (32 prompts of
 * 256 blocks) into its first session, then 7 more sessions branching from the prompt's last
 * block; 2,016 private blocks each), then restored into a fresh indexer, shards 0 and 2, by:
 * - `restore(iterateSnapshot(bytes))`: the path before (a `bigint` pair and an object per block,
 *   split back into halves for the shard batches);
 * - `restoreSnapshot(bytes)`: src/indexer/snapshot-restore.ts (words straight from the bytes).
 * Ready = `create()` to the restore's flush plus one lookup of an engine's whole chain answered
 * with its full length. Also the decode alone (iterate the events, apply nothing).
 * `RESTORE_ENGINES` scales the fleet (default 1,000; --quick 32). Needs ~6 GB at 16.4M pairs:
 * run it as `flock /work/bigmem.lock npm run bench -- --only restore`.
 */
import { performance } from 'node:perf_hooks';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { createSnapshotWriter } from '../src/protocol/snapshot-writer.js';
import { iterateSnapshot } from '../src/protocol/snapshot-reader.js';
import { gc, runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

const BLOCKS = 16_384;
const PROMPTS = 32;
const PROMPT_BLOCKS = 256;
const SESSIONS = 8;
const PRIVATE = (BLOCKS - PROMPT_BLOCKS) / SESSIONS;

/** A u32 mix (murmur3's finaliser) of two u32s and a salt. */
function mix(a: number, b: number, salt: number): number {
  let h = Math.imul(a ^ Math.imul(b, 0x9e3779b1) ^ salt, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** The fleet's snapshot, and each engine's first session as tokens hashes (a full-match lookup). */
function fleetSnapshot(engines: number): { bytes: Uint8Array; pairs: number; probe: BigUint64Array } {
  const w = createSnapshotWriter('bincode', 64 + engines * (BLOCKS * 16 + SESSIONS * 64));
  let probe = new BigUint64Array(0);
  for (let e = 0; e < engines; e++) {
    const wLo = mix(e, 1, 0x1d);
    const wHi = mix(e, 2, 0x1d);
    const prompt = e % PROMPTS;
    const toks: Array<[number, number]> = [];
    let lastLo = 0;
    let lastHi = 0;
    for (let s = 0; s < SESSIONS; s++) {
      if (s === 0) w.beginStored(wLo, wHi, false, 0, 0);
      else w.beginStored(wLo, wHi, true, lastLo, lastHi);
      if (s === 0) {
        for (let i = 0; i < PROMPT_BLOCKS; i++) {
          const tLo = mix(prompt, i, 0x7a);
          const tHi = mix(prompt, i, 0x7b);
          toks.push([tLo, tHi]);
          lastLo = mix(e, i, 0x51);
          lastHi = mix(e, i, 0x52);
          w.block(lastLo, lastHi, tLo, tHi);
        }
      }
      for (let i = 0; i < PRIVATE; i++) {
        const k = PROMPT_BLOCKS + s * PRIVATE + i;
        const tLo = mix(e * SESSIONS + s, i, 0x3c);
        const tHi = mix(e * SESSIONS + s, i, 0x3d);
        if (s === 0) toks.push([tLo, tHi]);
        w.block(mix(e, k, 0x51), mix(e, k, 0x52), tLo, tHi);
      }
      w.endStored();
    }
    if (e === engines - 1) probe = BigUint64Array.from(toks, ([lo, hi]) => (BigInt(hi) << 32n) | BigInt(lo));
  }
  return { bytes: w.finishShared(), pairs: engines * BLOCKS, probe };
}

type Way = 'restore(iterateSnapshot) (before)' | 'restoreSnapshot (words)';

async function restoreOnce(bytes: Uint8Array, shards: number, way: Way, probe: BigUint64Array): Promise<{ ms: number; restoreMs: number }> {
  const t0 = performance.now();
  const ix = await ShardedIndexer.create({ shards, blockSize: 16 });
  try {
    const t1 = performance.now();
    if (way === 'restoreSnapshot (words)') await ix.restoreSnapshot(bytes);
    else await ix.restore(iterateSnapshot(bytes));
    const restoreMs = performance.now() - t1;
    const got = [...(await ix.findMatches(probe)).scores.values()];
    // The engine the probe came from matches it whole; the engines sharing its system prompt, that much.
    if (got.filter((x) => x === probe.length).length !== 1 || got.some((x) => x !== probe.length && x !== PROMPT_BLOCKS)) throw new Error(`after ${way}: lookup scored ${JSON.stringify(got)}, expected one worker at ${probe.length}, the others at ${PROMPT_BLOCKS}`);
    return { ms: performance.now() - t0, restoreMs };
  } finally {
    await ix.close();
  }
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const engines = opts.quick ? 32 : Number(process.env.RESTORE_ENGINES ?? 1000);
  const tg = performance.now();
  const { bytes, pairs, probe } = fleetSnapshot(engines);
  process.stderr.write(`restore: ${pairs} pairs, ${bytes.length} bytes generated in ${Math.round(performance.now() - tg)} ms\n`);
  const rows: Array<Record<string, string | number>> = [];
  gc();
  const td = performance.now();
  let blocks = 0;
  for (const e of iterateSnapshot(bytes)) if (e.event.data.type === 'stored') blocks += e.event.data.blocks.length;
  if (blocks !== pairs) throw new Error(`decoded ${blocks} of ${pairs}`);
  rows.push({ pairs, shards: '-', way: 'decode only: iterateSnapshot, events counted (bigints and objects per block)', 'create to ready ms': '-', 'spread ms': '-', 'restore ms': Math.round(performance.now() - td), 'target <= 5000 ms': '-' });
  const rounds = opts.quick ? 1 : Number(process.env.RESTORE_ROUNDS ?? 1);
  // RESTORE_WAYS=words skips the slow path before (50 s at 16.4M); RESTORE_SHARDS=0 or 2 one engine.
  const ways = (['restore(iterateSnapshot) (before)', 'restoreSnapshot (words)'] as Way[]).filter((w) => (process.env.RESTORE_WAYS ?? 'before,words').split(',').includes(w.startsWith('restoreSnapshot') ? 'words' : 'before'));
  for (const shards of (process.env.RESTORE_SHARDS ?? '0,2').split(',').map(Number)) {
    for (const way of ways) {
      const ms: number[] = [];
      const rs: number[] = [];
      for (let r = 0; r < rounds; r++) {
        gc();
        const x = await restoreOnce(bytes, shards, way, probe);
        ms.push(x.ms);
        rs.push(x.restoreMs);
        process.stderr.write(`restore: shards ${shards}, ${way}: ${Math.round(x.ms)} ms\n`);
      }
      const med = (v: number[]): number => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
      const spread = ms.length < 2 ? '-' : `${Math.round(Math.min(...ms))}-${Math.round(Math.max(...ms))}`;
      rows.push({ pairs, shards, way, 'create to ready ms': Math.round(med(ms)), 'spread ms': spread, 'restore ms': Math.round(med(rs)), 'target <= 5000 ms': med(ms) <= 5000 ? 'met' : 'missed' });
    }
  }
  return {
    title: 'Restore to ready (bincode snapshot, fresh indexer)',
    markdown:
      `A fleet of ${engines.toLocaleString('en-US')} engines x ${BLOCKS.toLocaleString('en-US')} blocks (${pairs.toLocaleString('en-US')} pairs; ${PROMPTS} shared system prompts of ${PROMPT_BLOCKS} blocks, ${SESSIONS} sessions of ${PRIVATE} private blocks per engine), ` +
      `one bincode snapshot of ${(bytes.length / 1e6).toFixed(1)} MB laid out as a kvindex dump. Ready: \`ShardedIndexer.create\` to the restore's flush and one full-chain lookup answered exactly; ${rounds} round(s) each, median.\n\n${table(rows)}`,
    rows,
  };
}

runIfMain(import.meta.url, run);
