/**
 * The client side of vLLM's replay protocol: a DEALER sends `["", start_seq]` (8 bytes,
 * big-endian) to the engine's ROUTER, which streams every buffered batch with seq >= start
 * from its ring (10,000 batches by default), then an end marker with seq -1. Two reply layouts
 * exist and both are accepted: `["", seq, payload]` (SGLang, vLLM before 0.26) and
 * `["", topic, seq, payload]` (vLLM 0.26 and later). A REQ socket would take one reply only.
 */

import { ZmqError, ZmqErrorCode } from './errors.js';
import type { ZeromqModule } from './load.js';

export interface ReplayedBatch {
  readonly seq: bigint;
  readonly payload: Uint8Array;
}

const EMPTY = new Uint8Array(0);

/** The 8-byte big-endian form of a seq. */
export function seqFrame(seq: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt.asUintN(64, seq));
  return b;
}

/**
 * Asks `endpoint` for the batches from `start` on and collects them until the end marker.
 * Throws `ZmqError` `ReplayFailed` when the socket does not answer within `timeoutMs` per
 * message, or answers out of protocol, or when `signal` aborts (the source closes: a shutdown
 * waited for the whole timeout, 2 s by default, before). Never sends to another endpoint.
 */
export async function requestReplay(zmq: ZeromqModule, endpoint: string, start: bigint, timeoutMs: number, signal?: AbortSignal): Promise<ReplayedBatch[]> {
  const dealer = new zmq.Dealer({ linger: 0, receiveTimeout: timeoutMs, sendTimeout: timeoutMs });
  const out: ReplayedBatch[] = [];
  // Closing the socket fails its pending send or receive at once.
  const abort = (): void => dealer.close();
  signal?.addEventListener('abort', abort, { once: true });
  try {
    if (signal?.aborted === true) throw new ZmqError(ZmqErrorCode.ReplayFailed, `replay ${endpoint}: the source closed`);
    dealer.connect(endpoint);
    await dealer.send([EMPTY, seqFrame(start)]);
    for (;;) {
      const frames = await dealer.receive();
      if (frames.length < 3 || frames.length > 4 || frames[0]!.length !== 0) {
        throw new ZmqError(ZmqErrorCode.ReplayFailed, `replay ${endpoint}: a reply of ${frames.length} frames is neither ["", seq, payload] nor ["", topic, seq, payload]`);
      }
      const seqBytes = frames[frames.length - 2]!;
      const payload = frames[frames.length - 1]!;
      if (seqBytes.length !== 8) throw new ZmqError(ZmqErrorCode.ReplayFailed, `replay ${endpoint}: seq frame of ${seqBytes.length} bytes`);
      const seq = new DataView(seqBytes.buffer, seqBytes.byteOffset, 8).getBigInt64(0);
      if (seq === -1n || payload.length === 0) return out;
      if (seq < 0n) throw new ZmqError(ZmqErrorCode.ReplayFailed, `replay ${endpoint}: negative seq ${seq}`);
      out.push({ seq, payload });
    }
  } catch (err) {
    if (err instanceof ZmqError) throw err;
    throw new ZmqError(ZmqErrorCode.ReplayFailed, `replay ${endpoint} from seq ${start}: ${(err as Error).message}`, { cause: err });
  } finally {
    signal?.removeEventListener('abort', abort);
    dealer.close();
  }
}
