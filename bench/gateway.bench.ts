/**
 * `kvindex gateway` against calling the engines directly, everything in its own process on
 * loopback (gateway-procs.ts): 4 fake OpenAI engines (test/support/fake-engine.ts) and the
 * gateway from dist/, this process the client.
 *
 * - Added latency, open loop at 500 and 2,000 requests/s, token-id prompts of 512 tokens (no
 *   tokenization): the request leg (client send to the engine's arrival, both on the host's
 *   monotonic clock) and end to end, through the gateway against direct (round robin), p50 /
 *   p99 / p99.9 / max per round; rounds alternate.
 * - Streaming relay: 256 concurrent streams, SSE events per second received by the client.
 * - Memory per in-flight request: the gateway's heap and RSS (its /metrics) with 1,000 requests
 *   held by the engines, against idle.
 * - Cached-token fraction (usage.prompt_tokens_details.cached_tokens / prompt_tokens) on a
 *   multi-turn chat workload with small engine caches: the gateway against random, round
 *   robin, and the best engine in hindsight (each request sent to the engine caching most of
 *   it, asked of every engine first).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from 'undici';
import { client, histogramQuantiles, metric, post, startEngine, startGateway, stop, type EngineProc, type GatewayProc, type Posted } from './gateway-procs.js';
import { percentile, runIfMain, table, type SuiteOptions, type SuiteResult } from './suite.js';

const MODEL = 'bench';
const BLOCK = 16;

/** Sends `n` requests at `rate`/s on schedule (not waiting for answers). Shared with shared-loads.bench.ts. */
export async function openLoop(rate: number, n: number, send: (i: number) => Promise<void>): Promise<void> {
  const start = performance.now();
  const pending: Array<Promise<void>> = [];
  for (let i = 0; i < n; i++) {
    const wait = start + (i * 1000) / rate - performance.now();
    if (wait >= 1) await sleep(wait);
    pending.push(send(i));
  }
  await Promise.all(pending);
}

/** p50 / p99 / p99.9 / max of `us`, rounded to whole microseconds. */
export function stats(us: number[]): { p50: number; p99: number; p999: number; max: number } {
  const s = Float64Array.from(us).sort();
  const r = (x: number): number => Math.round(x);
  return { p50: r(percentile(s, 50)), p99: r(percentile(s, 99)), p999: r(percentile(s, 99.9)), max: r(s[s.length - 1]!) };
}

/** A 512-token prompt: one of 64 shared 256-token prefixes and a unique tail. */
function tokenPrompt(i: number): string {
  const p = i % 64;
  const tokens = Array.from({ length: 512 }, (_, k) => (k < 256 ? 1000 + p * 300 + k : 100_000 + ((i * 7919 + k) % 50_000)));
  return JSON.stringify({ model: MODEL, prompt: tokens, max_tokens: 1 });
}

/** A latency round's request legs and ends to end, microseconds, and its failed requests. */
export interface LatencyRound {
  leg: number[];
  e2e: number[];
  errors: number;
}

/**
 * One open-loop round: `n` requests at `rate`/s, request `i` sent by `send(i)`; each 200 gives
 * its request leg (client send to the engine's arrival, the host's monotonic clock) and its end
 * to end, an error or another status counts in `errors`. Shared with shared-loads.bench.ts.
 */
export async function latencyRound(rate: number, n: number, send: (i: number) => Promise<Posted>): Promise<LatencyRound> {
  const leg: number[] = [];
  const e2e: number[] = [];
  let errors = 0;
  await openLoop(rate, n, async (i) => {
    let r: Posted;
    try {
      r = await send(i);
    } catch {
      errors++;
      return;
    }
    if (r.status !== 200) {
      errors++;
      return;
    }
    leg.push(Number(r.arrivalNs - r.sentNs) / 1000);
    e2e.push(Number(r.endNs - r.sentNs) / 1000);
  });
  return { leg, e2e, errors };
}

/** A round of 512-token prompts, through the gateway (one pool) or direct (round robin over the engines). */
function viaRound(rate: number, n: number, pools: Pool[], via: 'gateway' | 'direct'): Promise<LatencyRound> {
  return latencyRound(rate, n, (i) => post(pools[via === 'gateway' ? 0 : i % pools.length]!, '/v1/completions', tokenPrompt(i)));
}

