/**
 * Dynamo's lookup frequency trail (`recent_uses` per node, only with an expiration window):
 * per visited node, drop the uses older than the window (strictly), report the remaining count
 * when non-zero, then record this use. Without a window every method is a no-op, chosen once at
 * construction so lookups do not branch on it.
 */
import { ErrorCode, KvIndexError } from '../errors.js';

export interface UseTracker {
  /** The lookup's timestamp: the clock is read once per lookup, as Dynamo does. */
  now(): number;
  record(node: number, frequencies: number[], t: number): void;
  /** The node was freed (its id may be reused). */
  forget(node: number): void;
}

const NONE: UseTracker = { now: () => 0, record: () => {}, forget: () => {} };

export function createUseTracker(expirationMs: number | undefined, clock: () => number = () => performance.now()): UseTracker {
  if (expirationMs === undefined) return NONE;
  if (!(expirationMs >= 0) || !Number.isFinite(expirationMs)) {
    throw new KvIndexError(ErrorCode.InvalidOption, `expirationMs: expected a finite number >= 0, got ${expirationMs}`);
  }
  const uses = new Map<number, number[]>();
  return {
    now: clock,
    record(node, frequencies, t) {
      let list = uses.get(node);
      if (list === undefined) {
        list = [];
        uses.set(node, list);
      }
      let drop = 0;
      while (drop < list.length && t - list[drop]! > expirationMs) drop++;
      if (drop > 0) list.splice(0, drop);
      if (list.length > 0) frequencies.push(list.length);
      list.push(t);
    },
    forget(node) {
      uses.delete(node);
    },
  };
}
