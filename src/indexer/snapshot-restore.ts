/**
 * Restoring a bincode snapshot into an indexer without `RouterEvent` objects (issue 40, "ready
 * in seconds"). Each Stored event's blocks are copied as bytes into one reused word buffer and
 * handed to the engine as words: in-thread straight to the tree (`RadixTree.applyStored`),
 * threaded into the shard's event batch as the batch's own Stored record, whose buffer is then
 * transferred to the shard thread (no structured clone, no bigint per block). The one `bigint`
 * per event is its worker id, reused while consecutive events share a worker (a dump's chains
 * of one worker often follow each other).
 *
 * The old path, `restore(iterateSnapshot(bytes))`, built a `bigint` pair and an object per
 * block, then the event batch writer split each bigint back into halves; see
 * BENCHMARKS.md ("Restore to ready") for the measured difference at 16.4M pairs.
 *
 * The whole snapshot is checked first (`checkBincode`, a walk over events, not blocks), so a
 * malformed one throws `SnapshotDecodeError` before anything is applied. Removed and Cleared
 * events (rare in a snapshot; a tree dump has none) go through the event path.
 */

import { BincodeCursor, readEventCount } from '../protocol/snapshot-reader.js';
import type { RouterEvent } from '../protocol/types.js';
import { u64FromHalves } from '../protocol/u64-text.js';
import { BulkLoadScratch, checkBincode, type BincodeSummary } from '../tree/bulk-load.js';
import type { Engine, StoredWordsSink } from './indexer.js';

const LITTLE = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * Feeds every event of a bincode (`withDp`: bincode-dp) snapshot to `engine` in order, awaiting
 * `drained()` whenever the engine's backlog passes its high-water mark. Returns the snapshot's
 * counts. Throws `SnapshotDecodeError` before applying anything when the bytes are malformed.
 */
export async function restoreBincode(
  engine: Engine & StoredWordsSink,
  drained: () => Promise<void>,
  bytes: Uint8Array,
  withDp = false,
): Promise<BincodeSummary> {
  const summary = checkBincode(bytes, withDp);
  engine.reserve(summary.storedBlocks);
  const scratch = new BulkLoadScratch();
  const c = new BincodeCursor(bytes, '');
  const view = c.view;
  const n = readEventCount(c, withDp);
  let lastLo = -1;
  let lastHi = -1;
  let worker = 0n;
  for (let i = 0; i < n; i++) {
    // Checked whole above: the reads below cannot run past the end.
    const p0 = c.pos;
    const wLo = view.getUint32(p0, true);
    const wHi = view.getUint32(p0 + 4, true);
    if (wLo !== lastLo || wHi !== lastHi) {
      worker = u64FromHalves(wHi, wLo);
      lastLo = wLo;
      lastHi = wHi;
    }
    const variant = view.getUint32(p0 + 16, true);
    let p = p0 + 20;
    if (variant === 0) {
      const hasParent = bytes[p] === 1;
      const pLo = hasParent ? view.getUint32(p + 1, true) : 0;
      const pHi = hasParent ? view.getUint32(p + 5, true) : 0;
      p += hasParent ? 9 : 1;
      const k = view.getUint32(p, true); // < 2^32: checkBincode fitted it in the bytes
      p += 8;
      scratch.fit(k);
      const words = scratch.words;
      if (LITTLE) scratch.bytes.set(bytes.subarray(p, p + 16 * k));
      else for (let j = 0; j < 4 * k; j++) words[j] = view.getUint32(p + 4 * j, true);
      p += 16 * k;
      c.pos = p + (withDp ? 4 : 0);
      engine.applyStoredWords(worker, wLo, wHi, hasParent, pLo, pHi, words, k);
    } else {
      // Removed or Cleared: decoded to an event (one object per event, not per block).
      c.pos = p0 + 16;
      const eventId = view.getBigUint64(p0 + 8, true);
      c.pos += 4;
      let ev: RouterEvent;
      if (variant === 1) {
        const k = view.getUint32(c.pos, true);
        c.pos += 8;
        const blockHashes: bigint[] = [];
        for (let j = 0; j < k; j++, c.pos += 8) blockHashes.push(view.getBigUint64(c.pos, true));
        ev = { workerId: worker, event: { eventId, data: { type: 'removed', blockHashes } } };
      } else ev = { workerId: worker, event: { eventId, data: { type: 'cleared' } } };
      if (withDp) c.pos += 4;
      engine.applyEvent(ev);
    }
    if (engine.needsDrain) await drained();
  }
  return summary;
}
