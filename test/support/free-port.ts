/**
 * Loopback ports for servers a test starts on a port of its choosing (nats-server, restarted on
 * the same port) and for "closed" ports nothing listens on (a replica or a NATS server that is
 * down). Picked below the kernel's ephemeral range, and checked free by binding it once.
 *
 * Why not port 0: a port from bind(0) comes from the ephemeral range, where every other
 * `listen(0)` and every outgoing connection on the host draws its ports at random too. Released,
 * it can be taken by any of them before the test uses it (a closed port then answers, a restarted
 * nats-server finds its port busy). Estimated, not seen: ~28,000 ephemeral ports, and tens of
 * listeners started by the other vitest worker while a port stays "closed" for a whole file,
 * make it about one run in a thousand. Below the range, only a process that asks for that very
 * port can take it.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Lowest ephemeral port (Linux: /proc/sys/net/ipv4/ip_local_port_range; 32768 elsewhere). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** True if `port` can be bound on 127.0.0.1 now (then released at once). */
function bindable(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = createServer();
    s.once('error', () => res(false));
    s.listen(port, '127.0.0.1', () => s.close(() => res(true)));
  });
}

/** A port that nothing listens on now, outside the ephemeral range when there is room below it. */
export async function freePort(): Promise<number> {
  const high = ephemeralLow();
  const low = Math.max(10_000, high - 20_000);
  if (high - low >= 1_000) {
    for (let i = 0; i < 100; i++) {
      const port = low + Math.floor(Math.random() * (high - low));
      if (await bindable(port)) return port;
    }
  }
  // No room below the range (or 100 ports busy): fall back to one the kernel picks.
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      s.close(() => res(port));
    });
  });
}
