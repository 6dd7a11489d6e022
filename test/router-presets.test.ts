/**
 * The named routing costs: `kv` keeps a request where its prefix is cached when that engine is
 * busy decoding, where Dynamo's cost (`dynamo`) moves it to an idle engine; the gateway CLI takes
 * them by name and refuses others.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { KvRouter, RadixTree, ROUTING_PRESET_NAMES, ROUTING_PRESETS, seededRandom, storedBlocks, type RoutingPresetName } from '../src/index.js';
import { MAIN } from './support/serve-process.js';

const A = 1n;
const B = 2n;
const prompt = (n: number, from = 1): Uint32Array => Uint32Array.from({ length: n * 16 }, (_, i) => i + from);

/** Where a 5-block prompt goes when A holds its first 4 blocks and decodes an 8-block request. */
function choice(preset: RoutingPresetName): bigint {
  const tree = new RadixTree();
  tree.applyEvent({ workerId: A, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: storedBlocks(prompt(4), 16) } } });
  const router = new KvRouter({ ...ROUTING_PRESETS[preset], indexer: tree, blockSize: 16, workers: [{ workerId: A, dpRank: 0 }, { workerId: B, dpRank: 0 }], random: seededRandom(1) });
  router.route(prompt(8, 100_000), { requestId: 'busy', candidates: [{ workerId: A, dpRank: 0 }] });
  router.markPrefillCompleted('busy');
  return router.route(prompt(5), { requestId: 'next' }).workerId;
}

describe('routing presets', () => {
  it('kv keeps a cached prefix on a decoding engine; dynamo moves it to the idle one', () => {
    expect(choice('kv')).toBe(A);
    expect(choice('dynamo')).toBe(B);
  });

  it('dynamo is every selector default: an empty preset', () => {
    expect(ROUTING_PRESETS.dynamo).toEqual({});
    expect(Object.isFrozen(ROUTING_PRESETS.kv)).toBe(true);
  });

  it.skipIf(!existsSync(MAIN))('kvindex gateway --routing refuses an unknown name with exit 2', () => {
    const r = spawnSync(process.execPath, [MAIN, 'gateway', '--http', '0', '--routing', 'fastest'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("--routing: expected kv or dynamo or kv-time, got 'fastest'");
    // The usage under the error names every accepted preset (it said <kv|dynamo> after kv-time was added).
    expect(r.stderr).toContain(`--routing <${ROUTING_PRESET_NAMES.join('|')}>`);
    for (const name of ROUTING_PRESET_NAMES) expect(r.stderr).toMatch(new RegExp(`\\b${name}\\b \\(`));
  });
});
