/**
 * Start-up recovery of a standalone indexer replica from its peers (issue 38): before it
 * reports ready, a replica started with `--peers` takes from the first peer that answers its
 * `GET /dump` (the index, and in a kvindex dump the registrations with the engine seq each
 * reflects: responses.ts `dumpJson`), applies it, and starts a listener per registration at
 * that seq, so the first live message after it makes the engine's replay socket send exactly
 * what was missed (src/zmq/source.ts `resumeAfter`). Until then lookups answer 503
 * `KVX_RECOVERING` (indexer-routes.ts `gate`), never partial scores.
 *
 * Which failure means what:
 * - every peer refuses the connection (ECONNREFUSED) or is recovering too (503
 *   `KVX_RECOVERING`): there is no replica to recover from (the first one of a fleet, a fleet
 *   started together, or all restarted): start empty, as without peers, and say so;
 * - a peer answers badly, dies during the dump, or times out: try the next; when none is left,
 *   stay not ready and try them all again after a back-off (0.5 s doubling to 30 s), logging
 *   each round. A dump is parsed whole before anything is applied, so a replica is never ready
 *   with part of one.
 * - a dump without positions (a Dynamo peer's): applied, registrations taken from the peer's
 *   `/workers` where it names model and tenant, and every listener marked approximate (in the
 *   log and `/workers`): events between the dump and the subscription are lost.
 */

import type { Logger } from 'pino';
import { parseJsonLossless, type JsonValue } from '../protocol/json-value.js';
import { ErrorCode } from '../errors.js';
import { loadMsgpack, loadZeromq } from '../zmq/load.js';
import { DUMP_BINARY_TYPE, readBinaryDump } from './dump-binary.js';
import { readDump, type DumpSection } from './dump-read.js';
import type { EngineRegistry } from './engine-registry.js';
import { peerRoute, type PeerList } from './peer-list.js';
import { HttpRequestError } from './requests.js';

/** Where a replica's recovery stands. */
export const RecoveryState = {
  /** Not started from peers (none given): ready as before. */
  Off: 'off',
  /** Taking a dump: not ready, lookups answer 503. */
  Recovering: 'recovering',
  /** Applied a peer's dump. */
  Recovered: 'recovered',
  /** Every peer refused the connection: started empty. */
  Empty: 'empty',
  /** Stopped by shutdown before it finished. */
  Stopped: 'stopped',
} as const;

export type RecoveryState = (typeof RecoveryState)[keyof typeof RecoveryState];

export interface PeerRecoveryOptions {
  registry: EngineRegistry;
  peers: PeerList;
  logger?: Logger;
  /** First wait between rounds over the peers, ms (default 500; doubles up to `retryMaxMs`). */
  retryMinMs?: number;
  /** Longest wait between rounds, ms (default 30,000). */
  retryMaxMs?: number;
  /** Longest a peer may take to answer its whole dump, ms (default 120,000). */
  timeoutMs?: number;
  /**
   * The dump to ask for: 'binary' (default; dump-binary.ts, kvindex peers only: a Dynamo peer
   * answers JSON anyway) or 'json' (Dynamo's, what every peer answered before).
   */
  dump?: 'binary' | 'json';
}

/** A peer with nothing to give (refused the connection, or recovering too), as against one that failed. */
class Refused extends Error {}

export class PeerRecovery {
  readonly #o: PeerRecoveryOptions;
  #state: RecoveryState;
  #reason = '';
  #from: string | null = null;
  readonly #stop = new AbortController();
  #done: Promise<void> = Promise.resolve();

