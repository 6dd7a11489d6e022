/**
 * Events a source drops on purpose are logged, rate-limited, naming the engine: a real vLLM-style
 * publisher whose block size is not the registered one (the classic misconfiguration: registered
 * 16, the engine uses 32), a repeated hash, a sliding-window group. Each line carries the
 * instance id (exact u64), model, tenant, endpoint, rank and the count dropped since the previous
 * line of the same (rank, reason); between two lines drops are only counted.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { EngineRegistry } from '../src/http/engine-registry.js';
import { captureLog, type CapturedLog } from './support/log-capture.js';
import { until, VllmPublisher, zmqAvailable } from './support/vllm-publisher.js';

const W = 18_446_744_073_709_551_557n; // above 2^53: must be exact in the line
const INTERVAL = 2_000; // long enough that a burst on a loaded host lands within one interval
const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

/** A registry with a captured log, one publisher registered with block size 16. */
async function setup(): Promise<{ registry: EngineRegistry; pub: VllmPublisher; log: CapturedLog }> {
  const log = captureLog();
  const registry = new EngineRegistry({ logger: log.logger, dropLogIntervalMs: INTERVAL, replayTimeoutMs: 300 });
  open.push({ close: () => registry.close() });
  const pub = await VllmPublisher.start();
  open.push(pub);
  await registry.register({ instanceId: W, endpoint: pub.endpoint, modelName: 'llama', blockSize: 16, tenantId: 't1', dpRank: 0, replayEndpoint: null });
  await pub.subscribed();
  return { registry, pub, log };
}

const tokens = (n: number, salt: number): number[] => Array.from({ length: n }, (_, i) => salt + i);
/** A Stored event of one block of `bs` tokens, hash `h`. */
const store = (h: bigint, bs: number): { stored: { hashes: bigint[]; tokens: number[]; blockSize: number } } => ({ stored: { hashes: [h], tokens: tokens(bs, Number(h)), blockSize: bs } });

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!(await zmqAvailable()))('dropped engine events are logged', () => {
  it('a block size mismatch: one WARN at once naming the engine and both sizes, then one line per interval with the count', async () => {
    const { registry, pub, log } = await setup();
    const source = registry.listeners()[0]!.source;
    const lines = (): Array<Record<string, unknown>> => log.find("engine's block size");
    await pub.publish([store(1n, 32)]);
    await until(() => lines().length === 1, 10_000, 'the first line');
    expect(lines()[0]).toMatchObject({ level: 40, model: 'llama', tenant: 't1', endpoint: pub.endpoint, dpRank: 0, reason: 'block_size_mismatch', dropped: 1, blockSize: 32, registeredBlockSize: 16 });
    // The u64 id is written exactly (JSON.parse above rounds it; the raw text must not).
    expect(log.lines().find((l) => l.includes("engine's block size"))).toContain(`"instanceId":${W}`);
    // A burst: counted, not logged line by line.
    for (let i = 0; i < 5; i++) await pub.publish([store(10n + BigInt(i), 32), store(20n + BigInt(i), 32)]);
    await until(() => source.stats().blockSizeMismatch === 11, 10_000, 'the burst applied');
    expect(lines()).toHaveLength(1);
    // When the interval ends, one line reports the 10 drops since the first one.
    await until(() => lines().length === 2, 10_000, 'the interval line');
    expect(lines()[1]).toMatchObject({ level: 40, dropped: 10, blockSize: 32, registeredBlockSize: 16 });
    // Nothing more dropped: no more lines.
    await sleep(INTERVAL * 2);
    expect(lines()).toHaveLength(2);
    // The rank is reported as what it is: excluded, nothing of it can score.
    expect(source.health()).toEqual([expect.objectContaining({ rank: 0, state: 'excluded', reason: 'block_size_mismatch', engineBlockSize: 32 })]);
  });

  it('each reason has its own budget: a repeated hash is logged at once while block size drops are held back', async () => {
    const { registry, pub, log } = await setup();
    const source = registry.listeners()[0]!.source;
    await pub.publish([store(1n, 32)]);
    await pub.publish([store(2n, 32)]);
    await pub.publish([{ stored: { hashes: [5n, 5n], tokens: tokens(32, 0), blockSize: 16 } }]);
    await until(() => source.stats().duplicateHash === 1, 10_000, 'the duplicate');
    await until(() => log.find('repeats a block hash').length === 1, 10_000, 'the duplicate line');
    expect(log.find('repeats a block hash')[0]).toMatchObject({ level: 40, reason: 'duplicate_hash', dropped: 1, model: 'llama', dpRank: 0 });
    expect(log.find("engine's block size")).toHaveLength(1); // the second mismatch waits for the interval
  });

  it('a KV cache group that is not full attention is reported at INFO (expected on hybrid models), not WARN', async () => {
    const { registry, pub, log } = await setup();
    const source = registry.listeners()[0]!.source;
    await pub.publish([{ stored: { hashes: [9n], tokens: tokens(16, 0), blockSize: 16, kind: 'sliding_window', groupIdx: 1 } }, store(3n, 16)]);
    await until(() => source.stats().nonFullAttention === 1 && source.stats().events === 1, 10_000, 'the batch');
    await until(() => log.find('not full attention').length === 1, 10_000, 'the line');
    expect(log.find('not full attention')[0]).toMatchObject({ level: 30, reason: 'non_full_attention', dropped: 1, groupIdx: 1, kind: 'sliding_window' });
    expect(source.health()[0]).toMatchObject({ state: 'active' });
  });

  it('unregistering reports the drops not yet logged', async () => {
    const { registry, pub, log } = await setup();
    const source = registry.listeners()[0]!.source;
    await pub.publish([store(1n, 32)]);
    await pub.publish([store(2n, 32), store(3n, 32)]);
    await until(() => source.stats().blockSizeMismatch === 3, 10_000, 'three drops');
    expect(log.find("engine's block size")).toHaveLength(1);
    await registry.unregister({ instanceId: W, modelName: 'llama', tenantId: null, dpRank: null });
    expect(log.find("engine's block size").map((l) => l['dropped'])).toEqual([1, 2]);
  });
});
