/**
 * The shard side: owns one RadixTree and serves the messages of `wire/messages.ts`, in the order
 * they arrive. Runs inside a shard thread (workers/shard.ts); kept free of thread APIs so it is
 * plain, testable logic.
 */
import { getHeapStatistics } from 'node:v8';
import { ErrorCode, KvIndexError } from '../../errors.js';
import { parseRouterEvent } from '../../protocol/json-parse.js';
import { copyBincodePart } from '../../protocol/snapshot-merge.js';
import { createSnapshotWriter, type SnapshotWriter } from '../../protocol/snapshot-writer.js';
import { reserveLoad } from '../../tree/bulk-load.js';
import { RadixTree } from '../../tree/radix-tree.js';
import { EventBatchWriter, REC_JSON, emptyCounts, jsonTag, type StatusCounts } from '../wire/event-batch.js';
import { JsonEventEncoder } from '../wire/json-words.js';
import type { DumpPrepared, FindReply, FromShard, Rejected, ShardInit, ShardRequest, ShardStats, ToShard } from '../wire/messages.js';
import { H, type SharedTreeLayout } from '../../tree/shared-layout.js';
import { WRITE_SECTION_BLOCKS } from '../wire/tree-lock.js';
import { BatchRingReader } from '../wire/batch-ring.js';
import { applyInSections } from './apply-batch.js';
import { ReplyWriter } from './reply-writer.js';

export type Post = (msg: FromShard, transfer?: ArrayBuffer[]) => void;

/** A dump part prepared by `dumpPrepare`, waiting for its `dumpCopy`. */
interface Prepared {
  bytes: Uint8Array;
  writer: SnapshotWriter;
  dp: boolean;
}

const asError = (err: unknown): KvIndexError =>
  err instanceof KvIndexError ? err : new KvIndexError(ErrorCode.ShardFailed, String(err), { cause: err });

export class ShardCore {
  private readonly tree: RadixTree;
  private readonly counts: StatusCounts = emptyCounts();
  private malformed = 0;
  /** Time spent in `applyEvents`, ms (two clock reads per batch: ~0.1 us against ~1 ms of applying). */
  private applyMs = 0;
  private failed = false;
  /** Batches received through the ring, and in transferred buffers (the ring had no room). */
  private ringBatches = 0;
  private transferredBatches = 0;
  private readonly ring: BatchRingReader;
  /** Rejections of the batch being applied, reported in its ack (reused while empty). */
  private rejected: Rejected[] = [];
  // One dump writer is kept between dumps: its buffer stays faulted in, where a fresh one costs
  // ~3 ms per MB of first-touch page faults on the 2-core dev VM. Parts of several dumps in
  // flight at once each hold their own writer until copied.
  private spareWriter: SnapshotWriter | null = null;
  private readonly prepared = new Map<number, Prepared>();
  private readonly replies: ReplyWriter;
  // A run of JSON records is encoded into these words, then applied as an event batch.
  private readonly jsonEncoder = new JsonEventEncoder();
  private readonly jsonWords = new EventBatchWriter();
  /** The tree's shared header: the readers' lock, the applied count (shared-layout.ts). */
  private readonly header: Int32Array;

  constructor(private readonly init: ShardInit, private readonly post: Post) {
    this.tree = new RadixTree({
      shared: true,
      ...(init.expirationMs === null ? {} : { expirationMs: init.expirationMs }),
      ...(init.initialCapacity === null ? {} : { initialCapacity: init.initialCapacity }),
      ...(init.maxPairs === null ? {} : { maxPairs: init.maxPairs }),
    });
    // The capacity hint (options.ts `expectedPairs`): node arrays grown once, in place, before
    // the thread reports started, so that the ingest does not fault their pages in.
    if (init.expectedPairs !== null && init.expectedPairs > 0) this.tree.nodes.reserve(init.expectedPairs);
    this.layout = this.tree.layout!;
    this.header = new Int32Array(this.layout.header);
    this.replies = new ReplyWriter(init.board, init.shard);
    this.ring = new BatchRingReader(init.ring);
  }

  /** The shared memory lookups on the calling thread read (sent back when the thread starts). */
  readonly layout: SharedTreeLayout;

