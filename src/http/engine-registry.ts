/**
 * The state behind the standalone indexer API: one `EngineIndex` per (model, tenant), each
 * with its own block size, and the engine listeners registered into them, one `ZmqKvSource` per
 * (instance, model, tenant, dp rank). Registration is the only way in; unregistering stops the
 * listeners and drops the blocks they brought. Routing decisions (`POST /route`) use one
 * `KvRouter` per (model, tenant), made on first use, over that index, with the registered
 * (instance, dp rank)s as candidates.
 */

import type { Logger } from 'pino';
import { KvRouter, type KvRouterOptions, type RouterIndex } from '../router/kv-router.js';
import type { WorkerCandidate } from '../router/select-worker.js';
import { EngineIndex } from '../zmq/engine-index.js';
import { ZmqKvSource, type SourcePosition } from '../zmq/source.js';
import type { RouterEvent } from '../protocol/types.js';
import type { RankSnapshot } from './dump-read.js';
import { checkEndpoint } from '../zmq/endpoint.js';
import { ZmqError, ZmqErrorCode } from '../zmq/errors.js';
import { HttpRequestError, modelTenant, type RegisterRequest, type UnregisterRequest } from './requests.js';

export interface IndexEntry {
  readonly modelName: string;
  readonly tenantId: string;
  readonly index: EngineIndex;
  /** Its routing state, once a route was asked for. */
  router: KvRouter | null;
}

export interface ListenerEntry {
  readonly instanceId: bigint;
  readonly modelName: string;
  readonly tenantId: string;
  readonly dpRank: number;
  readonly endpoint: string;
  readonly replayEndpoint: string | null;
  readonly source: ZmqKvSource;
  /** How this listener's blocks came from a peer at start-up, or null (registered here). */
  readonly recovery: ListenerRecovery | null;
}

/**
 * A listener recovered from a peer's dump: the peer's URL, and whether the dump said which
 * engine seq it reflected (exact: the gap since is replayed) or not (a Dynamo peer's dump:
 * what the engine published between the dump and the subscription is lost).
 */
export interface ListenerRecovery {
  readonly from: string;
  readonly exact: boolean;
}

/** How `register` starts a listener recovered from a peer (peer-recovery.ts). */
export interface RegisterFrom {
  /** The position in the peer's dump (null: unknown, a fresh cursor). */
  readonly resumeAfter: SourcePosition | null;
  readonly recovery: ListenerRecovery;
}

export interface EngineRegistryOptions {
  logger?: Logger;
  /** Topic prefix every listener subscribes to (default '': all topics). */
  topic?: string;
  /** Per-message replay wait (default 2,000 ms). */
  replayTimeoutMs?: number;
  /** Readmission delay after an unreplayable gap (`ZmqKvSourceOptions.readmitAfterMs`). */
  readmitAfterMs?: number | null;
  /** Minimum ms between two dropped-event lines of one (engine, rank, reason) (default 60,000). */
  dropLogIntervalMs?: number;
  /** Selector settings of the routers (Dynamo's defaults otherwise). */
  routing?: Omit<KvRouterOptions, 'indexer' | 'blockSize' | 'workers'>;
  /**
   * The routers decide over this index instead of their (model, tenant)'s: the gateway's
   * `--index` mode primes it with scores fetched from replicas (src/gateway/remote-routing.ts).
   */
  routerIndex?: RouterIndex;
}

/**
 * A map key of several parts, one to one: the parts as a JSON array of strings. Joined with NUL
 * (as before) the model "a\0b" with tenant "c" and the model "a" with tenant "b\0c" shared one
 * index (found by fuzzing).
 */
const key = (...parts: Array<string | bigint | number>): string => JSON.stringify(parts.map(String));

