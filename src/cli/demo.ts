/**
 * `kvindex demo` (`npm run demo`): a small tour of the library, not the main job (that is
 * `kvindex replay`, `npm run replay`; see the README). Hashes two requests that share a prefix,
 * indexes the KV events two workers would publish for them, and prints the overlap scores of a
 * third request, plus the snapshot sizes.
 */
import { computeBlockHashes, computeSequenceHashes } from '../hash/block-hash.js';
import { formatRouterEvent } from '../protocol/json-format.js';
import type { RouterEvent } from '../protocol/types.js';
import { RadixTree } from '../tree/radix-tree.js';

const BLOCK_SIZE = 16;

function tokens(from: number, count: number): Uint32Array {
  return Uint32Array.from({ length: count }, (_, i) => from + i);
}

function storedEvent(workerId: bigint, eventId: bigint, toks: Uint32Array): RouterEvent {
  const local = computeBlockHashes(toks, BLOCK_SIZE);
  const seq = computeSequenceHashes(local);
  const blocks = Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash }));
  return { workerId, event: { eventId, data: { type: 'stored', parentHash: null, blocks } } };
}

/** Runs the demo and returns the lines it prints (the README test compares them). */
export function runDemo(): string[] {
  const out: string[] = [];
  const tree = new RadixTree();
  const a = 0x694d99badb9f7c07n; // real worker ids are etcd lease ids above 2^53
  const b = 0x694d99badb9f7c08n;
  const shared = tokens(1, 64); // 4 blocks of a common system prompt
  const reqA = Uint32Array.from([...shared, ...tokens(1000, 32)]);
  const reqB = Uint32Array.from([...shared, ...tokens(2000, 48)]);
  for (const ev of [storedEvent(a, 0n, reqA), storedEvent(b, 0n, reqB)]) {
    out.push(`apply ${formatRouterEvent(ev).slice(0, 72)}... -> ${tree.applyEvent(ev)}`);
  }
  const query = Uint32Array.from([...shared, ...tokens(2000, 40)]);
  const { scores } = tree.findMatches(computeBlockHashes(query, BLOCK_SIZE));
  for (const [worker, score] of [...scores].sort((x, y) => (x[0] < y[0] ? -1 : 1))) {
    out.push(`worker ${worker}: ${score} blocks`);
  }
  out.push(`pairs ${tree.size}, snapshot ${tree.dumpSnapshot().length} bytes in ${tree.dumpEvents().length} events`);
  return out;
}
