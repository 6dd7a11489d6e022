/** Command-line options of `kvindex replay`: parsing, checking, usage text. */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ClusterSimOptions } from '../trace/cluster-sim.js';
import { isPolicyName, POLICY_NAMES, REFERENCE_POLICY_NAMES, type PolicyName } from '../trace/policies/policy.js';
import type { ReplayRoutingOptions } from './replay-routing.js';

export const REPLAY_USAGE = `usage: kvindex replay [file] [options]

Replays a Mooncake request trace (simulating a fleet of workers that publishes KV events),
a recorded KV event stream (Dynamo recorder JSONL or RouterEvent JSONL), or a replay workload
(events plus lookups with expected scores) through the indexer, then prints a summary.
Plain or gzip input; the kind is told from the first valid line. Without a file, replays the
shipped slice of the Mooncake conversation trace (data/conversation_trace_head.jsonl).

simulation (traces only):
  --workers N         workers in the fleet (default 4)
  --cache-blocks N    KV cache per worker, in blocks (default 16384)
  --block-size N      tokens per block (default 64)
  --sub-blocks N      blocks per 512-token trace block (default and max: 512 / block size)
  --seed N            u64 seed of the synthetic tokens, worker ids and routing draws (default 0)
routing (traces only; the product's KvRouter decides):
  --temperature X     selector temperature, 0 = minimum cost (default 0)
  --credit X          overlap score credit per cached block, 0..1 (default 1)
timed replay (traces only; engines that take time, latency per routing policy; see
docs/replay-timed.md):
  --policy P          route with P: ${POLICY_NAMES.join(', ')}, or all
                      (selects the timed replay; default kv); or the reference
                      ${REFERENCE_POLICY_NAMES.join(', ')} (it reads the engines' state, which no router sees; not in all)
  --load X            rescale arrivals so the offered work is X times the fleet's capacity
                      (selects the timed replay; default: the trace's times, / --speed)
  --sweep X,Y,...     run each load in turn (selects the timed replay)
  --engine NAME       engine parameter set: dynamo-mocker (default), dynamo-mocker-decoders,
                      small-budget
  --engine-param K=V  override one engine parameter (repeatable), e.g. tokenBudget=4096
  --engine-file FILE  engine parameter overrides as a JSON object
  --event-delay MS    delay of the engines' KV events to the router (default 20)
  --skip N            skip the first N lines of the trace (another slice)
indexer and replay:
  --shards N          indexer shard threads, 0 = in-thread (default 0); with threads, lookups
                      read the latest applied state without waiting for the events in flight,
                      as a router under load does (readYourWrites: false)
  --read-your-writes  with --shards: lookups wait until the shards applied the events before
                      them (results then equal the in-thread run's, request for request)
  --speed X           honour input timestamps compressed X times (default: as fast as possible)
  --limit N           read at most N lines
  --record FILE       also write every applied event to FILE as Dynamo recorder JSONL
  --report FILE       also write a self-contained HTML report with charts (hit rate, latency,
                      events and occupancy over time) to FILE; in the timed replay: TTFT
                      per run, TTFT against throughput over a sweep, engine load over time
  --strict            stop with exit code 1 at the first bad line (or a score mismatch)
  --json              print one JSON object on stdout instead of the table
  -h, --help          show this help

exit codes: 0 ok, 1 bad input with --strict, a corrupt gzip input or a failure, 2 usage error
`;

export interface ReplayCliOptions {
  file: string;
  shards: number;
  /** With shards: lookups wait for the events sent before them (`--read-your-writes`). */
  readYourWrites: boolean;
  speed: number;
  strict: boolean;
  json: boolean;
  limit: number;
  /** Recorder JSONL output of the applied events, or null. */
  record: string | null;
  /** HTML report output, or null. */
  report: string | null;
  sim: ClusterSimOptions;
  routing: ReplayRoutingOptions;
  /** The timed replay's options, or null for the instant replay. */
  timed: TimedCliOptions | null;
}

