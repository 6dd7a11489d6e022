/**
 * An open-loop HTTP/1.1 load client in its own process (forked by the benchmark, driven over
 * the IPC channel), as a router's clients are: requests are written as prepared bytes on
 * keep-alive sockets to 127.0.0.1 and answers are read by their Content-Length, so the client
 * allocates little per request and its own garbage collections (in another heap) do not stop
 * the server's event loop. Latency runs from the write of a request to the last byte of its
 * answer. Request k leaves at start + k / rate whatever the earlier ones do: a request finding
 * every socket busy opens another, so a slow answer never delays the next request's clock.
 */
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

export interface LoadCommand {
  host: string;
  port: number;
  path: string;
  perSecond: number;
  durationMs: number;
  bodies: string[];
}

export interface LoadReply {
  /** Latency per request, ms, in completion order. */
  latencies: number[];
  /** Wall time from the first request due to the last answer, ms. */
  ms: number;
  /** Answers whose status was not 200. */
  errors: number;
  /** Sockets opened. */
  sockets: number;
}

const HEADER_END = Buffer.from('\r\n\r\n');

/** One keep-alive connection carrying one request at a time. */
class Conn {
  busy = false;
  private chunks: Buffer[] = [];
  private have = 0;
  private need = -1;
  private sentAt = 0;
  private done: ((ok: boolean) => void) | null = null;

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => this.onData(d));
  }

  static open(host: string, port: number): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const s = connect({ host, port }, () => resolve(new Conn(s)));
      s.once('error', reject);
    });
  }

  /**
   * Writes a request (its head, an `x-sent-at` header with the send time on the clock shared
   * with the server, timeOrigin + now, then the rest) and resolves with (latency ms, status
   * 200) once the answer is whole.
   */
  send(head: Buffer, rest: Buffer): Promise<[number, boolean]> {
    this.busy = true;
    return new Promise((resolve) => {
      this.done = (ok) => resolve([performance.now() - this.sentAt, ok]);
      this.sentAt = performance.now();
      this.socket.cork();
      this.socket.write(head);
      this.socket.write(`x-sent-at: ${performance.timeOrigin + this.sentAt}\r\n`, 'latin1');
      this.socket.write(rest);
      this.socket.uncork();
    });
  }

  private onData(d: Buffer): void {
    this.chunks.push(d);
    this.have += d.length;
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    if (this.need < 0) {
      const end = all.indexOf(HEADER_END);
      if (end < 0) return;
      const head = all.subarray(0, end).toString('latin1');
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      this.need = end + 4 + (m === null ? 0 : Number(m[1]));
    }
    if (this.have < this.need) {
      this.chunks = [all];
      return;
    }
    // Nothing follows the answer: one request in flight per socket.
    const ok = all.subarray(9, 12).toString('latin1') === '200';
    this.chunks = [];
    this.have = 0;
    this.need = -1;
    this.busy = false;
    const done = this.done!;
    this.done = null;
    done(ok);
  }

  close(): void {
    this.socket.destroy();
  }
}

export async function runLoad(c: LoadCommand): Promise<LoadReply> {
  const head = Buffer.from(`POST ${c.path} HTTP/1.1\r\nhost: ${c.host}:${c.port}\r\ncontent-type: application/json\r\n`);
  const rests = c.bodies.map((body) => Buffer.from(`content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`));
  const conns: Conn[] = [await Conn.open(c.host, c.port)];
  const latencies: number[] = [];
  let errors = 0;
  const n = Math.floor((c.durationMs / 1000) * c.perSecond);
  const pending: Array<Promise<void>> = [];
  const start = performance.now();
  for (let k = 0; k < n; k++) {
    const wait = start + (k * 1000) / c.perSecond - performance.now();
    if (wait > 0) await sleep(wait);
    let conn = conns.find((x) => !x.busy);
    if (conn === undefined) {
      conn = await Conn.open(c.host, c.port);
      conns.push(conn);
    }
    pending.push(conn.send(head, rests[k % rests.length]!).then(([ms, ok]) => {
      latencies.push(ms);
      if (!ok) errors++;
    }));
    if (pending.length > 1024) await Promise.all(pending.splice(0, 512));
  }
  await Promise.all(pending);
  const ms = performance.now() - start;
  for (const x of conns) x.close();
  return { latencies, ms, errors, sockets: conns.length };
}

// Forked with an IPC channel: one command in, one reply out, per message.
if (process.send !== undefined && process.argv.includes('--http-load')) {
  process.on('message', (m: LoadCommand | 'exit') => {
    if (m === 'exit') {
      process.disconnect();
      return;
    }
    void runLoad(m).then((r) => process.send!(r));
  });
  process.send('ready');
}
