/**
 * The floor under a sharded lookup on this machine: the same round trip with no indexer. The
 * main thread posts a number to each of N idle threads over its own MessagePort; each thread
 * counts itself in on a SharedArrayBuffer and the last one wakes the main thread with
 * `Atomics.notify`, awaited with `Atomics.waitAsync` (the product's channel, minus the tree, the
 * request copy and the merge). Whatever a product lookup takes beyond this is ours; the rest is
 * thread wake-up, which on a 2-core VM is tens of microseconds per hop.
 */
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';

const THREAD_CODE = `
const { workerData } = require('node:worker_threads');
const counter = new Int32Array(workerData.sab);
workerData.port.on('message', () => {
  if (Atomics.add(counter, 0, 1) + 1 === workerData.threads) Atomics.notify(counter, 0);
});
`;

export class RoundTrip {
  private readonly counter: Int32Array;

  private constructor(private readonly workers: Worker[], private readonly ports: MessagePort[], sab: SharedArrayBuffer) {
    this.counter = new Int32Array(sab);
  }

  static async start(threads: number): Promise<RoundTrip> {
    const sab = new SharedArrayBuffer(4);
    const workers: Worker[] = [];
    const ports: MessagePort[] = [];
    for (let i = 0; i < threads; i++) {
      const { port1, port2 } = new MessageChannel();
      workers.push(new Worker(THREAD_CODE, { eval: true, workerData: { sab, threads, port: port2 }, transferList: [port2] }));
      ports.push(port1);
    }
    await Promise.all(workers.map((w) => new Promise((res) => w.once('online', res))));
    return new RoundTrip(workers, ports, sab);
  }

  /** One round trip through every thread. */
  async ping(): Promise<void> {
    const c = this.counter;
    const n = this.ports.length;
    Atomics.store(c, 0, 0);
    for (const p of this.ports) p.postMessage(0);
    for (;;) {
      const seen = Atomics.load(c, 0);
      if (seen >= n) return;
      const r = Atomics.waitAsync(c, 0, seen);
      if (r.async) await r.value;
    }
  }

  async close(): Promise<void> {
    for (const p of this.ports) p.close();
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
