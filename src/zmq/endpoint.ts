/**
 * ZMQ endpoint strings: validation, and vLLM's data-parallel offset (`offset_endpoint_port`:
 * a tcp port moves up by the rank, an inproc name gets `_dp<rank>`; each rank has its own
 * publisher, its own seq counter and its own replay socket).
 */

import { ZmqError, ZmqErrorCode } from './errors.js';
import { clipText } from '../protocol/show-value.js';

const TCP = /^tcp:\/\/(\[[0-9a-fA-F:.]+\]|[^:/\s]+):(\d{1,5})$/;

/** Throws `ZmqError` `BadEndpoint` unless `tcp://host:port`, `ipc://path` or `inproc://name`. */
export function checkEndpoint(endpoint: unknown, field = 'endpoint'): string {
  if (typeof endpoint !== 'string') throw new ZmqError(ZmqErrorCode.BadEndpoint, `${field}: expected a string`);
  const m = TCP.exec(endpoint);
  if (m !== null) {
    const port = Number(m[2]);
    // Port 0 is for binding to a free port (tests, `kvindex serve` on an ephemeral port).
    if (port > 65535) throw new ZmqError(ZmqErrorCode.BadEndpoint, `${field}: port ${m[2]} is outside 0..65535`);
    return endpoint;
  }
  if (/^(ipc|inproc):\/\/\S+$/.test(endpoint)) return endpoint;
  throw new ZmqError(ZmqErrorCode.BadEndpoint, `${field}: '${clipText(endpoint)}' is not tcp://host:port, ipc://path or inproc://name`);
}

/** The endpoint of data-parallel rank `rank` (rank 0: unchanged), as vLLM offsets it. */
export function offsetEndpoint(endpoint: string, rank: number): string {
  checkEndpoint(endpoint);
  if (rank === 0) return endpoint;
  const m = TCP.exec(endpoint);
  if (m !== null) {
    const port = Number(m[2]) + rank;
    if (port > 65535) throw new ZmqError(ZmqErrorCode.BadEndpoint, `endpoint ${clipText(endpoint)}: rank ${rank} moves the port past 65535`);
    return `tcp://${m[1]}:${port}`;
  }
  if (endpoint.startsWith('inproc://')) return `${endpoint}_dp${rank}`;
  // vLLM leaves ipc paths as they are; so does this.
  return endpoint;
}
