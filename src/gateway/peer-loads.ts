/**
 * The other gateways' requests in flight, as this gateway's routers count them (shared-loads.ts
 * feeds it from NATS). Each peer is a router id; its requests are applied to the
 * `ActiveSequences` of every (model, tenant) router whose candidates hold the event's
 * (worker, rank), under a local id `<peer router id, hex>/<its request id>`, so that two peers'
 * ids (both gateways number theirs `gw-0`, `gw-1`, ...) never meet, and a peer can never free
 * this gateway's own requests.
 *
 * Expiry is heartbeat-based, not a shorter request TTL: a peer that sends heartbeats
 * (`heartbeat()`) and then falls silent for `expiryMs` (or 3 of its own announced intervals,
 * whichever is longer) is dead or cut off, and every request it had in flight is freed at once.
 * A TTL short enough to clear a dead gateway's loads quickly (seconds) would also drop a live
 * gateway's long generations (minutes), and one long enough for those (Dynamo's 300 s) pins an
 * engine for minutes after a crash. A peer that never sent a heartbeat (a Dynamo router with
 * `--router-replica-sync`, a `serve --route-workers` replica) keeps only the routers' request TTL
 * (300 s, Dynamo's), since silence proves nothing about it.
 *
 * Nothing here throws on a peer's input: every outcome is a counted `ApplyResult`.
 */
import type { ActiveSequences } from '../router/active-sequences.js';
import type { ActiveSequenceEvent } from '../router/sequence-event.js';

/** What applying one peer event did. */
export const ApplyResult = {
  Applied: 'applied',
  /** This gateway's own event, echoed by the bus. */
  Own: 'own',
  /** An add for a (worker, rank) no router here has as a candidate. */
  UnknownWorker: 'unknown_worker',
  /** A mark or free of a request not known here (added before this gateway joined, or expired). */
  UnknownRequest: 'unknown_request',
  /** An add of a request id the peer already has in flight here. */
  Duplicate: 'duplicate',
} as const;
export type ApplyResult = (typeof ApplyResult)[keyof typeof ApplyResult];

export interface PeerLoadsOptions {
  /** This gateway's router id: its own events are skipped. */
  routerId: bigint;
  /** The in-flight tables of every router that has (worker, rank) as a candidate. */
  sequencesOf: (workerId: bigint, dpRank: number) => readonly ActiveSequences[];
  /** A peer with heartbeats silent this long is dropped, ms (default 5,000). */
  expiryMs?: number;
  /** Clock, ms (default `performance.now()`). */
  now?: () => number;
}

/** A peer dropped by `sweep` or `leave`. */
export interface DroppedPeer {
  routerId: bigint;
  /** Its requests in flight that were freed here. */
  requests: number;
  /** How long it had been silent, ms. */
  silentMs: number;
}

interface Peer {
  lastSeen: number;
  /** Whether it ever sent a heartbeat (only those are expired by silence). */
  heartbeats: boolean;
  intervalMs: number;
  readonly prefix: string;
  /** Its request id -> the tables it was added to. */
  readonly requests: Map<string, readonly ActiveSequences[]>;
}

export class PeerLoads {
  readonly #own: bigint;
  readonly #sequencesOf: PeerLoadsOptions['sequencesOf'];
  readonly #expiryMs: number;
  readonly #now: () => number;
  readonly #peers = new Map<bigint, Peer>();
  #remote = 0;
  #expiredPeers = 0;
  #expiredRequests = 0;