async function latencyRows(gw: Pool, direct: Pool[], quick: boolean): Promise<Array<Record<string, string | number>>> {
  const rows: Array<Record<string, string | number>> = [];
  for (const rate of [500, 2000]) {
    const n = rate * (quick ? 2 : 5);
    const rounds = quick ? 1 : 3;
    for (let round = 0; round < rounds; round++) {
      for (const via of ['direct', 'gateway'] as const) {
        const r = await viaRound(rate, n, via === 'gateway' ? [gw] : direct, via);
        const l = stats(r.leg);
        const e = stats(r.e2e);
        rows.push({ 'req/s': rate, round: round + 1, via, requests: r.leg.length, errors: r.errors, 'leg p50 us': l.p50, 'leg p99 us': l.p99, 'leg p99.9 us': l.p999, 'leg max us': l.max, 'e2e p50 us': e.p50, 'e2e p99 us': e.p99, 'e2e p99.9 us': e.p999, 'e2e max us': e.max });
      }
    }
  }
  return rows;
}

async function relayRow(pool: Pool, via: string, streams: number, tokens: number): Promise<Record<string, string | number>> {
  let events = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: streams }, async (_, i) => {
    const r = await pool.request({ method: 'POST', path: '/v1/completions', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, prompt: [i + 1, 2, 3], max_tokens: tokens, stream: true }) });
    let carry = '';
    for await (const chunk of r.body) {
      const text = carry + (chunk as Buffer).toString('utf8');
      const parts = text.split('\n\n');
      carry = parts.pop()!;
      events += parts.length;
    }
  }));
  const s = (performance.now() - t0) / 1000;
  return { via, streams, 'events': events, seconds: Math.round(s * 100) / 100, 'events/s': Math.round(events / s) };
}

async function memoryRow(gw: GatewayProc, n: number): Promise<Record<string, string | number>> {
  const pool = client(gw.url, n + 64);
  await sleep(1500);
  const heap0 = await metric(gw.metricsUrl, 'nodejs_heap_size_used_bytes');
  const rss0 = await metric(gw.metricsUrl, 'process_resident_memory_bytes');
  const held = Promise.all(Array.from({ length: n }, (_, i) => post(pool, '/v1/completions', tokenPrompt(i), { 'x-fake-ttft-ms': '8000' }).catch(() => null)));
  await sleep(4000);
  const heap1 = await metric(gw.metricsUrl, 'nodejs_heap_size_used_bytes');
  const rss1 = await metric(gw.metricsUrl, 'process_resident_memory_bytes');
  const inFlight = await metric(gw.metricsUrl, 'kvindex_route_active_requests{');
  await held;
  await pool.close();
  return { 'in flight (router)': inFlight, 'heap KiB/request': Math.round((heap1 - heap0) / inFlight / 102.4) / 10, 'RSS KiB/request': Math.round((rss1 - rss0) / inFlight / 102.4) / 10 };
}

/** Closed loop: `concurrency` requests always in flight for `ms`; answers per second. */
async function capacityRow(pools: Pool[], via: string, concurrency: number, ms: number): Promise<Record<string, string | number>> {
  let done = 0;
  const end = performance.now() + ms;
  await Promise.all(Array.from({ length: concurrency }, async (_, w) => {
    for (let i = w; performance.now() < end; i += concurrency) {
      await post(pools[i % pools.length]!, '/v1/completions', tokenPrompt(i));
      done++;
    }
  }));
  return { via, concurrency, 'answers/s': Math.round(done / (ms / 1000)) };
}

/** One request at a time, gateway and direct alternating: the added latency without queueing. */
async function sequentialRows(gw: Pool, direct: Pool[], n: number): Promise<Array<Record<string, string | number>>> {
  const lat = { gateway: { leg: [] as number[], e2e: [] as number[] }, direct: { leg: [] as number[], e2e: [] as number[] } };
  for (let i = 0; i < n; i++) {
    for (const via of ['direct', 'gateway'] as const) {
      const r = await post(via === 'gateway' ? gw : direct[i % direct.length]!, '/v1/completions', tokenPrompt(i));
      lat[via].leg.push(Number(r.arrivalNs - r.sentNs) / 1000);
      lat[via].e2e.push(Number(r.endNs - r.sentNs) / 1000);
    }
  }
  return (['direct', 'gateway'] as const).map((via) => {
    const l = stats(lat[via].leg);
    const e = stats(lat[via].e2e);
    return { via, requests: n, 'leg p50 us': l.p50, 'leg p99 us': l.p99, 'leg p99.9 us': l.p999, 'e2e p50 us': e.p50, 'e2e p99 us': e.p99, 'e2e p99.9 us': e.p999 };
  });
}

const WORDS = Array.from({ length: 4000 }, (_, i) => `t${i.toString(36)}`);
const words = (seed: number, n: number): string => Array.from({ length: n }, (_, k) => WORDS[(seed * 131 + k * 17) % WORDS.length]!).join(' ');

