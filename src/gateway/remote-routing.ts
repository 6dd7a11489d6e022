/**
 * The gateway's side of `--index`: its routers decide over scores fetched from replicas of
 * `kvindex serve --http` (remote-index.ts) instead of an index fed by its own ZMQ listeners.
 *
 * The router (`KvRouter`) reads overlaps synchronously from a `RouterIndex`; a remote lookup is
 * asynchronous. So the lookup runs first, and its scores are handed to the router through
 * `PrimedIndex` right before the synchronous `routeBlocks` call that reads them: nothing can run
 * in between, so concurrent requests cannot see each other's scores. One `PrimedIndex` serves
 * every (model, tenant) of the gateway. A lookup that failed open primes empty scores: the
 * router then prices every candidate by its load alone, which is what fail-open means.
 */

import { ErrorCode, KvIndexError } from '../errors.js';
import { computeBlockHashes } from '../hash/block-hash.js';
import type { RouterIndex } from '../router/kv-router.js';
import type { MatchResult } from '../tree/match-result.js';
import type { RemoteIndexClient, RemoteLookup } from './remote-index.js';

const EMPTY = new Map<bigint, number>();

/**
 * A `RouterIndex` that answers the next lookup of `hashes` with scores given beforehand
 * (`prime`), once; any other lookup matches nothing. It takes no events.
 */
export class PrimedIndex implements RouterIndex {
  #hashes: BigUint64Array | null = null;
  #scores: Map<bigint, number> = EMPTY;

  /** The next `findMatchesInto(hashes)` answers `scores` (worker -> blocks). */
  prime(hashes: BigUint64Array, scores: Map<bigint, number>): void {
    this.#hashes = hashes;
    this.#scores = scores;
  }

  findMatchesInto(hashes: BigUint64Array, result: MatchResult): number {
    const scores = hashes === this.#hashes ? this.#scores : EMPTY;
    this.#hashes = null;
    this.#scores = EMPTY;
    result.reserve(scores.size, 0);
    let n = 0;
    for (const [id, blocks] of scores) {
      if (blocks === 0) continue;
      // A replica's score past the prompt is not believed (a replica cannot match more blocks
      // than were asked); clipped rather than refused, it stays a valid price.
      result.workerIds[n] = id;
      result.scores[n] = Math.min(blocks, hashes.length);
      n++;
    }
    return n;
  }

  applyEvent(): never {
    throw new KvIndexError(ErrorCode.InvalidOption, 'the gateway\'s remote index takes no events (its replicas do)');
  }
}

/** A prompt's remote lookup: its block hashes and what the replicas said. */
export interface RemoteScores {
  readonly local: BigUint64Array;
  readonly lookup: RemoteLookup;
}

/** The lookups of a gateway in `--index` mode. */
export class RemoteRouting {
  readonly client: RemoteIndexClient;
  readonly index = new PrimedIndex();

  constructor(client: RemoteIndexClient) {
    this.client = client;
  }

  /** Hashes `tokens` as the index of (model, tenant) does and asks the replicas. Never throws. */
  async lookup(modelName: string, tenantId: string, loraName: string | null, blockSize: number, tokens: Uint32Array): Promise<RemoteScores> {
    const local = computeBlockHashes(tokens, blockSize, { loraName });
    return { local, lookup: await this.client.lookup(modelName, tenantId, local, blockSize) };
  }

  /** Hands `s`'s scores (none after a fail-open) to the next routing decision over `s.local`. */
  prime(s: RemoteScores): void {
    this.index.prime(s.local, s.lookup.ok ? s.lookup.scores : EMPTY);
  }
}
