/**
 * A gateway in this process over fake engines (fake-engine.ts), each its own HTTP server and
 * ZMQ publisher on free loopback ports, the gateway's fastify server on a free loopback port
 * too. `send` posts a generation request and returns the answer with its kvindex headers.
 */

import type { FastifyInstance } from 'fastify';
import { Gateway, type GatewayOptions } from '../../src/gateway/gateway.js';
import { gatewayPlugin } from '../../src/gateway/plugin.js';
import { quietFastify } from '../../src/serve/quiet-fastify.js';
import { FakeEngine, type FakeEngineOptions } from './fake-engine.js';
import { until } from './vllm-publisher.js';

export interface FleetOptions {
  engines: Array<FakeEngineOptions & { instanceId?: bigint; register?: boolean }>;
  gateway?: GatewayOptions;
  bodyLimit?: number;
}

export interface Answer {
  status: number;
  worker: string | null;
  dpRank: string | null;
  overlap: number;
  text: string;
  json: unknown;
  headers: Headers;
}

export class Fleet {
  readonly engines: FakeEngine[];
  readonly ids: bigint[];
  readonly gateway: Gateway;
  readonly app: FastifyInstance;
  url = '';

  private constructor(engines: FakeEngine[], ids: bigint[], gateway: Gateway, app: FastifyInstance) {
    this.engines = engines;
    this.ids = ids;
    this.gateway = gateway;
    this.app = app;
  }

  static async start(o: FleetOptions): Promise<Fleet> {
    const engines = await Promise.all(o.engines.map((e) => FakeEngine.start(e)));
    const ids = o.engines.map((e, i) => e.instanceId ?? BigInt(i + 1));
    // A 15 s health timeout: the fake engines share the test's process, so a host starved for
    // over the default 2 s made them look down and the first request got 503 no_engine (4 of 8
    // runs of gateway-routing at load 15-20). Tests of a slow /health set their own.
    const gateway = new Gateway({ healthIntervalMs: 200, healthTimeoutMs: 15_000, ...o.gateway });
    await gateway.start(
      engines.flatMap((e, i) => (o.engines[i]!.register === false ? [] : [{
        instanceId: ids[i]!, endpoint: e.endpoint, modelName: e.options.model, blockSize: e.options.blockSize,
        tenantId: 'default', dpRank: 0, replayEndpoint: null, url: e.url,
      }])),
    );
    const app = quietFastify();
    await gatewayPlugin(app, { gateway, ...(o.bodyLimit === undefined ? {} : { bodyLimit: o.bodyLimit }) });
    const fleet = new Fleet(engines, ids, gateway, app);
    fleet.url = await app.listen({ host: '127.0.0.1', port: 0 });
    for (const e of engines) await e.publisher?.subscribed();
    return fleet;
  }

  /** POSTs `body` to the gateway's `path` and reads the whole answer. */
  async send(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
    const res = await fetch(this.url + path, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
    return { status: res.status, worker: res.headers.get('x-kvindex-worker'), dpRank: res.headers.get('x-kvindex-dp-rank'), overlap: Number(res.headers.get('x-kvindex-overlap-blocks') ?? -1), text, json, headers: res.headers };
  }

  /** The fake engine of an instance id. */
  engineOf(worker: string | null): FakeEngine {
    const i = this.ids.findIndex((id) => id.toString() === worker);
    if (i < 0) throw new Error(`no engine ${worker}`);
    return this.engines[i]!;
  }

  /** Waits until the index of `model` gives `worker` `blocks` blocks of `tokens`. */
  async indexed(model: string, tokens: readonly number[], worker: bigint, blocks: number, loraName: string | null = null): Promise<void> {
    await until(() => {
      const ix = this.gateway.registry.index(model, 'default');
      return ix !== undefined && (ix.index.queryTokens(Uint32Array.from(tokens), { loraName }).scores.get(worker)?.get(0) ?? 0) >= blocks;
    }, 15_000, `${blocks} blocks indexed for ${worker}`);
  }

  /** The (model, worker)'s requests in flight as the router counts them. */
  inFlight(model: string, worker: bigint): number {
    return this.gateway.registry.router(model, 'default')?.sequences.load(worker, 0).activeRequests ?? 0;
  }

  async close(): Promise<void> {
    await this.app.close();
    await this.gateway.close();
    for (const e of this.engines) await e.stop().catch(() => undefined);
  }
}
