/**
 * The lookup-latency histogram buckets of both servers (`dynamo_router_overhead_indexer_find_matches_ms`
 * over NATS, `kvindex_http_query_ms` over HTTP): Dynamo's 0.01 ms x 3^k, 17 buckets, 0.01 to
 * 430467.21 ms.
 *
 * Why not prom-client's `exponentialBuckets(0.01, 3, 17)`: it multiplies the previous bound by 3
 * each step, so the rounding error of each product carries into the next, and the exposition
 * printed `le="7.290000000000001"`, `le="21.870000000000005"` ... `le="430467.2100000001"` (12 of
 * 17 bounds). A dashboard or alert written against `le="7.29"` matched nothing. Each bound here
 * is computed on its own and rounded to 12 significant digits (a double holds 15), which gives
 * the double nearest the decimal bound, so it prints as that decimal.
 */

/** `count` bounds `start * factor^k` (k = 0..count-1), each the double nearest its decimal value. */
export function decimalExponentialBuckets(start: number, factor: number, count: number): number[] {
  const out: number[] = [];
  for (let k = 0; k < count; k++) out.push(Number((start * factor ** k).toPrecision(12)));
  return out;
}

/** Dynamo's lookup buckets, ms: 0.01, 0.03, 0.09, ..., 430467.21. */
export const LOOKUP_BUCKETS_MS: readonly number[] = decimalExponentialBuckets(0.01, 3, 17);
