/**
 * What the gateway reports of each request, for its metrics (metrics.ts) or a library user's
 * own: every hook is called synchronously on the request path, so it must be cheap.
 */

import type { EnginePick } from './engine-pick.js';

/** How a proxied request ended. */
export const Outcome = {
  /** The engine answered in full (any status it chose). */
  Ok: 'ok',
  /** The client went away first; the upstream request was aborted. */
  ClientClosed: 'client_closed',
  /** Every engine tried failed before its first byte (answered 502). */
  Failed: 'failed',
  /** The engine failed after its first byte (the stream ended with an error event). */
  FailedMidStream: 'failed_mid_stream',
} as const;
export type Outcome = (typeof Outcome)[keyof typeof Outcome];

export interface GatewayObserver {
  /** A decision was made (tokens known, engine chosen). */
  routed(model: string, pick: EnginePick): void;
  /** The upstream request was sent, `ms` after the request arrived. */
  sent(pick: EnginePick, ms: number): void;
  /** The first byte of the answer arrived, `ms` after the request arrived. */
  firstByte(pick: EnginePick, ms: number): void;
  /** A try failed before its first byte and was retried on another engine. */
  retried(pick: EnginePick): void;
  /** The request ended, `ms` after it arrived; `pick` null when no engine was chosen. */
  finished(model: string, pick: EnginePick | null, outcome: Outcome | 'rejected', ms: number): void;
}

const noop = (): void => {};

/** An observer that records nothing. */
export const NOOP_OBSERVER: GatewayObserver = { routed: noop, sent: noop, firstByte: noop, retried: noop, finished: noop };