  handle(msg: ToShard): void {
    if (this.failed) return;
    if (typeof msg === 'number') {
      this.lookupInSlot(msg);
      return;
    }
    if (msg.t === 'ring') {
      this.ringBatches++;
      // The view is dropped when this returns (nothing below keeps the batch's words: the JSON
      // path parses into its own words and strings), and only then is the space handed back.
      if (this.applyEvents(this.ring.batch(msg.at, msg.n), msg.events)) {
        this.ring.consumed(msg.end);
        this.ack(msg.events, 4 * msg.n, null);
      }
      return;
    }
    if (msg.t === 'events') {
      this.transferredBatches++;
      const bytes = msg.words.buffer.byteLength;
      if (!this.applyEvents(msg.words, msg.events)) return;
      // Back to be refilled: a fresh buffer per batch costs the main thread zeroing and
      // first-touch page faults (~3 ms per MB here), more than encoding into it.
      this.ack(msg.events, bytes, msg.back ? msg.words.buffer as ArrayBuffer : null);
      return;
    }
    try {
      const [value, transfer] = this.serve(msg);
      this.post({ t: 'res', id: msg.id, value }, transfer);
    } catch (err) {
      const e = asError(err);
      this.post({ t: 'err', id: msg.id, code: e.code, message: `shard ${this.init.shard}: ${e.message}` });
    }
  }

  private lookupInSlot(slot: number): void {
    const r = this.replies.request(slot);
    let scores: Map<bigint, number> | null = null;
    let frequencies: number[] = [];
    try {
      ({ scores, frequencies } = this.tree.findMatchesWords(r.words, r.off, r.n, r.earlyExit));
    } catch {
      scores = null; // written as an error status: the waiting lookup fails naming this shard
    }
    this.replies.write(slot, r.generation, scores, frequencies);
  }

  /**
   * Applies a batch in record order and returns true. Malformed JSON records are counted and
   * reported in the ack, not fatal; a batch that fails otherwise leaves the tree in an unknown
   * state, so the shard stops serving (and this returns false: no ack).
   */
  private applyEvents(words: Uint32Array, events: number): boolean {
    const started = performance.now();
    const rejected = this.rejected;
    try {
      let i = 0;
      while (i < words.length) {
        i = words[i] === REC_JSON
          ? this.applyJsonRun(words, i, rejected)
          : applyInSections(this.tree, words, i, this.counts, this.header, WRITE_SECTION_BLOCKS);
      }
    } catch (err) {
      this.fail(err);
      return false;
    }
    Atomics.add(this.header, H.APPLIED, events);
    if (Atomics.load(this.header, H.APPLIED_WAITERS) > 0) Atomics.notify(this.header, H.APPLIED);
    this.applyMs += performance.now() - started;
    this.malformed += rejected.length;
    return true;
  }

  /** Acknowledges an applied batch of `bytes`, handing `back` its buffer if given. */
  private ack(events: number, bytes: number, back: ArrayBuffer | null): void {
    const rejected = this.rejected;
    if (rejected.length > 0) this.rejected = [];
    const malformed = rejected.length;
    if (back !== null) this.post({ t: 'ack', events, bytes, malformed, rejected, words: back }, [back]);
    else this.post({ t: 'ack', events, bytes, malformed, rejected });
  }

  /** The shard can no longer be trusted: stop serving, wake waiters, tell the main thread. */
  private fail(err: unknown): void {
    this.failed = true;
    Atomics.store(this.header, H.FAILED, 1);
    Atomics.notify(this.header, H.APPLIED);
    const e = asError(err);
    this.post({ t: 'fatal', code: e.code, message: `shard ${this.init.shard}: ${e.message}` });
  }

