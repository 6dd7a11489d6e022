/**
 * The shard side: owns one RadixTree and serves the messages of `messages.ts`. Runs inside a
 * shard thread (workers/shard.ts); kept free of thread APIs so it is plain, testable logic.
 */
import { ErrorCode, KvIndexError } from '../errors.js';
import { copyBincodePart } from '../protocol/snapshot-merge.js';
import { createSnapshotWriter, type SnapshotWriter } from '../protocol/snapshot-writer.js';
import { RadixTree } from '../tree/radix-tree.js';
import { EventBatchWriter, applyBatch, emptyCounts, type StatusCounts } from './event-batch.js';
import { encodeJsonBatch } from './json-batch.js';
import { JsonEventEncoder } from './json-words.js';
import { ReplyWriter } from './reply-board.js';
import type { DumpPrepared, FindReply, FromShard, Rejected, ShardInit, ShardRequest, ShardStats, ToShard } from './messages.js';

export type Post = (msg: FromShard, transfer?: ArrayBuffer[]) => void;

export class ShardCore {
  private readonly tree: RadixTree;
  private readonly counts: StatusCounts = emptyCounts();
  private malformed = 0;
  private failed = false;
  // The dump writer is kept between dumps: its buffer stays faulted in, where a fresh one costs
  // ~3 ms per MB of first-touch page faults on the 2-core dev VM.
  private writer: SnapshotWriter | null = null;
  private writerPairs = -1;
  private prepared: Uint8Array | null = null;
  private preparedDp = false;
  private readonly replies: ReplyWriter;
  // JSON batches are encoded into these words, then applied as an event batch.
  private readonly jsonEncoder = new JsonEventEncoder();
  private readonly jsonWords = new EventBatchWriter();

  constructor(private readonly init: ShardInit, private readonly post: Post, private readonly exit: () => void) {
    this.tree = new RadixTree(init.expirationMs === null ? {} : { expirationMs: init.expirationMs });
    this.replies = new ReplyWriter(init.board, init.shard);
  }

  handle(msg: ToShard): void {
    if (this.failed) return;
    if (typeof msg === 'number') {
      this.lookupInSlot(msg);
      return;
    }
    if (msg.t === 'events') {
      try {
        this.checkTestHook(msg.words);
        const events = applyBatch(this.tree, msg.words, this.counts);
        if (msg.back) {
          // Back to be refilled: a fresh buffer per batch costs the main thread zeroing and
          // first-touch page faults (~3 ms per MB here), more than encoding into it.
          const words = msg.words.buffer as ArrayBuffer;
          this.post({ t: 'ack', events, malformed: 0, rejected: [], words }, [words]);
        } else {
          this.post({ t: 'ack', events, malformed: 0, rejected: [] });
        }
      } catch (err) {
        // A batch that fails half-way leaves the tree in an unknown state: stop serving.
        this.failed = true;
        const e = err instanceof KvIndexError ? err : new KvIndexError(ErrorCode.ShardFailed, String(err), { cause: err });
        this.post({ t: 'fatal', code: e.code, message: `shard ${this.init.shard}: ${e.message}` });
      }
      return;
    }
    if (msg.t === 'json') {
      this.applyJson(msg.bytes, msg.ends, msg.tags, msg.back);
      return;
    }
    try {
      const [value, transfer] = this.serve(msg);
      this.post({ t: 'res', id: msg.id, value }, transfer);
    } catch (err) {
      const e = err instanceof KvIndexError ? err : new KvIndexError(ErrorCode.ShardFailed, String(err), { cause: err });
      this.post({ t: 'err', id: msg.id, code: e.code, message: `shard ${this.init.shard}: ${e.message}` });
    }
  }

