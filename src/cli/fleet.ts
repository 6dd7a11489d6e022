/**
 * `kvindex fleet [trace] --out <file>`: writes a fleet workload (src/trace/fleet-workload.ts):
 * N engines of B blocks each, filled from a Mooncake trace's prefix structure until every
 * engine is full, as replay workload lines (`kvindex replay <file>` runs it and checks the
 * scores). Streams its output: memory is the engines' cache models (~100 bytes per pair), not
 * the events.
 */
import { createWriteStream } from 'node:fs';
import { basename } from 'node:path';
import { finished } from 'node:stream/promises';
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { createGzip } from 'node:zlib';
import { KvIndexError } from '../errors.js';
import { readTraceFile } from '../trace/mooncake.js';
import { writeFleetWorkload } from '../trace/fleet-writer.js';
import { defaultTraceFile } from './replay-options.js';
import { UsageError } from './usage.js';

export const FLEET_USAGE = `usage: kvindex fleet [trace] --out <file> [options]

Writes a fleet workload: N engines, each with a KV cache of B blocks, fed by requests drawn
from a Mooncake trace's prefix structure (shared system prompts stay shared, every copy of the
trace brings its own multi-turn sessions), routed session-affine (a session stays on its
engine, a new one goes round robin to an engine that is not full), each engine evicting LRU
leaf blocks when full, until every engine is full. Then lookups of the final state with every
engine's expected score. Deterministic by seed. Output: the replay workload format
(docs/replay.md); run it with 'kvindex replay <file>'. Without a trace, uses the shipped slice
(data/conversation_trace_head.jsonl).

  --out FILE          output file ('-': stdout; a name ending in .gz is gzip-compressed)
  --engines N         engines (default 1000)
  --blocks N          KV capacity of each engine, in blocks (default 16384)
  --sub-blocks N      blocks per 512-token trace block (default 8: 64-token blocks)
  --seed N            u64 seed (default 1)
  --lookups N         lookups of the final state written at the end (default 1000)
  --streams N         copies of the trace served side by side (default 8)
  --shared-fraction X trace ids in at least this fraction of requests are shared prompts (default 0.01)
  --quiet             no summary on stderr
  --help              this text
`;

function int(name: string, text: string | undefined, min: number, max: number): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) throw new UsageError(`--${name}: expected an integer in ${min}..${max}, got '${text}'`);
  return n;
}

export async function main(args: string[]): Promise<number> {
  let values;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        out: { type: 'string' },
        engines: { type: 'string' },
        blocks: { type: 'string' },
        'sub-blocks': { type: 'string' },
        seed: { type: 'string' },
        lookups: { type: 'string' },
        streams: { type: 'string' },
        'shared-fraction': { type: 'string' },
        quiet: { type: 'boolean' },
        help: { type: 'boolean' },
      },
    }));
    if (values.help === true) {
      process.stdout.write(FLEET_USAGE);
      return 0;
    }
    if (values.out === undefined) throw new UsageError('--out: required');
    if (positionals.length > 1) throw new UsageError(`one trace file expected, got ${positionals.length}`);
    if (values.seed !== undefined && !/^[0-9]{1,20}$/.test(values.seed)) throw new UsageError(`--seed: expected a u64, got '${values.seed}'`);
    if (values.seed !== undefined && BigInt(values.seed) >= 1n << 64n) throw new UsageError(`--seed: expected a u64, got '${values.seed}'`);
    const fraction = values['shared-fraction'] === undefined ? undefined : Number(values['shared-fraction']);
    if (fraction !== undefined && !(fraction > 0 && fraction <= 1)) throw new UsageError(`--shared-fraction: expected a number in (0, 1], got '${values['shared-fraction']}'`);
    const options = {
      engines: int('engines', values.engines, 1, 65_536),
      blocksPerEngine: int('blocks', values.blocks, 1, 2 ** 24),
      subBlocks: int('sub-blocks', values['sub-blocks'], 1, 512),
      seed: values.seed === undefined ? undefined : BigInt(values.seed),
      lookups: int('lookups', values.lookups, 0, 1_000_000),
      streams: int('streams', values.streams, 1, 4096),
      sharedFraction: fraction,
    };
    return await generate(positionals[0] ?? defaultTraceFile(), values.out, options, values.quiet === true);
  } catch (err) {
    if (err instanceof UsageError || (err instanceof TypeError && (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'))) {
      process.stderr.write(`kvindex fleet: ${err.message}\nrun 'kvindex fleet --help' for the options\n`);
      return 2;
    }
    if (err instanceof KvIndexError) {
      process.stderr.write(`kvindex fleet: [${err.code}] ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

type Defined<T> = { [K in keyof T]?: Exclude<T[K], undefined> };

async function generate(
  trace: string,
  out: string,
  raw: Record<string, number | bigint | undefined>,
  quiet: boolean,
): Promise<number> {
  const options: Defined<typeof raw> = {};
  for (const [k, v] of Object.entries(raw)) if (v !== undefined) options[k] = v;
  let requests;
  try {
    const file = await readTraceFile(trace);
    requests = file.requests;
    if (file.bad.length > 0 && !quiet) process.stderr.write(`kvindex fleet: ${file.bad.length} bad trace lines skipped (first: line ${file.bad[0]!.line}: ${file.bad[0]!.reason})\n`);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT' || e.code === 'EISDIR' || e.code === 'EACCES') throw new UsageError(`cannot read '${trace}': ${e.message}`);
    throw err;
  }
  const file: Writable = out === '-' ? process.stdout : createWriteStream(out);
  let sink: Writable = file;
  if (out.endsWith('.gz')) {
    sink = createGzip({ level: 1 });
    sink.pipe(file);
  }
  const t0 = performance.now();
  const stats = await writeFleetWorkload(requests, sink, { ...options, source: basename(trace) });
  if (sink !== process.stdout) {
    sink.end();
    await finished(file);
  }
  if (!quiet) {
    const s = (performance.now() - t0) / 1000;
    const hit = stats.requestBlocks === 0 ? 0 : stats.hitBlocks / stats.requestBlocks;
    process.stderr.write(
      `kvindex fleet: ${stats.pairs} pairs on ${stats.fullEngines} full engines; ${stats.requests} requests in ${stats.sessions} sessions ` +
        `(${stats.copies} trace copies), ${stats.storedBlocks} blocks stored, ${stats.removedBlocks} evicted, hit rate ${(hit * 100).toFixed(1)} %; ${s.toFixed(1)} s\n`,
    );
  }
  return 0;
}
