/**
 * Reading a replica's answer to a remote lookup (remote-index.ts): Dynamo's scores document as
 * worker id -> best overlap in blocks, u64 worker ids exact (they are JSON object keys, so
 * `JSON.parse` keeps them as strings), anything else refused (null, never a throw).
 */

const U64_MAX = 0xffff_ffff_ffff_ffffn;
const ID = /^(0|[1-9][0-9]{0,19})$/;

/**
 * The scores of a `/query` or `/query_by_hash` answer (`{"scores":{"<worker>":{"<rank>":tokens}},...}`)
 * as worker -> best blocks over its ranks, or null when the text is not such a document (a
 * worker id that is not a u64, a score that is not a whole number of blocks). Exported for tests.
 */
export function readScores(text: string, blockSize: number): Map<bigint, number> | null {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return null;
  const scores = (doc as { scores?: unknown }).scores;
  if (typeof scores !== 'object' || scores === null || Array.isArray(scores)) return null;
  const out = new Map<bigint, number>();
  for (const [worker, ranks] of Object.entries(scores)) {
    if (!ID.test(worker)) return null;
    const id = BigInt(worker);
    if (id > U64_MAX) return null;
    if (typeof ranks !== 'object' || ranks === null || Array.isArray(ranks)) return null;
    let best = 0;
    for (const [rank, tokens] of Object.entries(ranks)) {
      if (!/^[0-9]{1,10}$/.test(rank)) return null;
      if (typeof tokens !== 'number' || !Number.isSafeInteger(tokens) || tokens < 0 || tokens % blockSize !== 0) return null;
      best = Math.max(best, tokens / blockSize);
    }
    out.set(id, best);
  }
  return out;
}
