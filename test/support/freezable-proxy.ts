/**
 * A TCP proxy on a free loopback port that forwards to `127.0.0.1:<target>` until `freeze()`,
 * after which it keeps every connection open but passes nothing either way: a peer that hangs
 * (a frozen NATS server, a stuck network path) as the client sees it.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class FreezableProxy {
  readonly port: number;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #frozen = false;

  private constructor(server: Server, port: number) {
    this.#server = server;
    this.port = port;
  }

  /** Listens on 127.0.0.1 (a free port) and forwards each connection to `targetPort`. */
  static async start(targetPort: number): Promise<FreezableProxy> {
    let proxy: FreezableProxy | null = null;
    const server = createServer((client) => {
      const upstream = connect(targetPort, '127.0.0.1');
      for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
        proxy!.#sockets.add(from);
        from.on('data', (d: Buffer) => {
          if (!proxy!.#frozen) to.write(d);
        });
        from.on('error', () => to.destroy());
        from.on('close', () => to.destroy());
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy = new FreezableProxy(server, (server.address() as { port: number }).port);
    return proxy;
  }

  /** From now on, bytes are dropped in both directions; connections stay open. */
  freeze(): void {
    this.#frozen = true;
  }

  close(): void {
    for (const s of this.#sockets) s.destroy();
    this.#server.close();
  }
}