  constructor(o: PeerRecoveryOptions) {
    this.#o = o;
    this.#state = o.peers.size === 0 ? RecoveryState.Off : RecoveryState.Recovering;
    if (this.#state === RecoveryState.Recovering) this.#reason = 'recovering from peers: no dump applied yet';
  }

  get state(): RecoveryState {
    return this.#state;
  }

  /** The peer whose dump was applied, or null. */
  get recoveredFrom(): string | null {
    return this.#from;
  }

  /** Whether lookups may be answered (not recovering). */
  get ready(): boolean {
    return this.#state !== RecoveryState.Recovering;
  }

  /** Why not ready ('' when ready). */
  get reason(): string {
    return this.ready ? '' : this.#reason;
  }

  /** The answer of a gated route while recovering (indexer-routes.ts `gate`), else null. */
  gate(): HttpRequestError | null {
    return this.ready ? null : new HttpRequestError(`not ready: ${this.#reason}`, 503, ErrorCode.Recovering);
  }

  /** Starts the recovery in the background; `finished()` resolves when it ends. */
  start(): void {
    if (this.#state === RecoveryState.Recovering) this.#done = this.#run();
  }

  /** Resolves when the recovery has ended (recovered, empty or stopped). */
  finished(): Promise<void> {
    return this.#done;
  }

  /** Stops retrying and aborts a dump in flight (shutdown); waits for the recovery to end. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#done;
  }

  async #run(): Promise<void> {
    const log = this.#o.logger;
    // The listeners started after the dump load zeromq's native module and msgpack on first
    // use: load them while the dump is on the wire instead (~0.3-1 s of a fresh process on the
    // shared 2-core VM). A failure here is the listener's to report.
    void Promise.all([loadZeromq(), loadMsgpack()]).catch(() => undefined);
    let wait = this.#o.retryMinMs ?? 500;
    for (let round = 1; ; round++) {
      const peers = this.#o.peers.list();
      const failures: string[] = [];
      let refused = 0;
      for (const peer of peers) {
        if (this.#stop.signal.aborted) return this.#stopped();
        try {
          const t0 = performance.now();
          const { sections, workers } = await this.#take(peer);
          if (this.#stop.signal.aborted) return this.#stopped();
          const t1 = performance.now();
          await this.#apply(peer, sections, workers);
          this.#from = peer;
          this.#state = RecoveryState.Recovered;
          const pairs = sections.reduce((n, s) => n + (s.trees?.reduce((m, t) => m + t.blocks, 0) ?? s.events.reduce((m, e) => m + (e.event.data.type === 'stored' ? e.event.data.blocks.length : 0), 0)), 0);
          const binary = sections.some((s) => s.trees !== null);
          log?.info({ peer, indexes: sections.length, blocks: pairs, exact: workers === null, dump: binary ? 'binary' : 'json', ms: Math.round(performance.now() - t0), takeMs: Math.round(t1 - t0), applyMs: Math.round(performance.now() - t1) }, 'recovered from a peer: ready');
          return;
        } catch (err) {
          if (err instanceof Refused) refused++;
          const why = (err as Error).message;
          failures.push(`${peer}: ${why}`);
          log?.warn({ peer, round, err: why }, err instanceof Refused ? 'peer refused the connection' : 'recovery from a peer failed: trying the next');
        }
      }
      if (refused === peers.length) {
        this.#state = RecoveryState.Empty;
        log?.warn({ peers }, 'no reachable peer (each refused the connection or is recovering too): starting empty');
        return;
      }
      this.#reason = `recovering from peers: round ${round} failed (${failures.join('; ')})`;
      log?.error({ round, retryInMs: wait, failures }, 'no peer gave a whole dump: not ready, retrying');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, wait);
        this.#stop.signal.addEventListener('abort', () => {
          clearTimeout(t);
          resolve();
        }, { once: true });
      });
      wait = Math.min(wait * 2, this.#o.retryMaxMs ?? 30_000);
    }
  }

  #stopped(): void {
    this.#state = RecoveryState.Stopped;
  }

  /**
   * GET of `path` on `peer` (`accept`: its Accept header), its body whole and content type;
   * throws `Refused` or an Error naming the failure.
   */
  async #get(peer: string, path: string, accept = 'application/json'): Promise<{ body: Uint8Array; type: string }> {
    const signal = AbortSignal.any([this.#stop.signal, AbortSignal.timeout(this.#o.timeoutMs ?? 120_000)]);
    let res: Response;
    try {
      res = await fetch(peerRoute(peer, path), { signal, headers: { accept } });
    } catch (err) {
      const code = (err as { cause?: { code?: unknown } }).cause?.code;
      if (code === 'ECONNREFUSED') throw new Refused(`connection refused`);
      throw new Error(`GET ${path}: ${String(code ?? (err as Error).message)}`);
    }
    if (res.status !== 200) {
      const text = await res.text().catch(() => '');
      // Recovering itself: it has no index to give. Counted as "no replica there", so replicas
      // of a fleet started together, each the other's peer, start empty instead of waiting on
      // each other for ever.
      if (res.status === 503 && text.includes(`"code":"${ErrorCode.Recovering}"`)) throw new Refused('the peer is recovering too');
      throw new Error(`GET ${path}: status ${res.status}`);
    }
    try {
      return { body: new Uint8Array(await res.arrayBuffer()), type: res.headers.get('content-type') ?? '' };
    } catch (err) {
      throw new Error(`GET ${path}: the answer broke off (${(err as Error).message})`);
    }
  }

  /** A peer's dump, parsed whole, and its /workers when the dump has no registrations. */
  async #take(peer: string): Promise<{ sections: DumpSection[]; workers: JsonValue[] | null }> {
    // A kvindex peer answers the binary dump (dump-binary.ts); a Dynamo peer ignores the
    // Accept header and answers JSON, which its content type says.
    const sections = readDumpOrThrow(await this.#get(peer, '/dump', this.#o.dump === 'json' ? 'application/json' : `${DUMP_BINARY_TYPE}, application/json;q=0.5`));
    if (sections.every((s) => s.listeners !== null)) return { sections, workers: null };
    let workers: JsonValue;
    try {
      workers = parseJsonLossless((await this.#get(peer, '/workers')).body);
    } catch (err) {
      if (err instanceof Refused) throw new Error('GET /workers: connection refused after /dump');
      throw err;
    }
    if (!Array.isArray(workers)) throw new Error('GET /workers: not a JSON array');
    return { sections, workers };
  }

  /** Applies the dump (synchronously), then starts a listener per registration. */
  async #apply(peer: string, sections: DumpSection[], workers: JsonValue[] | null): Promise<void> {
    const { registry } = this.#o;
    const log = this.#o.logger;
    for (const s of sections) {
      try {
        if (s.trees !== null) registry.restoreIndexBincode(s.modelName, s.tenantId, s.blockSize, s.trees);
        else registry.restoreIndex(s.modelName, s.tenantId, s.blockSize, s.events);
      } catch (err) {
        log?.warn({ peer, index: s.key, err: (err as Error).message }, 'a recovered index conflicts with a registration made here: skipped');
      }
    }
    if (workers !== null) log?.warn({ peer }, 'the peer\'s dump has no engine positions (a Dynamo peer): recovered index is approximate, events between the dump and the subscription are lost');
    for (const s of sections) {
      const regs = s.listeners ?? fromWorkers(workers ?? [], s, sections.length === 1);
      for (const l of regs) {
        if (registry.registered(l.instanceId, s.modelName, s.tenantId, l.dpRank)) continue;
        const exact = l.position !== null;
        try {
          await registry.register(
            { instanceId: l.instanceId, endpoint: l.endpoint, modelName: s.modelName, blockSize: s.blockSize, tenantId: s.tenantId, dpRank: l.dpRank, replayEndpoint: l.replayEndpoint },
            { resumeAfter: l.position, recovery: { from: peer, exact } },
          );
          if (!exact && s.listeners !== null) log?.warn({ peer, instanceId: l.instanceId, dpRank: l.dpRank }, 'the peer knew no engine seq for this listener: its recovered blocks are approximate');
        } catch (err) {
          log?.warn({ peer, instanceId: l.instanceId, dpRank: l.dpRank, err: (err as Error).message }, 'a recovered registration failed');
        }
      }
    }
  }
}

function readDumpOrThrow(answer: { body: Uint8Array; type: string }): DumpSection[] {
  try {
    return answer.type.startsWith(DUMP_BINARY_TYPE) ? readBinaryDump(answer.body) : readDump(answer.body);
  } catch (err) {
    throw new Error(`GET /dump: ${(err as Error).message}`);
  }
}

/**
 * The registrations of section `s` in a `/workers` answer without dump positions: items that
 * name its model and tenant (kvindex's do), or every item when the dump holds one index and the
 * items name none (Dynamo's). Ill-typed items are skipped.
 */
function fromWorkers(workers: JsonValue[], s: DumpSection, only: boolean): Array<{ instanceId: bigint; dpRank: number; endpoint: string; replayEndpoint: string | null; position: null }> {
  const out: Array<{ instanceId: bigint; dpRank: number; endpoint: string; replayEndpoint: string | null; position: null }> = [];
  for (const w of workers) {
    if (typeof w !== 'object' || w === null || Array.isArray(w)) continue;
    const model = w.model_name;
    const tenant = w.tenant_id;
    const named = typeof model === 'string' && typeof tenant === 'string';
    if (named ? model !== s.modelName || tenant !== s.tenantId : !only) continue;
    const id = w.instance_id;
    const endpoints = w.endpoints;
    if (typeof id !== 'bigint' || id < 0n || typeof endpoints !== 'object' || endpoints === null || Array.isArray(endpoints)) continue;
    for (const [rank, ep] of Object.entries(endpoints)) {
      if (!/^\d{1,10}$/.test(rank) || Number(rank) > 0xffff_ffff || typeof ep !== 'string') continue;
      out.push({ instanceId: id, dpRank: Number(rank), endpoint: ep, replayEndpoint: null, position: null });
    }
  }
  return out;
}