  private lookupInSlot(slot: number): void {
    let scores: Map<bigint, number> | null = null;
    let frequencies: number[] = [];
    try {
      const r = this.replies.request(slot);
      ({ scores, frequencies } = this.tree.findMatchesWords(r.words, r.off, r.n, r.earlyExit));
    } catch {
      scores = null; // written as an error status: the waiting lookup fails naming this shard
    }
    this.replies.write(slot, scores, frequencies);
  }

  /** Parses and applies raw JSON events; malformed ones are counted and each reported, not fatal. */
  private applyJson(bytes: Uint8Array, ends: Uint32Array, tags: Float64Array, back: boolean): void {
    const rejected: Rejected[] = [];
    let malformed = 0;
    try {
      const w = this.jsonWords;
      encodeJsonBatch(bytes, ends, this.jsonEncoder, w, (err, index) => {
        malformed++;
        const e = err instanceof KvIndexError ? err : new KvIndexError(ErrorCode.InvalidJson, String(err));
        rejected.push({ code: e.code, message: `shard ${this.init.shard}, event ${index} of a JSON batch: ${e.message}`, tag: tags[index] ?? -1 });
      });
      const words = w.take();
      this.checkTestHook(words);
      applyBatch(this.tree, words, this.counts);
      if (w.askBack()) w.recycle(words.buffer as ArrayBuffer); // the next JSON batch reuses it
    } catch (err) {
      this.failed = true;
      const e = err instanceof KvIndexError ? err : new KvIndexError(ErrorCode.ShardFailed, String(err), { cause: err });
      this.post({ t: 'fatal', code: e.code, message: `shard ${this.init.shard}: ${e.message}` });
      return;
    }
    this.malformed += malformed;
    if (back) {
      const json = bytes.buffer as ArrayBuffer; // back to be refilled (see BufferPool)
      this.post({ t: 'ack', events: ends.length, malformed, rejected, json }, [json]);
    } else {
      this.post({ t: 'ack', events: ends.length, malformed, rejected });
    }
  }

  /** Serves a request outside the port (the piscina-task path of the channel benchmark). */
  serveDirect(req: ShardRequest): unknown {
    return this.serve(req)[0];
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
        const pairs = this.tree.size;
        if (this.writer === null || this.writer.encoding !== req.encoding || pairs > this.writerPairs) {
          this.writer = createSnapshotWriter(req.encoding, 64 + pairs * 57); // worst case: see RadixTree.dumpSnapshot
          this.writerPairs = pairs;
        }
        this.tree.dumpTo(this.writer);
        const events = this.writer.eventCount;
        this.prepared = this.writer.finishShared();
        this.preparedDp = req.encoding === 'bincode-dp';
        const reply: DumpPrepared = { bytes: this.prepared.length, events };
        return [reply, []];
      }
      case 'dumpCopy': {
        if (this.prepared === null) throw new KvIndexError(ErrorCode.InvalidOption, 'dumpCopy without dumpPrepare');
        const out = new Uint8Array(req.target);
        const n = copyBincodePart(this.prepared, out, req.at, req.firstId, this.preparedDp, `shard ${this.init.shard}: `);
        this.prepared = null;
        return [n, []];
      }
      case 'stats': {
        const stats: ShardStats = {
          workers: this.tree.workers().length,
          pairs: this.tree.size,
          nodes: this.tree.nodeCount,
          events: { ...this.counts },
          malformed: this.malformed,
          bytes: this.tree.bytes,
        };
        return [stats, []];
      }
      case 'flush':
        return [null, []];
      case 'exit':
        this.exit();
        return [null, []];
    }
  }

  /** Test-only crash injection: throw while applying a batch that holds the marked worker. */
  private checkTestHook(words: Uint32Array): void {
    if (this.init.failOnWorker === null) return;
    const id = BigInt(this.init.failOnWorker);
    const lo = Number(id & 0xffffffffn);
    const hi = Number(id >> 32n);
    for (let i = 0; i + 2 < words.length; i++) {
      if (words[i + 1] === lo && words[i + 2] === hi) throw new Error('injected failure (test hook)');
    }
  }
}
