/**
 * Restoring a bincode snapshot into an indexer without `RouterEvent` objects (issue 40, "ready
 * in seconds"). Each Stored event's blocks are copied as bytes into one reused word buffer and
 * handed to the engine as words: in-thread straight to the tree (`RadixTree.applyStored`),
 * threaded into the shard's event batch as the batch's own Stored record, whose buffer is then
 * transferred to the shard thread (no structured clone, no bigint per block). The one `bigint`
 * per event is its worker id, reused while consecutive events share a worker (a dump's chains
 * of one worker follow each other). The walk is the tree's bulk load's (`BincodeEvents`,
 * src/tree/bulk-load.ts), which also counts the blocks to come so the engine sizes its tree
 * once (`reserve`).
 *
 * The old path, `restore(iterateSnapshot(bytes))`, built a `bigint` pair and an object per
 * block, then the event batch writer split each bigint back into halves; see
 * BENCHMARKS.md ("Restore to ready") for the measured difference at 16.4M pairs.
 *
 * The whole snapshot is checked first (`checkBincode`, a walk over events, not blocks), so a
 * malformed one throws `SnapshotDecodeError` before anything is applied. Removed and Cleared
 * events (rare in a snapshot; a tree dump has none) go through the event path.
 */

import { u64FromHalves } from '../protocol/u64-text.js';
import type { RouterEvent } from '../protocol/types.js';
import { BincodeEvents, BulkLoadScratch, REMOVED, STORED, type BincodeSummary } from '../tree/bulk-load.js';
import type { Engine, StoredWordsSink } from './indexer.js';

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
  const ev = new BincodeEvents(bytes, withDp, '', new BulkLoadScratch());
  engine.reserve(ev.summary.storedBlocks, ev.perWorker);
  while (ev.next()) {
    if (ev.variant === STORED) {
      engine.applyStoredWords(ev.worker, ev.wLo, ev.wHi, ev.hasParent, ev.parentLo, ev.parentHi, ev.words, ev.count);
    } else {
      // Removed or Cleared: decoded to an event (one object per event, not per block).
      const eventId = ev.eventId;
      let e: RouterEvent;
      if (ev.variant === REMOVED) {
        const w = ev.words;
        const blockHashes: bigint[] = [];
        for (let j = 0; j < ev.count; j++) blockHashes.push(u64FromHalves(w[2 * j + 1]!, w[2 * j]!));
        e = { workerId: ev.worker, event: { eventId, data: { type: 'removed', blockHashes } } };
      } else e = { workerId: ev.worker, event: { eventId, data: { type: 'cleared' } } };
      engine.applyEvent(e);
    }
    if (engine.needsDrain) await drained();
  }
  return ev.summary;
}