/** Options of the timed replay (`--policy`, `--load`, `--sweep` select it). */
export interface TimedCliOptions {
  policies: PolicyName[];
  /** Loads to run in turn; null keeps the trace's times (divided by --speed). */
  loads: Array<number | null>;
  engine: string;
  /** `--engine-param` overrides, applied after `--engine-file`'s. */
  engineParams: Record<string, number>;
  engineFile: string | null;
  eventDelayMs: number;
  skip: number;
}

/** A command-line mistake: exit code 2 with this message. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The shipped trace slice, resolved from the package root (not the working directory). */
export function defaultTraceFile(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  // src/cli (sources run by tests) is two levels below the root, dist/src/cli three.
  const up = import.meta.url.endsWith('.ts') ? '../..' : '../../..';
  return resolve(here, up, 'data', 'conversation_trace_head.jsonl');
}

function integer(name: string, text: string | undefined, min: number, max: number): number | undefined {
  if (text === undefined) return undefined;
  const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new UsageError(`--${name}: expected an integer in ${min}..${max}, got '${text}'`);
  return n;
}

/** Parses `args` (after `replay`); returns null for --help. Throws UsageError. */
export function parseReplayArgs(args: string[]): ReplayCliOptions | null {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: {
        workers: { type: 'string' },
        'cache-blocks': { type: 'string' },
        'block-size': { type: 'string' },
        'sub-blocks': { type: 'string' },
        seed: { type: 'string' },
        temperature: { type: 'string' },
        credit: { type: 'string' },
        shards: { type: 'string' },
        'read-your-writes': { type: 'boolean' },
        speed: { type: 'string' },
        limit: { type: 'string' },
        record: { type: 'string' },
        report: { type: 'string' },
        strict: { type: 'boolean' },
        json: { type: 'boolean' },
        policy: { type: 'string' },
        load: { type: 'string' },
        sweep: { type: 'string' },
        engine: { type: 'string' },
        'engine-param': { type: 'string', multiple: true },
        'engine-file': { type: 'string' },
        'event-delay': { type: 'string' },
        skip: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const unknown = /Unknown option '([^']+)'/.exec(e.message);
    if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown !== null) throw new UsageError(`unknown option '${unknown[1]}'`);
    throw new UsageError(e.message);
  }
  const v = parsed.values;
  if (v.help === true) return null;
  if (parsed.positionals.length > 1) throw new UsageError(`expected one input file, got ${parsed.positionals.length}: ${parsed.positionals.join(' ')}`);

  const sim: ClusterSimOptions = {};
  const workers = integer('workers', v.workers, 1, 4096);
  if (workers !== undefined) sim.workers = workers;
  const cacheBlocks = integer('cache-blocks', v['cache-blocks'], 1, 2 ** 28);
  if (cacheBlocks !== undefined) sim.cacheBlocks = cacheBlocks;
  const blockSize = integer('block-size', v['block-size'], 1, 512);
  if (blockSize !== undefined) sim.blockSize = blockSize;
  const subBlocks = integer('sub-blocks', v['sub-blocks'], 1, 512);
  if (subBlocks !== undefined) {
    const max = Math.floor(512 / (blockSize ?? 64));
    if (subBlocks > max) throw new UsageError(`--sub-blocks: at most 512 / block size = ${max}, got ${subBlocks}`);
    sim.subBlocks = subBlocks;
  }
  if (v.seed !== undefined) {
    if (!/^[0-9]+$/.test(v.seed) || BigInt(v.seed) > 0xffff_ffff_ffff_ffffn) throw new UsageError(`--seed: expected a u64 integer, got '${v.seed}'`);
    sim.seed = BigInt(v.seed);
  }
  const routing: ReplayRoutingOptions = {};
  const real = (name: string, text: string | undefined, max: number): number | undefined => {
    if (text === undefined) return undefined;
    const x = /^[0-9]+(\.[0-9]+)?$/.test(text) ? Number(text) : NaN;
    if (!(x >= 0 && x <= max)) throw new UsageError(`--${name}: expected a number in 0..${max}, got '${text}'`);
    return x;
  };
  const temperature = real('temperature', v.temperature, 1e6);
  if (temperature !== undefined) routing.temperature = temperature;
  const credit = real('credit', v.credit, 1);
  if (credit !== undefined) routing.credit = credit;
  let speed = Infinity;
  if (v.speed !== undefined && v.speed !== 'max') {
    speed = Number(v.speed);
    if (!(Number.isFinite(speed) && speed > 0)) throw new UsageError(`--speed: expected a positive number or 'max', got '${v.speed}'`);
  }
  const shards = integer('shards', v.shards, 0, 64) ?? 0;
  const readYourWrites = v['read-your-writes'] === true;
  if (readYourWrites && shards === 0) throw new UsageError('--read-your-writes: only with --shards N (in-thread lookups always see every event)');
  const limit = integer('limit', v.limit, 1, Number.MAX_SAFE_INTEGER) ?? Infinity;
  return {
    file: parsed.positionals[0] ?? defaultTraceFile(),
    shards,
    readYourWrites,
    speed,
    strict: v.strict === true,
    json: v.json === true,
    limit,
    record: v.record ?? null,
    report: v.report ?? null,
    sim,
    routing,
    timed: parseTimed(v, speed),
  };
}

