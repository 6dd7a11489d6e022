/**
 * A fastify instance that logs through the process's pino logger without a line per request
 * (a scrape every few seconds, or thousands of lookups a second, would fill the log).
 *
 * Why a LogController: fastify 5.12 deprecated the top-level `disableRequestLogging` option and
 * printed a deprecation warning (FSTDEP023) on stderr at every `kvindex serve` start; the
 * controller is the supported form of the same setting.
 */
import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';

export function quietFastify(logger: Logger): FastifyInstance {
  return fastify({
    loggerInstance: logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
  }) as unknown as FastifyInstance;
}
