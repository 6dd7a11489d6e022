/** The start-up check of the ZMQ adapter's optional dependencies, shared by `serve --http` and `gateway`. */
import type { Logger } from 'pino';
import { ZmqErrorCode } from '../zmq/errors.js';
import { loadMsgpack, loadZeromq } from '../zmq/load.js';

/**
 * One WARN line at start-up when an optional dependency of the ZMQ adapter is missing (an
 * install with --omit=optional, or a platform where zeromq's addon did not build): the server
 * still starts (lookups of an empty index, /health), and /register answers 503
 * KVX_ZMQ_DEPENDENCY_MISSING until the package is installed and the server restarted.
 */
export async function warnIfZmqMissing(logger: Logger): Promise<void> {
  const missing: string[] = [];
  const probes: Array<[string, () => Promise<unknown>]> = [['zeromq', loadZeromq], ['@msgpack/msgpack', loadMsgpack]];
  for (const [name, load] of probes) await load().catch(() => missing.push(name));
  if (missing.length === 0) return;
  logger.warn(
    { code: ZmqErrorCode.DependencyMissing, missing, install: `npm install ${missing.join(' ')}` },
    `engine events over ZMQ are unavailable: the optional dependency ${missing.map((m) => `'${m}'`).join(' and ')} is not installed; /register answers 503 until it is (run 'npm install ${missing.join(' ')}' and restart)`,
  );
}
