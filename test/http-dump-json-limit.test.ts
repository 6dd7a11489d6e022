/**
 * GET /dump on a large index: Dynamo's JSON dump is refused before anything is built (507
 * `KVX_DUMP_TOO_LARGE`, naming the binary dump) once the index holds more pairs than one JSON
 * string can carry (at 16.8M pairs building it took the replica down); the binary dump still
 * answers, whole, and a smaller index still gets its JSON. The limit is lowered for the test.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { DUMP_BINARY_TYPE, readBinaryDump } from '../src/http/dump-binary.js';
import { EngineRegistry } from '../src/http/engine-registry.js';
import { registerIndexerRoutes } from '../src/http/indexer-routes.js';
import { RadixTree } from '../src/tree/radix-tree.js';

const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

async function server(jsonDumpMaxPairs: number): Promise<string> {
  const app: FastifyInstance = Fastify({ logger: false });
  const registry = new EngineRegistry({ replayTimeoutMs: 300 });
  // 3 workers x 40 blocks, loaded as a peer's binary dump would be.
  const tree = new RadixTree();
  for (const w of [1n, 2n ** 64n - 1n, 7n]) {
    tree.applyEvent({ workerId: w, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: Array.from({ length: 40 }, (_, i) => ({ blockHash: (w % 1000n) * 1000n + BigInt(i), tokensHash: BigInt(i + 1) })) } } });
  }
  registry.restoreIndexBincode('m', 'default', 4, [{ rank: 0, bytes: tree.dumpSnapshot('bincode'), blocks: tree.size }]);
  await registerIndexerRoutes(app, registry, { jsonDumpMaxPairs });
  await app.listen({ host: '127.0.0.1', port: 0 });
  open.push({ close: async () => { await registry.close(); await app.close(); } });
  return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
}

describe('GET /dump of an index too large for one JSON string', () => {
  it('answers 507 KVX_DUMP_TOO_LARGE for JSON, the binary dump whole, and JSON under the limit', async () => {
    const url = await server(100);
    const res = await fetch(`${url}/dump`);
    expect(res.status).toBe(507);
    const body = (await res.json()) as { error: string; code: string };
    expect(body.code).toBe('KVX_DUMP_TOO_LARGE');
    expect(body.error).toContain('120 pairs');
    expect(body.error).toContain(DUMP_BINARY_TYPE);
    const bin = await fetch(`${url}/dump`, { headers: { accept: DUMP_BINARY_TYPE } });
    expect(bin.status).toBe(200);
    const sections = readBinaryDump(new Uint8Array(await bin.arrayBuffer()));
    expect(sections[0]!.trees!.reduce((n, t) => n + t.blocks, 0)).toBe(120);

    const small = await server(120);
    const ok = await fetch(`${small}/dump`);
    expect(ok.status).toBe(200);
    expect(Object.keys((await ok.json()) as object)).toEqual(['m:default']);
  });
});
