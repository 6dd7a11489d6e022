/**
 * A lean HTTP/1.1 client for one index replica's `POST /query_by_hash`, made for the remote
 * lookup's hot path (remote-index.ts): keep-alive connections over `net`, a request head
 * encoded once per replica, requests pipelined (answers come in order on a connection), the
 * requests of one event-loop turn written with one `writev` (the socket is corked for the turn),
 * and a callback per answer instead of a promise, a stream and a request object.
 *
 * Why: undici cost the gateway's process about 150-310 us of CPU a lookup on the dev VM
 * (`bench/remote-index.bench.ts`, `--cpu-prof`: a `writev` per lookup and undici's request,
 * dispatcher and body-stream machinery around it); a replica answers in tens of microseconds.
 *
 * Answers are framed by Content-Length (what `serve --http` sends) or chunked (any other server).
 * What it does not do, on purpose: TLS (an `https:` replica uses undici), close-delimited
 * bodies, redirects, 1xx answers. An answer it cannot frame (neither framing, a head over
 * 16 KiB, a body over 8 MiB, bytes that are not HTTP/1.x) fails every request on
 * that connection with an error and closes it: the client backs the replica off, as for a reset.
 *
 * Timeouts: an answer not complete `timeoutMs` after its request was written fails with the
 * requests behind it on that connection (pipelined answers cannot be skipped), checked every
 * `timeoutMs / 10` (at least 10 ms) by one timer per replica instead of a timer per request.
 */

import { connect, type Socket } from 'node:net';

/** Told the answer of one request: an error (status 0), or the status and the body's text. */
export type Http1Callback = (err: Error | null, status: number, body: string) => void;

export interface Http1ReplicaOptions {
  /** `http://host:port` (no path). */
  url: string;
  /** The path every request posts to, e.g. `/query_by_hash`. */
  path: string;
  /** Most connections (default 4); requests are pipelined on them, the least busy first. */
  connections?: number;
  /** An answer is awaited this long at most, ms (default 1,000). */
  timeoutMs?: number;
  /** Connect timeout, ms (default 1,000). */
  connectTimeoutMs?: number;
  /**
   * Most requests written and not answered, over all connections (default 4 per connection).
   * More wait here, and those whose lookup ended meanwhile are never sent (`CANCELLED`): a
   * replica that falls behind is not handed thousands of lookups nobody waits for (measured:
   * with every request written at once, a replica behind at 5,000 lookups/s answered 1.6 s
   * late at p50, working through stale ones).
   */
  maxInFlight?: number;
}

/** The error of a request dropped before it was sent because its `live()` said it was no longer wanted. */
export const CANCELLED = new Error('cancelled: not wanted any more when its turn came');

interface Queued {
  readonly body: Uint8Array;
  readonly cb: Http1Callback;
  readonly live: (() => boolean) | null;
  readonly at: number;
}

const MAX_HEAD = 16 * 1024;
const MAX_BODY = 8 * 1024 * 1024;
const CRLFCRLF = Buffer.from('\r\n\r\n');

class Connection {
  readonly socket: Socket;
  /** Callbacks of the requests written and not answered, oldest first, with their write time. */
  readonly waiting: Http1Callback[] = [];
  readonly sentAt: number[] = [];
  /** Index of the oldest unanswered request in `waiting` (a moving head instead of `shift`). */
  head = 0;
  /** Bytes received and not yet consumed. */
  buf: Buffer = Buffer.alloc(0);
  corked = false;
  closed = false;
  /** The server said `Connection: close`: no new request on it. */
  draining = false;

  constructor(socket: Socket) {
    this.socket = socket;
  }

  get inFlight(): number {
    return this.waiting.length - this.head;
  }
}

/** Keep-alive, pipelined HTTP/1.1 POSTs to one replica. */
export class Http1Replica {
  readonly #host: string;
  readonly #port: number;
  readonly #head: string;
  readonly #max: number;
  readonly #timeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #conns: Connection[] = [];
  readonly #maxInFlight: number;
  /** Requests waiting for room, oldest first (moving head). */
  #queue: Queued[] = [];
  #queueHead = 0;
  #inFlight = 0;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;

  constructor(o: Http1ReplicaOptions) {
    const u = new URL(o.url);
    if (u.protocol !== 'http:') throw new Error(`Http1Replica: http only, got ${u.protocol}`);
    this.#host = u.hostname.replace(/^\[|\]$/g, '');
    this.#port = Number(u.port === '' ? 80 : u.port);
    // Encoded once: only Content-Length and the body change per request.
    this.#head = `POST ${o.path} HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\ncontent-length: `;
    this.#max = o.connections ?? 4;
    this.#timeoutMs = o.timeoutMs ?? 1_000;
    this.#connectTimeoutMs = o.connectTimeoutMs ?? 1_000;
    this.#maxInFlight = o.maxInFlight ?? 4 * this.#max;
  }