type Policy = 'kv gateway' | 'random' | 'round robin' | 'best in hindsight';

export async function cachedFraction(policy: Policy, gw: Pool, engines: Pool[], conversations: number, turns: number, label: string = policy): Promise<Record<string, string | number>> {
  // Each policy starts from empty caches.
  await Promise.all(engines.map((p) => post(p, '/reset', '{}')));
  await sleep(500); // the gateway's index sees the clears
  let prompt = 0;
  let cached = 0;
  let rr = 0;
  const served = new Array<number>(engines.length).fill(0);
  const talk = async (c: number): Promise<void> => {
    const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: words(1 + (c % 6), 250) }];
    for (let t = 0; t < turns; t++) {
      messages.push({ role: 'user', content: words(1000 + c * 10 + t, 60) });
      const body = JSON.stringify({ model: MODEL, messages, max_tokens: 32 });
      let pool: Pool;
      if (policy === 'kv gateway') pool = gw;
      else if (policy === 'random') pool = engines[Math.floor(Math.random() * engines.length)]!;
      else if (policy === 'round robin') pool = engines[rr++ % engines.length]!;
      else {
        const held = await Promise.all(engines.map(async (p) => (JSON.parse((await post(p, '/probe', body)).body) as { cached_tokens: number }).cached_tokens));
        let best = 0;
        for (let k = 1; k < engines.length; k++) if (held[k]! > held[best]! || (held[k] === held[best] && served[k]! < served[best]!)) best = k;
        served[best]!++;
        pool = engines[best]!;
      }
      const r = JSON.parse((await post(pool, '/v1/chat/completions', body)).body) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } }; choices: Array<{ message: { content: string } }> };
      prompt += r.usage.prompt_tokens;
      cached += r.usage.prompt_tokens_details.cached_tokens;
      messages.push({ role: 'assistant', content: r.choices[0]!.message.content });
    }
  };
  // 8 conversations at a time, each turn after the previous one's answer.
  for (let c = 0; c < conversations; c += 8) await Promise.all(Array.from({ length: Math.min(8, conversations - c) }, (_, k) => talk(c + k)));
  return { policy: label, 'prompt tokens': prompt, 'cached tokens': cached, 'cached fraction': Math.round((cached / prompt) * 1000) / 1000, 'stale engines': '' };
}

