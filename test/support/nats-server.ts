/**
 * A real `nats-server` (JetStream on) for integration tests: a free loopback port below the
 * ephemeral range (free-port.ts), a temporary JetStream folder, readiness by reading the server's INFO line,
 * and `kill()` / `restart()` that keep the port and the folder, so a test can crash the server
 * mid-stream and bring it back with its data. `stop()` kills it and removes the folder.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll } from 'vitest';
import { freePort } from './free-port.js';

export { freePort };

/** True when a `nats-server` binary is on PATH (CI installs Debian's package). */
export function natsServerInstalled(): boolean {
  const r = spawnSync('nats-server', ['--version'], { stdio: 'ignore' });
  return r.error === undefined && r.status === 0;
}

/** Message printed when an integration suite is skipped. */
export const NATS_SKIP_MESSAGE =
  'nats-server is not installed: NATS integration tests skipped (apt-get install nats-server)';

export class NatsServer {
  readonly port: number;
  readonly url: string;
  readonly storeDir: string;
  private proc: ChildProcess | null = null;
  private log = '';
  private readonly extraArgs: readonly string[];

  private constructor(port: number, storeDir: string, extraArgs: readonly string[]) {
    this.port = port;
    this.url = `nats://127.0.0.1:${port}`;
    this.storeDir = storeDir;
    this.extraArgs = extraArgs;
  }

  /**
   * Starts a server on a free loopback port with a fresh JetStream folder; `extraArgs` are added
   * to the command line (e.g. `--user u --pass p`, `--auth <token>`, `--tls ...`).
   */
  static async start(extraArgs: readonly string[] = []): Promise<NatsServer> {
    const server = new NatsServer(await freePort(), mkdtempSync(join(tmpdir(), 'kvindex-nats-')), extraArgs);
    await server.spawn();
    return server;
  }

  /** The server's own output so far (stdout and stderr), for failure messages. */
  get output(): string {
    return this.log;
  }

  /** SIGKILLs the server (no clean shutdown) and waits until the process is gone. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (p === null) return;
    this.proc = null;
    if (p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((res) => {
      p.once('exit', () => res());
      p.kill('SIGKILL');
    });
  }

  /** Starts the server again on the same port with the same JetStream folder. */
  async restart(): Promise<void> {
    await this.kill();
    await this.spawn();
  }

  /** Kills the server and removes its JetStream folder. */
  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.storeDir, { recursive: true, force: true });
  }

  private async spawn(attempt = 0): Promise<void> {
    const p = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.storeDir, ...this.extraArgs], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer): void => {
      this.log = (this.log + chunk.toString()).slice(-20_000);
    };
    p.stdout?.on('data', keep);
    p.stderr?.on('data', keep);
    this.proc = p;
    const deadline = Date.now() + 10_000;
    // The port can stay busy for a moment after a kill; the server then exits and is retried.
    while (Date.now() < deadline) {
      if (p.exitCode !== null) {
        if (attempt >= 20) break;
        await delay(100);
        return this.spawn(attempt + 1);
      }
      if (await acceptsConnections(this.port)) return;
      await delay(50);
    }
    await this.kill();
    throw new Error(`nats-server on port ${this.port} did not start:\n${this.log}`);
  }
}

/** Connects and waits for the server's `INFO` greeting (JetStream is up once it is sent). */
function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((res) => {
    const sock = createConnection({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      sock.destroy();
      res(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.once('error', () => done(false));
    sock.once('data', (d) => done(d.toString().startsWith('INFO')));
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((res) => setTimeout(res, ms));
}

/** A server and a client connection shared by the tests of one `describe` block. */
export interface NatsTestEnv {
  readonly server: NatsServer;
  readonly nc: NatsConnection;
}

/**
 * Starts a server and connects a client before the block's tests, and closes both after them.
 * Call it inside the `describe` callback; read the fields inside tests (they are set by then).
 */
export function useNatsServer(): NatsTestEnv {
  let server: NatsServer | null = null;
  let nc: NatsConnection | null = null;
  beforeAll(async () => {
    server = await NatsServer.start();
    nc = await connect({ servers: server.url });
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });
  const started = <T>(v: T | null): T => {
    if (v === null) throw new Error('useNatsServer: read its fields inside a test, after beforeAll');
    return v;
  };
  return {
    get server() {
      return started(server);
    },
    get nc() {
      return started(nc);
    },
  };
}
