/**
 * On-demand loading of the adapter's optional dependencies. `zeromq` (a native addon, 34 MB
 * unpacked) and `@msgpack/msgpack` are `optionalDependencies`: the core package, and every test
 * outside the ZMQ ones, work without them. Each is imported once, on first use; a missing one
 * throws `ZmqError` `DependencyMissing` naming the package to install.
 */

import { ZmqError, ZmqErrorCode } from './errors.js';

export type ZeromqModule = typeof import('zeromq');
export type MsgpackModule = typeof import('@msgpack/msgpack');

let zeromq: Promise<ZeromqModule> | null = null;
let msgpack: Promise<MsgpackModule> | null = null;

function missing(name: string, err: unknown): ZmqError {
  return new ZmqError(
    ZmqErrorCode.DependencyMissing,
    `kvindex/zmq needs the optional dependency '${name}': run 'npm install ${name}'`,
    { cause: err },
  );
}

/** The `zeromq` module (6.x). Throws `ZmqError` `DependencyMissing` when it is not installed. */
export function loadZeromq(): Promise<ZeromqModule> {
  zeromq ??= import('zeromq').catch((err: unknown) => {
    zeromq = null;
    throw missing('zeromq', err);
  });
  return zeromq;
}

/** The `@msgpack/msgpack` module. Throws `ZmqError` `DependencyMissing` when it is not installed. */
export function loadMsgpack(): Promise<MsgpackModule> {
  msgpack ??= import('@msgpack/msgpack').catch((err: unknown) => {
    msgpack = null;
    throw missing('@msgpack/msgpack', err);
  });
  return msgpack;
}