  constructor(options: PeerLoadsOptions) {
    this.#own = options.routerId;
    this.#sequencesOf = options.sequencesOf;
    this.#expiryMs = options.expiryMs ?? 5_000;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Applies a peer's event to every router holding its worker. */
  apply(e: ActiveSequenceEvent): ApplyResult {
    if (e.routerId === this.#own) return ApplyResult.Own;
    const peer = this.#touch(e.routerId);
    const d = e.data;
    if (d.type === 'add_request') {
      if (peer.requests.has(e.requestId)) return ApplyResult.Duplicate;
      const seqs = this.#sequencesOf(e.workerId, e.dpRank);
      if (seqs.length === 0) return ApplyResult.UnknownWorker;
      const local = { ...e, requestId: peer.prefix + e.requestId };
      const applied: ActiveSequences[] = [];
      for (const s of seqs) if (s.applyEvent(local)) applied.push(s);
      if (applied.length === 0) return ApplyResult.Duplicate;
      peer.requests.set(e.requestId, applied);
      this.#remote++;
      return ApplyResult.Applied;
    }
    const seqs = peer.requests.get(e.requestId);
    if (seqs === undefined) return ApplyResult.UnknownRequest;
    const local = { ...e, requestId: peer.prefix + e.requestId };
    for (const s of seqs) s.applyEvent(local);
    if (d.type === 'free') {
      peer.requests.delete(e.requestId);
      this.#remote--;
    }
    return ApplyResult.Applied;
  }

  /** A peer's heartbeat, announcing its interval (ms). False for this gateway's own. */
  heartbeat(routerId: bigint, intervalMs: number): boolean {
    if (routerId === this.#own) return false;
    const p = this.#touch(routerId);
    p.heartbeats = true;
    p.intervalMs = intervalMs;
    return true;
  }

  /** A peer said it is stopping: its requests are freed now. Null if unknown (or this gateway). */
  leave(routerId: bigint): DroppedPeer | null {
    const p = this.#peers.get(routerId);
    if (p === undefined || routerId === this.#own) return null;
    return this.#drop(routerId, p, this.#now());
  }

  /**
   * Drops the peers whose heartbeats stopped (see the file comment) and forgets the requests the
   * routers expired by their TTL. Returns the dropped peers. Call every heartbeat interval.
   */
  sweep(): DroppedPeer[] {
    const now = this.#now();
    const out: DroppedPeer[] = [];
    for (const [id, p] of this.#peers) {
      const silent = now - p.lastSeen;
      if (p.heartbeats && silent > Math.max(this.#expiryMs, 3 * p.intervalMs)) {
        out.push(this.#drop(id, p, now));
        continue;
      }
      // A request the routers expired (their TTL) or a free lost on the bus: forget it here too.
      for (const [rid, seqs] of p.requests) {
        if (!seqs.some((s) => s.has(p.prefix + rid))) {
          p.requests.delete(rid);
          this.#remote--;
        }
      }
      // A silent peer without heartbeats or requests: its record goes (hostile ids cannot pile up).
      if (!p.heartbeats && p.requests.size === 0 && silent > this.#expiryMs) this.#peers.delete(id);
    }
    return out;
  }

  /** Peers heard from (and not dropped). */
  get peers(): number {
    return this.#peers.size;
  }

  /** The peers' requests in flight here. */
  get remoteRequests(): number {
    return this.#remote;
  }

  /** Peers dropped for silence or on leaving, and the requests freed with them. */
  stats(): { peers: number; remoteRequests: number; expiredPeers: number; expiredRequests: number } {
    return { peers: this.#peers.size, remoteRequests: this.#remote, expiredPeers: this.#expiredPeers, expiredRequests: this.#expiredRequests };
  }

  /** Frees every peer request (this gateway stops sharing). */
  clear(): void {
    const now = this.#now();
    for (const [id, p] of this.#peers) this.#drop(id, p, now, false);
  }

  #touch(routerId: bigint): Peer {
    let p = this.#peers.get(routerId);
    const now = this.#now();
    if (p === undefined) {
      p = { lastSeen: now, heartbeats: false, intervalMs: 0, prefix: `${routerId.toString(16)}/`, requests: new Map() };
      this.#peers.set(routerId, p);
    } else {
      p.lastSeen = now;
    }
    return p;
  }

  #drop(id: bigint, p: Peer, now: number, count = true): DroppedPeer {
    let n = 0;
    for (const [rid, seqs] of p.requests) {
      const local: ActiveSequenceEvent = { requestId: p.prefix + rid, workerId: 0n, dpRank: 0, routerId: id, loraName: null, data: { type: 'free' } };
      let held = false;
      for (const s of seqs) held = s.applyEvent(local) || held;
      if (held) n++;
    }
    this.#remote -= p.requests.size;
    this.#peers.delete(id);
    if (count) {
      this.#expiredPeers++;
      this.#expiredRequests += n;
    }
    return { routerId: id, requests: n, silentMs: now - p.lastSeen };
  }
}
