/**
 * `/query` bodies (src/http/query-body.ts): the byte reader against what the route did before
 * it, `JSON.parse` of the UTF-8 text and then `readQuery`, on the bodies the ZMQ bench's client
 * sends (1,024 tokens) and on short ones (64 tokens). Time per body (tinybench, one pass reads
 * every body once) and the JS heap plus ArrayBuffer memory a body leaves behind (bytesLeftPerCall).
 * Both sides get the same bodies and the same answers (checked before timing).
 */
import { Bench } from 'tinybench';
import { QueryBodyReader } from '../src/http/query-body.js';
import { readQuery } from '../src/http/requests.js';
import { bytesLeftPerCall, table, type SuiteOptions, type SuiteResult } from './suite.js';

const sink = { value: 0 };

function bodiesOf(tokens: number): Buffer[] {
  return Array.from({ length: 64 }, (_, k) =>
    Buffer.from(JSON.stringify({ token_ids: Array.from({ length: tokens }, (_, j) => (j * 31 + k) % 128_000), model_name: 'm' })));
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const reader = new QueryBodyReader();
  const general = (b: Buffer): number => readQuery(JSON.parse(b.toString('utf8')) as unknown).tokenIds.length;
  const fast = (b: Buffer): number => reader.read(b)!.tokenIds.length;
  const rows: SuiteResult['rows'] = [];
  for (const tokens of [1024, 64]) {
    const bodies = bodiesOf(tokens);
    for (const b of bodies) {
      const want = readQuery(JSON.parse(b.toString('utf8')) as unknown);
      const got = reader.read(b);
      if (got === null || got.modelName !== want.modelName || got.tokenIds.join() !== want.tokenIds.join()) throw new Error('query-body bench: the reader disagrees with JSON.parse + readQuery');
    }
    const bench = new Bench({ name: `query-body-${tokens}`, time: opts.quick ? 200 : 1_500, warmupTime: opts.quick ? 50 : 300 });
    const tasks: Array<[string, (b: Buffer) => number]> = [['JSON.parse + readQuery (before)', general], ['QueryBodyReader', fast]];
    for (const [name, read] of tasks) {
      bench.add(name, () => {
        let n = 0;
        for (const b of bodies) n += read(b);
        sink.value += n;
      });
    }
    await bench.run();
    const p50 = new Map<string, number>();
    for (const task of bench.tasks) {
      if (task.result.state !== 'completed') throw new Error(`query-body bench ${task.name}: ${task.result.state}`);
      p50.set(task.name, task.result.latency.p50 / bodies.length);
    }
    const before = p50.get(tasks[0]![0])!;
    for (const [name, read] of tasks) {
      const ms = p50.get(name)!;
      rows.push({
        suite: 'query-body', reader: name, tokens, 'body bytes': bodies[0]!.length,
        'us per body (p50)': Math.round(ms * 1000 * 100) / 100,
        'speed vs before': `${Math.round((before / ms) * 100) / 100}x`,
        'bytes left per body': bytesLeftPerCall((i) => void (sink.value += read(bodies[i % bodies.length]!))),
      });
    }
  }
  const shown = rows.map(({ suite: _s, ...r }) => r);
  return {
    title: 'HTTP /query bodies',
    markdown: `The \`/query\` route reads the usual body shape from its bytes (src/http/query-body.ts) and leaves any other to ` +
      '`JSON.parse` + `readQuery`, its path before. Per body: time (median of passes over 64 bodies) and the JS heap plus ' +
      `ArrayBuffer bytes it leaves for the collector (median of 30 runs of 20 reads, each after a GC).\n\n${table(shown)}`,
    rows,
  };
}