  /** Requests written and not answered. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Requests waiting for room (not written yet). */
  get queued(): number {
    return this.#queue.length - this.#queueHead;
  }

  /**
   * Posts `body` (JSON bytes, kept by the socket: not reused by the caller); `cb` is called
   * once, never synchronously. When `maxInFlight` requests are out, it waits its turn, and is
   * dropped (`CANCELLED`) if `live()` is false by then.
   */
  post(body: Uint8Array, cb: Http1Callback, live: (() => boolean) | null = null): void {
    if (this.#closed) {
      process.nextTick(cb, new Error('closed'), 0, '');
      return;
    }
    this.#timer ??= setInterval(() => this.#checkTimeouts(), Math.max(10, Math.floor(this.#timeoutMs / 10))).unref();
    if (this.#inFlight >= this.#maxInFlight || this.queued > 0) {
      this.#queue.push({ body, cb, live, at: performance.now() });
      return;
    }
    this.#write(body, cb);
  }

  /** Writes queued requests while there is room; drops the ones no longer wanted. */
  #drain(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queueHead < this.#queue.length && !this.#closed) {
      const q = this.#queue[this.#queueHead]!;
      this.#queue[this.#queueHead++] = DONE;
      if (this.#queueHead === this.#queue.length) {
        this.#queue = [];
        this.#queueHead = 0;
      }
      if (q.live !== null && !q.live()) q.cb(CANCELLED, 0, '');
      else this.#write(q.body, q.cb);
    }
  }

  #write(body: Uint8Array, cb: Http1Callback): void {
    this.#inFlight++;
    const c = this.#pick();
    if (!c.corked) {
      // Every request of this turn on this connection goes out in one writev.
      c.corked = true;
      c.socket.cork();
      process.nextTick(() => {
        c.corked = false;
        c.socket.uncork();
      });
    }
    c.waiting.push(cb);
    c.sentAt.push(performance.now());
    c.socket.write(`${this.#head}${body.length}\r\n\r\n`, 'latin1');
    c.socket.write(body);
  }

  /** The connection of the next request: one written to this turn (same writev), else the least busy, else a new one. */
  #pick(): Connection {
    let best: Connection | null = null;
    for (const c of this.#conns) {
      if (c.closed || c.draining) continue;
      if (c.corked) return c;
      if (best === null || c.inFlight < best.inFlight) best = c;
    }
    if (best !== null && (best.inFlight === 0 || this.#conns.length >= this.#max)) return best;
    return this.#open();
  }

  #open(): Connection {
    const socket = connect({ host: this.#host, port: this.#port, noDelay: true });
    const c = new Connection(socket);
    this.#conns.push(c);
    socket.setTimeout(this.#connectTimeoutMs, () => this.#fail(c, new Error('connect timeout')));
    socket.once('connect', () => socket.setTimeout(0));
    socket.on('data', (chunk: Buffer) => this.#onData(c, chunk));
    socket.on('error', (err) => this.#fail(c, err));
    socket.on('close', () => this.#fail(c, new Error('connection closed')));
    return c;
  }

  #onData(c: Connection, chunk: Buffer): void {
    c.buf = c.buf.length === 0 ? chunk : Buffer.concat([c.buf, chunk]);
    while (c.buf.length > 0 && !c.closed) {
      const end = c.buf.indexOf(CRLFCRLF);
      if (end < 0) {
        if (c.buf.length > MAX_HEAD) this.#fail(c, new Error('answer head over 16 KiB'));
        return;
      }
      const head = c.buf.toString('latin1', 0, end);
      // "HTTP/1.1 200 OK"
      if (!/^HTTP\/1\.[01] [0-9]{3}/.test(head)) {
        this.#fail(c, new Error(`not an HTTP/1.x answer: ${JSON.stringify(head.slice(0, 40))}`));
        return;
      }
      const status = Number(head.slice(9, 12));
      let body: string;
      let total: number;
      if (/\r\ntransfer-encoding:[ \t]*chunked[ \t]*(?:\r\n|$)/i.test(head)) {
        const read = readChunked(c.buf, end + 4);
        if (read === null) {
          if (c.buf.length - end > MAX_BODY) this.#fail(c, new Error('answer body over 8 MiB'));
          return;
        }
        if (read === BAD_CHUNKS) {
          this.#fail(c, new Error('a chunked answer that does not parse'));
          return;
        }
        ({ body, total } = read);
      } else {
        const m = /\r\ncontent-length:[ \t]*([0-9]{1,10})[ \t]*(?:\r\n|$)/i.exec(head);
        if (m === null || /\r\ntransfer-encoding:/i.test(head)) {
          this.#fail(c, new Error('an answer without Content-Length or chunked framing'));
          return;
        }
        const length = Number(m[1]);
        if (length > MAX_BODY) {
          this.#fail(c, new Error('answer body over 8 MiB'));
          return;
        }
        total = end + 4 + length;
        if (c.buf.length < total) return;
        body = c.buf.toString('utf8', end + 4, total);
      }
      c.buf = c.buf.length === total ? Buffer.alloc(0) : c.buf.subarray(total);
      const cb = c.waiting[c.head];
      if (cb === undefined) {
        this.#fail(c, new Error('an answer to no request'));
        return;
      }
      c.waiting[c.head] = NOOP;
      c.head++;
      if (c.head === c.waiting.length) {
        c.waiting.length = 0;
        c.sentAt.length = 0;
        c.head = 0;
      }
      if (/\r\nconnection:[ \t]*close/i.test(head) || head.startsWith('HTTP/1.0')) c.draining = true;
      this.#inFlight--;
      cb(null, status, body);
      if (c.draining && c.inFlight === 0) this.#fail(c, new Error('closed by the replica'));
      this.#drain();
    }
  }

  /** Fails every request waiting on `c` and drops it. */
  #fail(c: Connection, err: Error): void {
    if (c.closed) return;
    c.closed = true;
    c.socket.destroy();
    const i = this.#conns.indexOf(c);
    if (i >= 0) this.#conns.splice(i, 1);
    const waiting = c.waiting.slice(c.head);
    c.waiting.length = 0;
    c.sentAt.length = 0;
    c.head = 0;
    this.#inFlight -= waiting.length;
    for (const cb of waiting) cb(err, 0, '');
    if (this.#closed) {
      for (const q of this.#queue.slice(this.#queueHead)) q.cb(err, 0, '');
      this.#queue = [];
      this.#queueHead = 0;
    }
    this.#drain();
    if (this.#conns.length === 0 && this.queued === 0 && this.#timer !== null) {
      clearInterval(this.#timer);
      this.#timer = null;
    }
  }

  #checkTimeouts(): void {
    const limit = performance.now() - this.#timeoutMs;
    for (const c of [...this.#conns]) {
      if (c.inFlight > 0 && c.sentAt[c.head]! < limit) this.#fail(c, new Error(`no answer within ${this.#timeoutMs} ms`));
    }
    // Waiting requests: the ones not wanted any more go now (a stalled replica must not grow
    // the queue without bound), the others fail after the same timeout.
    if (this.queued > 0) {
      const keep: Queued[] = [];
      for (const q of this.#queue.slice(this.#queueHead)) {
        if (q.live !== null && !q.live()) q.cb(CANCELLED, 0, '');
        else if (q.at < limit) q.cb(new Error(`not sent within ${this.#timeoutMs} ms`), 0, '');
        else keep.push(q);
      }
      this.#queue = keep;
      this.#queueHead = 0;
    }
  }

  /** Closes every connection; the requests waiting fail. */
  close(): void {
    this.#closed = true;
    for (const q of this.#queue.slice(this.#queueHead)) q.cb(new Error('closed'), 0, '');
    this.#queue = [];
    this.#queueHead = 0;
    for (const c of [...this.#conns]) this.#fail(c, new Error('closed'));
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }
}

const NOOP: Http1Callback = () => undefined;
const DONE: Queued = { body: new Uint8Array(0), cb: NOOP, live: null, at: 0 };
const BAD_CHUNKS = Symbol('bad chunks');
const CRLF = Buffer.from('\r\n');

/**
 * A chunked body starting at `from`: its text and the end of the answer, null while incomplete,
 * `BAD_CHUNKS` when it does not parse. Trailers are read and dropped.
 */
function readChunked(buf: Buffer, from: number): { body: string; total: number } | null | typeof BAD_CHUNKS {
  const parts: Buffer[] = [];
  let pos = from;
  let size = 0;
  for (;;) {
    const eol = buf.indexOf(CRLF, pos);
    if (eol < 0) return eol - pos > 64 ? BAD_CHUNKS : null;
    const line = buf.toString('latin1', pos, eol);
    const m = /^([0-9a-fA-F]{1,8})(?:;.*)?$/.exec(line);
    if (m === null) return BAD_CHUNKS;
    const n = parseInt(m[1]!, 16);
    if (n === 0) {
      // Trailers, if any, end with an empty line.
      const after = eol + 2;
      if (buf.length < after + 2) return null;
      if (buf[after] === 13 && buf[after + 1] === 10) return { body: Buffer.concat(parts).toString('utf8'), total: after + 2 };
      const end = buf.indexOf(CRLFCRLF, after);
      return end < 0 ? null : { body: Buffer.concat(parts).toString('utf8'), total: end + 4 };
    }
    size += n;
    if (size > MAX_BODY) return BAD_CHUNKS;
    const dataEnd = eol + 2 + n;
    if (buf.length < dataEnd + 2) return null;
    if (buf[dataEnd] !== 13 || buf[dataEnd + 1] !== 10) return BAD_CHUNKS;
    parts.push(buf.subarray(eol + 2, dataEnd));
    pos = dataEnd + 2;
  }
}