  /**
   * Parses the run of JSON records starting at word `at` into event words (the canonical
   * layout straight through json-words.ts, anything else through the full parser), applies
   * them, and returns the word after the run.
   */
  private applyJsonRun(words: Uint32Array, at: number, rejected: Rejected[]): number {
    const bytes = new Uint8Array(words.buffer, words.byteOffset, words.length * 4);
    const w = this.jsonWords;
    let i = at;
    while (i < words.length && words[i] === REC_JSON) {
      const n = words[i + 1]!;
      const start = 4 * (i + 4);
      if (!this.jsonEncoder.encode(bytes, start, start + n, w)) {
        try {
          w.push(parseRouterEvent(bytes.subarray(start, start + n)));
        } catch (err) {
          const e = err instanceof KvIndexError ? err : new KvIndexError(ErrorCode.InvalidJson, String(err));
          rejected.push({ code: e.code, message: `shard ${this.init.shard}: ${e.message}`, tag: jsonTag(words[i + 2]!, words[i + 3]!) });
        }
      }
      i += 4 + ((n + 3) >>> 2);
    }
    const parsed = w.take();
    applyInSections(this.tree, parsed, 0, this.counts, this.header, WRITE_SECTION_BLOCKS);
    if (w.askBack(parsed)) w.recycle(parsed.buffer as ArrayBuffer); // the next JSON run reuses it
    return i;
  }

  private serve(req: ShardRequest): [unknown, ArrayBuffer[]] {
    switch (req.op) {
      case 'find': {
        const { scores, frequencies } = this.tree.findMatchesWords(req.words, 0, req.n, req.earlyExit);
        const triples = new Uint32Array(scores.size * 3);
        let k = 0;
        for (const [w, s] of scores) {
          triples[k++] = Number(w & 0xffffffffn);
          triples[k++] = Number(w >> 32n);
          triples[k++] = s;
        }
        const reply: FindReply = { triples, frequencies };
        return [reply, [triples.buffer as ArrayBuffer]];
      }
      case 'dump': {
        const bytes = this.tree.dumpSnapshot(req.encoding);
        return [bytes, [bytes.buffer as ArrayBuffer]];
      }
      case 'dumpPrepare': {
        const bound = this.tree.dumpBound(req.encoding); // worst case: see RadixTree.dumpSnapshot
        let writer = this.spareWriter;
        this.spareWriter = null;
        if (writer === null || writer.encoding !== req.encoding || writer.capacity < bound) {
          writer = createSnapshotWriter(req.encoding, bound);
        }
        this.tree.dumpTo(writer);
        const events = writer.eventCount;
        const bytes = writer.finishShared();
        this.prepared.set(req.dump, { bytes, writer, dp: req.encoding === 'bincode-dp' });
        const reply: DumpPrepared = { bytes: bytes.length, events };
        return [reply, []];
      }
      case 'dumpCopy': {
        const part = this.takePrepared(req.dump);
        const out = new Uint8Array(req.target);
        const n = copyBincodePart(part.bytes, out, req.at, req.firstId, part.dp, `shard ${this.init.shard}: `);
        return [n, []];
      }
      case 'dumpDrop':
        this.takePrepared(req.dump);
        return [null, []];
      case 'stats': {
        const stats: ShardStats = {
          workers: this.tree.workers().length,
          pairs: this.tree.size,
          nodes: this.tree.nodeCount,
          events: { ...this.counts },
          malformed: this.malformed,
          bytes: this.tree.bytes,
          sharedBytes: this.tree.sharedBytes,
          heapBytes: getHeapStatistics().used_heap_size,
          evicted: this.tree.evicted,
          applyMs: this.applyMs,
          ringBatches: this.ringBatches,
          transferredBatches: this.transferredBatches,
        };
        return [stats, []];
      }
      case 'flush':
        return [null, []];
      case 'reserve':
        // Outside the readers' lock, like the per-event reserve of apply-batch.ts: growth
        // publishes a new layout generation and readers rebuild their views.
        reserveLoad(this.tree, req.nodes, req.workers);
        return [null, []];
    }
  }

  /** Removes a prepared part and keeps its writer as the spare (the larger one, if two). */
  private takePrepared(dump: number): Prepared {
    const part = this.prepared.get(dump);
    if (part === undefined) throw new KvIndexError(ErrorCode.InvalidOption, `dump ${dump}: no prepared part`);
    this.prepared.delete(dump);
    const spare = this.spareWriter;
    if (spare === null || spare.capacity < part.writer.capacity) this.spareWriter = part.writer;
    return part;
  }
}
