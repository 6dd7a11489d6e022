/** What the server commands (`serve`, `serve --http`, `gateway`) share in reading their flags. */

/** A bad flag: the command prints its usage and exits 2. */
export class UsageError extends Error {}

/** pino's levels, as `--log-level` takes them. */
const LOG_LEVELS: readonly string[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** `--log-level`'s value (default `info`); throws `UsageError` for anything pino does not know. */
export function logLevelArg(text: string | undefined): string {
  const level = text ?? 'info';
  if (!LOG_LEVELS.includes(level)) throw new UsageError(`--log-level: expected debug, info, warn or error, got '${level}'`);
  return level;
}