export class EngineRegistry {
  readonly #indexes = new Map<string, IndexEntry>();
  readonly #listeners = new Map<string, ListenerEntry>();
  /** Registrations whose listener is starting, per (model, tenant) key. */
  readonly #starting = new Map<string, number>();
  /**
   * Listener keys being registered (their source starting): a second registration of the same
   * key gets 409 at once. Checked against `#listeners` alone, two registrations overlapping in
   * `#start` would both start a source, the first one feeding the index with no way to stop it
   * (today `ZmqKvSource.start` awaits only settled promises, so they cannot overlap yet).
   */
  readonly #registering = new Set<string>();
  /** Listener keys being unregistered, and when that is done. */
  readonly #leaving = new Map<string, Promise<void>>();
  readonly #options: EngineRegistryOptions;

  constructor(options: EngineRegistryOptions = {}) {
    this.#options = options;
  }

  /** The index of (model, tenant), or undefined. */
  index(modelName: string, tenantId: string): IndexEntry | undefined {
    return this.#indexes.get(key(modelName, tenantId));
  }

  /** The router of (model, tenant), made on first use; undefined without an index. */
  router(modelName: string, tenantId: string): KvRouter | undefined {
    const entry = this.index(modelName, tenantId);
    if (entry === undefined) return undefined;
    entry.router ??= new KvRouter({ ...this.#options.routing, indexer: this.#options.routerIndex ?? entry.index, blockSize: entry.index.blockSize });
    return entry.router;
  }

  /** The registered (instance, dp rank)s of (model, tenant): the routing candidates. */
  candidates(modelName: string, tenantId: string): WorkerCandidate[] {
    const out: WorkerCandidate[] = [];
    for (const l of this.#listeners.values()) {
      if (l.modelName === modelName && l.tenantId === tenantId) out.push({ workerId: l.instanceId, dpRank: l.dpRank });
    }
    return out;
  }

  indexes(): IndexEntry[] {
    return [...this.#indexes.values()];
  }

  listeners(): ListenerEntry[] {
    return [...this.#listeners.values()];
  }

  /**
   * Starts a listener. Throws `HttpRequestError`: 409 when the (model, tenant) has another
   * block size or the (instance, rank) is already registered there with another endpoint or
   * replay endpoint (or being registered), 400 for a bad endpoint. The same registration again
   * is a success that changes nothing. Waits for an unregister of the same (instance, rank)
   * under way.
   */
  async register(r: RegisterRequest, from: RegisterFrom | null = null): Promise<void> {
    checkOrBadRequest(() => checkEndpoint(r.endpoint, 'endpoint'));
    if (r.replayEndpoint !== null) checkOrBadRequest(() => checkEndpoint(r.replayEndpoint, 'replay_endpoint'));
    const lk = key(r.instanceId, r.modelName, r.tenantId, r.dpRank);
    // An engine that restarts unregisters and registers again at once: its registration waits
    // until the old listener is gone with its blocks (a source's close can take a replay's
    // timeout), instead of a 409 the engine would have to retry.
    for (let leaving = this.#leaving.get(lk); leaving !== undefined; leaving = this.#leaving.get(lk)) await leaving;
    const ik = key(r.modelName, r.tenantId);
    let entry = this.#indexes.get(ik);
    if (entry !== undefined && entry.index.blockSize !== r.blockSize) {
      throw new HttpRequestError(`block_size ${r.blockSize} conflicts with ${entry.index.blockSize} of ${modelTenant(r.modelName, r.tenantId)}`, 409);
    }
    // The same registration again (an engine that retries, or one forwarded by a peer replica
    // that this replica already has): a success that changes nothing, not a 409.
    const existing = this.#listeners.get(lk);
    if (existing !== undefined && existing.endpoint === r.endpoint && existing.replayEndpoint === r.replayEndpoint) return;
    if (existing !== undefined || this.#registering.has(lk)) {
      throw new HttpRequestError(`instance ${r.instanceId} dp_rank ${r.dpRank} is already registered for this model and tenant`, 409);
    }
    const created = entry === undefined;
    if (entry === undefined) {
      entry = { modelName: r.modelName, tenantId: r.tenantId, index: new EngineIndex({ blockSize: r.blockSize }), router: null };
      this.#indexes.set(ik, entry);
    }
    let source: ZmqKvSource;
    this.#starting.set(ik, (this.#starting.get(ik) ?? 0) + 1);
    this.#registering.add(lk);
    try {
      source = await this.#start(r, entry, from?.resumeAfter ?? null);
    } catch (err) {
      // A registration that failed leaves nothing behind: an index made for it would otherwise
      // fix the (model, tenant)'s block size with no engine feeding it. Unless another
      // registration of the same (model, tenant) started meanwhile and uses it.
      if (created && this.#starting.get(ik) === 1 && !this.#fed(r.modelName, r.tenantId)) this.#indexes.delete(ik);
      // An endpoint that passes the format check but that ZMQ refuses (`tcp://*:5`, an ipc
      // path too long) is the request's fault, not the server's.
      if (err instanceof ZmqError && err.code === ZmqErrorCode.BadEndpoint) throw new HttpRequestError(err.message, 400);
      throw err;
    } finally {
      this.#registering.delete(lk);
      const n = this.#starting.get(ik)! - 1;
      if (n === 0) this.#starting.delete(ik);
      else this.#starting.set(ik, n);
    }
    this.#listeners.set(lk, { instanceId: r.instanceId, modelName: r.modelName, tenantId: r.tenantId, dpRank: r.dpRank, endpoint: r.endpoint, replayEndpoint: r.replayEndpoint, source, recovery: from?.recovery ?? null });
  }

  /**
   * Applies a peer's dump of (model, tenant) to its index, made with `blockSize` when absent.
   * Throws `HttpRequestError` 409 when the index exists with another block size. Synchronous:
   * no lookup sees part of it.
   */
  restoreIndex(modelName: string, tenantId: string, blockSize: number, events: readonly RouterEvent[]): void {
    const index = this.#restoreTarget(modelName, tenantId, blockSize);
    for (const ev of events) index.applyEvent(ev);
  }

  /**
   * `restoreIndex` for a binary dump's trees: each rank's bincode snapshot loaded straight into
   * its device tree (src/tree/bulk-load.ts). The snapshots must have been checked whole
   * (dump-binary.ts `readBinaryDump` does). Synchronous too. Returns the pairs stored.
   */
  restoreIndexBincode(modelName: string, tenantId: string, blockSize: number, trees: readonly RankSnapshot[]): number {
    const index = this.#restoreTarget(modelName, tenantId, blockSize);
    let blocks = 0;
    for (const t of trees) blocks += index.loadRankBincode(t.rank, t.bytes).storedBlocks;
    return blocks;
  }

  #restoreTarget(modelName: string, tenantId: string, blockSize: number): EngineIndex {
    const ik = key(modelName, tenantId);
    let entry = this.#indexes.get(ik);
    if (entry !== undefined && entry.index.blockSize !== blockSize) {
      throw new HttpRequestError(`block_size ${blockSize} conflicts with ${entry.index.blockSize} of ${modelTenant(modelName, tenantId)}`, 409);
    }
    if (entry === undefined) {
      entry = { modelName, tenantId, index: new EngineIndex({ blockSize }), router: null };
      this.#indexes.set(ik, entry);
    }
    return entry.index;
  }

  /** Whether (instance, model, tenant, rank) has a listener (or one starting). */
  registered(instanceId: bigint, modelName: string, tenantId: string, dpRank: number): boolean {
    const lk = key(instanceId, modelName, tenantId, dpRank);
    return this.#listeners.has(lk) || this.#registering.has(lk);
  }

  /** Whether another listener of `l`'s (instance, model, tenant) is registered with `rank`. */
  #ownsRank(l: ListenerEntry, rank: number): boolean {
    for (const o of this.#listeners.values()) {
      if (o !== l && o.instanceId === l.instanceId && o.modelName === l.modelName && o.tenantId === l.tenantId && o.dpRank === rank) return true;
    }
    return false;
  }

  /** Whether a listener feeds the index of (model, tenant). */
  #fed(modelName: string, tenantId: string): boolean {
    for (const l of this.#listeners.values()) if (l.modelName === modelName && l.tenantId === tenantId) return true;
    return false;
  }

  #start(r: RegisterRequest, entry: IndexEntry, resumeAfter: SourcePosition | null): Promise<ZmqKvSource> {
    return ZmqKvSource.start({
      resumeAfter,
      index: entry.index,
      workerId: r.instanceId,
      endpoint: r.endpoint,
      dpRank: r.dpRank,
      replayEndpoint: r.replayEndpoint,
      ...(this.#options.topic === undefined ? {} : { topic: this.#options.topic }),
      ...(this.#options.replayTimeoutMs === undefined ? {} : { replayTimeoutMs: this.#options.replayTimeoutMs }),
      ...(this.#options.readmitAfterMs === undefined ? {} : { readmitAfterMs: this.#options.readmitAfterMs }),
      ...(this.#options.dropLogIntervalMs === undefined ? {} : { dropLogIntervalMs: this.#options.dropLogIntervalMs }),
      // Every line of the source names the engine's model and tenant besides its id and endpoint.
      ...(this.#options.logger === undefined ? {} : { logger: this.#options.logger.child({ model: r.modelName, tenant: r.tenantId }) }),
    });
  }

  /**
   * Stops the matching listeners (no tenant: every tenant; no rank: every rank) and drops
   * their blocks. A (model, tenant) left with no listener (and no registration in progress)
   * loses its index and router: with them kept, registering and unregistering under new model
   * names grew memory, /dump and /metrics without bound, and a wrong block size stayed fixed
   * until a restart (found by fuzzing). Returns how many matched (0: the caller answers 404).
   */
  async unregister(r: UnregisterRequest): Promise<number> {
    const hit = [...this.#listeners].filter(
      ([, l]) => l.instanceId === r.instanceId && l.modelName === r.modelName && (r.tenantId === null || l.tenantId === r.tenantId) && (r.dpRank === null || l.dpRank === r.dpRank),
    );
    for (const [lk, l] of hit) {
      // An unregister of the same listener already under way: this one is done when it is.
      const under = this.#leaving.get(lk);
      if (under !== undefined) {
        await under;
        continue;
      }
      const removal = this.#remove(lk, l);
      this.#leaving.set(lk, removal.catch(() => undefined)); // waiters go on whatever it does
      try {
        await removal;
      } finally {
        this.#leaving.delete(lk);
      }
    }
    return hit.length;
  }

  /**
   * Stops one listener and drops its blocks. It stays registered until they are gone: a
   * registration of the same (instance, rank) accepted while the source closed (a replay can
   * take its timeout) had its new blocks wiped by the clear below (found by fuzzing); such a
   * registration waits for `#leaving` now.
   */
  async #remove(lk: string, l: ListenerEntry): Promise<void> {
    await l.source.close();
    const ik = key(l.modelName, l.tenantId);
    const entry = this.#indexes.get(ik);
    if (entry !== undefined) {
      // Every rank the engine's batches were filed under (a batch's own data_parallel_rank
      // may differ from the registered one), except ranks another listener of the instance
      // registered: clearing only the registered rank left such blocks scored for good.
      for (const rank of new Set([l.dpRank, ...l.source.ranks()])) {
        if (rank !== l.dpRank && this.#ownsRank(l, rank)) continue;
        entry.index.clear(l.instanceId, rank);
        entry.index.exclude(l.instanceId, rank, false);
      }
    }
    this.#listeners.delete(lk);
    if (entry !== undefined && !this.#fed(l.modelName, l.tenantId) && !this.#starting.has(ik)) this.#indexes.delete(ik);
  }

  /** Stops every listener. The indexes stay readable. */
  async close(): Promise<void> {
    for (const l of this.#listeners.values()) await l.source.close();
    this.#listeners.clear();
  }
}

function checkOrBadRequest(check: () => unknown): void {
  try {
    check();
  } catch (err) {
    throw new HttpRequestError((err as Error).message);
  }
}
