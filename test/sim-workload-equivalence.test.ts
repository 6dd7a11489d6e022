/**
 * The cluster simulation follows the model of the shared workloads' generator closely enough to
 * reproduce its output: same lookups, same expected scores, same events byte for byte (worker
 * ids taken from the workload's meta line, 6 blocks per trace block as the generator used).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import { ClusterSim } from '../src/trace/cluster-sim.js';
import { readTraceFile } from '../src/trace/mooncake.js';
import { readWorkload, type WorkloadOp } from '../src/trace/workload.js';
import { RadixTree } from '../src/tree/radix-tree.js';

const SHARED = fileURLToPath(new URL('../../shared/', import.meta.url));
const TRACE = `${SHARED}traces/synthetic_trace.jsonl`;
const WORKLOAD = `${SHARED}workloads/synthetic.jsonl.gz`;
const present = existsSync(TRACE) && existsSync(WORKLOAD);
if (!present) console.warn(`skipping sim-workload-equivalence: ${SHARED} (the shared traces and workloads) is missing`);

const REQUESTS = 400;

describe.skipIf(!present)('ClusterSim against the shared workload generator', () => {
  it(`reproduces the first ${REQUESTS} requests of synthetic.jsonl.gz exactly`, async () => {
    const { requests } = await readTraceFile(TRACE, REQUESTS);
    const ops: WorkloadOp[] = [];
    // The workload has at most 3 lines per request after the meta line.
    for await (const op of readWorkload(WORKLOAD, 1 + 3 * REQUESTS)) ops.push(op);
    const meta = ops[0]!;
    if (meta.op !== 'meta') throw new Error('workload does not start with meta');
    const workerIds = (meta.meta['workers'] as string[]).map((w) => BigInt(w));
    const sim = new ClusterSim({ workerIds, subBlocks: Number(meta.meta['sub_blocks_per_hash_id']), blockSize: Number(meta.meta['block_size']) });
    const tree = new RadixTree();

    let at = 1;
    for (const req of requests) {
      const match = ops[at++]!;
      if (match.op !== 'match') throw new Error(`expected a match op for trace line ${req.line}`);
      const prepared = sim.prepare(req);
      expect(prepared.local).toEqual(match.seq);
      // The oracle's `expect` lists every worker holding a prefix: check the models against it.
      for (let w = 0; w < workerIds.length; w++) {
        const model = sim.cache(w).match(new Uint32Array(prepared.seq.buffer), prepared.seq.length);
        expect(model).toBe(match.expect.get(workerIds[w]!) ?? 0);
      }
      const served = sim.serve(prepared, tree.findMatches(prepared.local).scores);
      expect(served.mismatches).toBe(0);
      const want: string[] = [];
      while (at < ops.length && ops[at]!.op === 'event') {
        const op = ops[at++]!;
        if (op.op === 'event') want.push(op.text);
      }
      const got = served.events.map((e) => formatRouterEvent(e));
      expect(got).toEqual(want);
      for (const e of served.events) tree.applyEvent(e);
    }
  });
});