type Values = Record<string, string | boolean | string[] | undefined>;

/** The timed replay's options, or null when none of --policy, --load, --sweep is given. */
function parseTimed(v: Values, speed: number): TimedCliOptions | null {
  const str = (k: string): string | undefined => v[k] as string | undefined;
  const timedOnly = ['engine', 'engine-param', 'engine-file', 'event-delay', 'skip'];
  if (str('policy') === undefined && str('load') === undefined && str('sweep') === undefined) {
    const stray = timedOnly.find((k) => v[k] !== undefined);
    if (stray !== undefined) throw new UsageError(`--${stray}: only with the timed replay (--policy, --load or --sweep)`);
    return null;
  }
  for (const k of ['record', 'shards', 'read-your-writes', 'strict']) {
    if (v[k] !== undefined) throw new UsageError(`--${k}: not with the timed replay (--policy, --load or --sweep)`);
  }
  const policy = str('policy') ?? 'kv';
  let policies: PolicyName[];
  if (policy === 'all') policies = [...POLICY_NAMES];
  else if (isPolicyName(policy)) policies = [policy];
  else throw new UsageError(`--policy: expected one of ${[...POLICY_NAMES, ...REFERENCE_POLICY_NAMES].join(', ')} or all, got '${policy}'`);
  const fraction = (name: string, text: string): number => {
    const x = /^[0-9]+(\.[0-9]+)?$/.test(text) ? Number(text) : NaN;
    if (!(x > 0 && x <= 100)) throw new UsageError(`--${name}: expected a number in (0, 100], got '${text}'`);
    return x;
  };
  if (str('load') !== undefined && str('sweep') !== undefined) throw new UsageError('--load and --sweep: give one');
  let loads: Array<number | null> = [null];
  if (str('load') !== undefined) loads = [fraction('load', str('load')!)];
  if (str('sweep') !== undefined) loads = str('sweep')!.split(',').map((t) => fraction('sweep', t.trim()));
  if (loads[0] === null && speed !== Infinity && !(speed > 0)) throw new UsageError('--speed: expected a positive number');
  const engineParams: Record<string, number> = {};
  for (const kv of (v['engine-param'] as string[] | undefined) ?? []) {
    const m = /^([A-Za-z]+)=(-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?)$/.exec(kv);
    if (m === null) throw new UsageError(`--engine-param: expected NAME=NUMBER, got '${kv}'`);
    engineParams[m[1]!] = Number(m[2]);
  }
  const delayText = str('event-delay');
  let eventDelayMs = 20;
  if (delayText !== undefined) {
    eventDelayMs = /^[0-9]+(\.[0-9]+)?$/.test(delayText) ? Number(delayText) : NaN;
    if (!(eventDelayMs >= 0 && eventDelayMs <= 1e9)) throw new UsageError(`--event-delay: expected a number of ms in 0..1e9, got '${delayText}'`);
  }
  return {
    policies,
    loads,
    engine: str('engine') ?? 'dynamo-mocker',
    engineParams,
    engineFile: str('engine-file') ?? null,
    eventDelayMs,
    skip: integer('skip', str('skip'), 0, Number.MAX_SAFE_INTEGER) ?? 0,
  };
}
