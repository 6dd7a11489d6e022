/**
 * The NATS credential and TLS flags shared by `kvindex serve` and `kvindex gateway --nats`:
 * their parseArgs entries, their usage lines and the `NatsAuthOptions` they make. Secrets are
 * read from files (never the command line) and never echoed in a usage error.
 */
import { readFileSync } from 'node:fs';
import type { NatsAuthOptions } from '../nats/auth.js';
import { UsageError } from './usage.js';

/** parseArgs entries of the flags. */
export const NATS_AUTH_FLAGS = {
  'nats-user': { type: 'string' },
  'nats-password-file': { type: 'string' },
  'nats-token-file': { type: 'string' },
  'nats-creds': { type: 'string' },
  'nats-nkey-seed': { type: 'string' },
  'tls-ca': { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
} as const;

/** Their usage lines (after a `--nats <url>` line). */
export const NATS_AUTH_USAGE = `  --nats-user <name>         NATS user (default: $NATS_AUTH_USERNAME); the password comes from
                             --nats-password-file, the URL or $NATS_AUTH_PASSWORD
  --nats-password-file <f>   file holding the NATS password (kept off the command line)
  --nats-token-file <f>      file holding a NATS token (else the URL or $NATS_AUTH_TOKEN)
  --nats-creds <f>           NATS credentials file, JWT + NKey (default: $NATS_AUTH_CREDENTIALS_FILE)
  --nats-nkey-seed <f>       file holding an NKey user seed (default: $NATS_AUTH_NKEY_SEED_FILE)
  --tls-ca <f>               CA certificate (PEM) that signed the NATS server's (default: $NATS_TLS_CA_FILE)
  --tls-cert <f>, --tls-key <f>
                             client certificate and key (PEM) for servers that verify clients
                             (default: $NATS_TLS_CERT_FILE, $NATS_TLS_KEY_FILE)
`;

type Values = Partial<Record<keyof typeof NATS_AUTH_FLAGS, string | undefined>>;

/** True if any of the flags is set. */
export function anyNatsAuthFlag(values: Values): boolean {
  return Object.keys(NATS_AUTH_FLAGS).some((k) => values[k as keyof Values] !== undefined);
}

/** The credentials and TLS the flags name; a secret file that cannot be read is a `UsageError`. */
export function natsAuthFromFlags(values: Values): NatsAuthOptions {
  const secretFile = (name: string, path: string | undefined): string | undefined => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path, 'utf8').trim();
    } catch (err) {
      throw new UsageError(`--${name}: cannot read ${path} (${String((err as { code?: unknown }).code ?? 'error')})`);
    }
  };
  const tls = {
    ...(values['tls-ca'] === undefined ? {} : { caFile: values['tls-ca'] }),
    ...(values['tls-cert'] === undefined ? {} : { certFile: values['tls-cert'] }),
    ...(values['tls-key'] === undefined ? {} : { keyFile: values['tls-key'] }),
  };
  const pass = secretFile('nats-password-file', values['nats-password-file']);
  const token = secretFile('nats-token-file', values['nats-token-file']);
  return {
    ...(values['nats-user'] === undefined ? {} : { user: values['nats-user'] }),
    ...(pass === undefined ? {} : { pass }),
    ...(token === undefined ? {} : { token }),
    ...(values['nats-creds'] === undefined ? {} : { credsFile: values['nats-creds'] }),
    ...(values['nats-nkey-seed'] === undefined ? {} : { nkeySeedFile: values['nats-nkey-seed'] }),
    ...(Object.keys(tls).length === 0 ? {} : { tls }),
  };
}