export async function run(opts: SuiteOptions): Promise<SuiteResult> {
  const engines: EngineProc[] = [];
  let gw: GatewayProc | null = null;
  let gw4: GatewayProc | null = null;
  try {
    for (let i = 0; i < 4; i++) engines.push(await startEngine({ model: MODEL, blockSize: BLOCK, cacheBlocks: 320 }));
    gw = await startGateway(engines, MODEL, BLOCK);
    await sleep(1000); // health polled, ZMQ subscribed
    const gwPool = client(gw.url);
    const direct = engines.map((e) => client(e.url, 64));
    // Warm-up: connections open, JIT warm.
    await viaRound(500, 500, [gwPool], 'gateway');
    await viaRound(500, 500, direct, 'direct');
    const sequential = await sequentialRows(gwPool, direct, opts.quick ? 500 : 2000);
    const capacity = [await capacityRow(direct, 'direct', 64, opts.quick ? 2000 : 4000), await capacityRow([gwPool], 'gateway', 64, opts.quick ? 2000 : 4000)];
    const latency = await latencyRows(gwPool, direct, opts.quick);
    // The gateway's own measure of arrival to upstream sent (tokenization excluded: none here).
    const [ovP50, ovP99, ovP999] = await histogramQuantiles(gw.metricsUrl, 'kvindex_gateway_overhead_ms', 'stage="to_upstream"', [0.5, 0.99, 0.999]);
    const [rtP50, rtP99] = await histogramQuantiles(gw.metricsUrl, 'kvindex_gateway_overhead_ms', 'stage="route"', [0.5, 0.99]);
    const relay = [];
    for (const [via, pool] of [['direct', null], ['gateway', gwPool]] as const) {
      if (pool === null) {
        // Direct: 64 streams on each of the 4 engines at once.
        const rows = await Promise.all(direct.map((p) => relayRow(p, 'direct', 64, opts.quick ? 100 : 400)));
        const events = rows.reduce((k, r) => k + (r.events as number), 0);
        const seconds = Math.max(...rows.map((r) => r.seconds as number));
        relay.push({ via, streams: 256, events, seconds, 'events/s': Math.round(events / seconds) });
      } else relay.push(await relayRow(pool, via, 256, opts.quick ? 100 : 400));
    }
    const memory = await memoryRow(gw, 1000);
    const conversations = opts.quick ? 24 : 48;
    const turns = opts.quick ? 4 : 6;
    const fractions = [];
    for (const policy of ['random', 'round robin', 'best in hindsight', 'kv gateway'] as const) fractions.push(await cachedFraction(policy, gwPool, direct, conversations, turns));
    // Engines the gateway took for stopped (routed by load only): 0 expected.
    fractions[3]!['stale engines'] = await metric(gw.metricsUrl, 'kvindex_gateway_events_stale_total');
    // A second gateway over the same engines with Dynamo's cost (--routing dynamo): its prefill
    // weight of 1 moves a conversation off its engine as soon as that engine holds another
    // request's blocks; the default (kv) weighs prefill 30 and keeps cached prefixes.
    gw4 = await startGateway(engines, MODEL, BLOCK, ['--routing', 'dynamo']);
    await sleep(1000);
    const gw4Pool = client(gw4.url);
    fractions.push(await cachedFraction('kv gateway', gw4Pool, direct, conversations, turns, 'gateway, --routing dynamo'));
    fractions[4]!['stale engines'] = await metric(gw4.metricsUrl, 'kvindex_gateway_events_stale_total');
    await gw4Pool.close();
    await gwPool.close();
    for (const p of direct) await p.close();
    const med = (rate: number, via: string, col: string): number => {
      const v = latency.filter((r) => r['req/s'] === rate && r.via === via).map((r) => r[col] as number).sort((a, b) => a - b);
      return v[Math.floor(v.length / 2)]!;
    };
    const added = [500, 2000].map((rate) => ({
      'req/s': rate,
      'added leg p50 us': med(rate, 'gateway', 'leg p50 us') - med(rate, 'direct', 'leg p50 us'),
      'added leg p99 us': med(rate, 'gateway', 'leg p99 us') - med(rate, 'direct', 'leg p99 us'),
      'added e2e p50 us': med(rate, 'gateway', 'e2e p50 us') - med(rate, 'direct', 'e2e p50 us'),
      'added e2e p99 us': med(rate, 'gateway', 'e2e p99 us') - med(rate, 'direct', 'e2e p99 us'),
    }));
    const kv = fractions[3]!['cached fraction'] as number;
    const kv4 = fractions[4]!['cached fraction'] as number;
    const best = fractions.find((f) => f.policy === 'best in hindsight')!['cached fraction'] as number;
    const gwRelay = relay.find((r) => r.via === 'gateway')!['events/s'] as number;
    const p99At2k = added[1]!['added leg p99 us'];
    const markdown = [
      'Token-id prompts (no tokenization), open loop; *leg* is the client\'s send to the engine\'s arrival, *e2e* the whole answer; 4 fake engines, the gateway and the client in their own processes on one host.',
      '',
      'One request at a time (no queueing), gateway and direct alternating:',
      '',
      table(sequential),
      '',
      'Closed loop, 64 requests always in flight (the most the host serves):',
      '',
      table(capacity),
      '',
      'Open loop (queueing once a process saturates):',
      '',
      table(latency),
      '',
      `Inside the gateway (its histogram, bucket upper bounds, every request so far: warm-up, one at a time and open loop): arrival to upstream sent p50 <= ${ovP50} ms, p99 <= ${ovP99} ms, p99.9 <= ${ovP999} ms; the decision (hash, lookup, select) p50 <= ${rtP50} ms, p99 <= ${rtP99} ms.`,
      '',
      'Added by the gateway (median over rounds of each percentile, gateway minus direct):',
      '',
      table(added),
      '',
      table(relay),
      '',
      table([memory]),
      '',
      table(fractions),
      '',
      `Targets: added p99 <= 1,000 us at 2,000 req/s: ${p99At2k <= 1000 ? 'met' : 'NOT met'} (${p99At2k} us); relay >= 50,000 events/s: ${gwRelay >= 50_000 ? 'met' : 'NOT met'} (${gwRelay}); cached fraction within 10 % of the best in hindsight: default cost (kv) ${kv >= best * 0.9 ? 'met' : 'NOT met'} (${kv} vs ${best}); --routing dynamo ${kv4 >= best * 0.9 ? 'within' : 'not within'} (${kv4}).`,
    ].join('\n');
    return { title: 'Gateway: added latency, relay, memory, cached tokens', markdown, rows: [...sequential, ...capacity, ...latency, ...added, ...relay, memory, ...fractions] };
  } finally {
    await stop([...engines, ...(gw === null ? [] : [gw]), ...(gw4 === null ? [] : [gw4])]);
  }
}

runIfMain(import.meta.url, run);
