/**
 * A gateway's routing decision for one request (its own file: the observer and the metrics
 * read it, and the gateway makes it, so neither imports the other for it).
 */
import type { RouteDecision } from '../router/kv-router.js';
import type { CatalogEngine } from './engine-catalog.js';

/** A routing decision for one request, in flight on its engine until `free`. */
export interface EnginePick {
  readonly requestId: string;
  /** The engine chosen: its URL, instance id and rank. */
  readonly engine: CatalogEngine;
  readonly decision: RouteDecision;
  /** The model whose index decided (the base model of an adapter) and the LoRA name. */
  readonly baseModel: string;
  readonly loraName: string | null;
  readonly tenantId: string;
  readonly tokens: Uint32Array;
  /** Time spent tokenizing (0 for token ids) and deciding, ms. */
  readonly tokenizeMs: number;
  readonly routeMs: number;
  /**
   * With remote lookups (`--index`): true when no replica answered within the deadline and the
   * engine was chosen by load alone (fail-open); absent otherwise.
   */
  readonly indexFailOpen?: boolean;
  /** Whether `free` ran. */
  freed: boolean;
}
