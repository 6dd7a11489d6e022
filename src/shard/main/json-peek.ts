/**
 * The worker id of a serde-compact RouterEvent, read without parsing the rest: the calling
 * thread routes raw JSON events to the shard that owns their worker, and the shard parses them
 * (`applyEventJson`). Parsing to event objects measured ~170 ns per block on the conversation
 * workload, about half the cost of applying the block (bench/shard.bench.ts compares parsing
 * on the calling thread with parsing in the shards).
 */

const PREFIX = [0x7b, 0x22, 0x77, 0x6f, 0x72, 0x6b, 0x65, 0x72, 0x5f, 0x69, 0x64, 0x22, 0x3a]; // {"worker_id":

/**
 * The worker id from the leading `{"worker_id":N` (serde writes it first); null when the text
 * does not start that way (the caller then parses it all).
 */
export function peekWorkerId(bytes: Uint8Array): bigint | null {
  if (bytes.length < PREFIX.length + 2) return null;
  for (let i = 0; i < PREFIX.length; i++) if (bytes[i] !== PREFIX[i]) return null;
  let i = PREFIX.length;
  const start = i;
  // Up to 15 digits fit a double exactly; longer ids (most real ones) go through BigInt once.
  let small = 0;
  while (i < bytes.length && bytes[i]! >= 0x30 && bytes[i]! <= 0x39) {
    small = small * 10 + (bytes[i]! - 0x30);
    i++;
  }
  const digits = i - start;
  if (digits === 0 || digits > 20 || (digits > 1 && bytes[start] === 0x30)) return null;
  if (bytes[i] !== 0x2c && bytes[i] !== 0x7d && bytes[i] !== 0x20) return null;
  if (digits <= 15) return BigInt(small);
  let text = '';
  for (let k = start; k < i; k++) text += String.fromCharCode(bytes[k]!);
  const v = BigInt(text);
  return v > 0xffff_ffff_ffff_ffffn ? null : v;
}
