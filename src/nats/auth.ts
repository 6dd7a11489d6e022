/**
 * NATS credentials and TLS for kvindex's connections, and the redaction that keeps them out of
 * logs and errors.
 *
 * Credentials come from, in this order: the options, the server URL (`nats://user:pass@host` or
 * `nats://token@host`), then environment variables (table below). The URL's user info is always
 * stripped before the URL reaches nats.js or any message, so the rest of the code only ever sees
 * redacted URLs; `scrub()` also removes the secret values themselves from any text, for errors
 * whose wording we do not control.
 *
 * | option          | environment                    |
 * |-----------------|--------------------------------|
 * | `user`/`pass`   | `NATS_AUTH_USERNAME`, `NATS_AUTH_PASSWORD` |
 * | `token`         | `NATS_AUTH_TOKEN`              |
 * | `credsFile`     | `NATS_AUTH_CREDENTIALS_FILE`   |
 * | `nkeySeedFile`  | `NATS_AUTH_NKEY_SEED_FILE`     |
 * | `tls.caFile`    | `NATS_TLS_CA_FILE`             |
 * | `tls.certFile`  | `NATS_TLS_CERT_FILE`           |
 * | `tls.keyFile`   | `NATS_TLS_KEY_FILE`            |
 */

import { readFileSync } from 'node:fs';
import { credsAuthenticator, nkeyAuthenticator, type ConnectionOptions } from 'nats';
import { ErrorCode, KvIndexError } from '../errors.js';

/** TLS files (PEM). A CA alone verifies the server; a certificate and key authenticate kvindex. */
export interface NatsTlsOptions {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

/** How kvindex authenticates to NATS. Unset fields fall back to the URL, then the environment. */
export interface NatsAuthOptions {
  user?: string;
  pass?: string;
  token?: string;
  /** A `.creds` file (user JWT and NKey seed), as written by `nsc`. */
  credsFile?: string;
  /** A file holding an NKey user seed (`SU...`). */
  nkeySeedFile?: string;
  /** TLS files; setting any of them turns TLS on. */
  tls?: NatsTlsOptions;
}

/** What `connect()` needs: URLs without user info, the auth fields, and the secrets to scrub. */
export interface ResolvedAuth {
  servers: string[];
  connect: Pick<ConnectionOptions, 'user' | 'pass' | 'token' | 'authenticator' | 'tls'>;
  /** Secret strings (password, token, seed) that must never appear in a message. */
  secrets: string[];
  /** How the connection authenticates, for logs: 'none', 'user', 'token', 'creds', 'nkey'. */
  method: string;
  tls: boolean;
}

/**
 * The user info of a URL: everything up to its last `@`. Not RFC 3986's rule (user info ends
 * at the first `/`), because operators paste raw passwords and tokens, and base64 ones hold
 * `/`: with the RFC's rule `nats://alice:Sec/ret@host` kept its password in every log line
 * (found by fuzzing). A NATS URL has no path, so an `@` is never anything else's.
 */
const USERINFO = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)?([\s\S]*)@/;

/** The URL with any user info replaced by `***` (safe to log). */
export function redactUrl(url: string): string {
  return url.replace(USERINFO, (_m, scheme: string | undefined) => `${scheme ?? ''}***@`);
}

/** `text` with every secret (and its URL-encoded form) replaced by `***`. */
export function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) {
    if (s === '') continue;
    out = out.split(s).join('***');
    const enc = encodeURIComponent(s);
    if (enc !== s) out = out.split(enc).join('***');
  }
  return out;
}

function splitUserInfo(url: string): { url: string; user: string | null; pass: string | null } {
  const m = USERINFO.exec(url);
  if (m === null) return { url, user: null, pass: null };
  const info = m[2] ?? '';
  const rest = url.slice(m[0].length);
  const stripped = `${m[1] ?? ''}${rest}`;
  const colon = info.indexOf(':');
  const dec = (s: string): string => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  if (colon < 0) return { url: stripped, user: dec(info), pass: null };
  return { url: stripped, user: dec(info.slice(0, colon)), pass: dec(info.slice(colon + 1)) };
}

function readSecretFile(what: string, path: string): Uint8Array {
  try {
    return readFileSync(path);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new KvIndexError(ErrorCode.InvalidOption, `${what}: cannot read ${path} (${typeof code === 'string' ? code : 'error'})`);
  }
}

/**
 * Resolves credentials and TLS for `servers` (already split into URLs). Throws `KvIndexError`
 * `InvalidOption` for an unreadable file or a certificate without its key; its message never holds
 * a secret.
 */
export function resolveAuth(servers: readonly string[], options: NatsAuthOptions = {}, env: NodeJS.ProcessEnv = process.env): ResolvedAuth {
  let urlUser: string | null = null;
  let urlPass: string | null = null;
  const stripped = servers.map((s) => {
    const p = splitUserInfo(s);
    if (p.user !== null && urlUser === null) {
      urlUser = p.user;
      urlPass = p.pass;
    }
    return p.url;
  });
  const envStr = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v === '' ? undefined : v;
  };
  // A URL with user info and no password carries a token (`nats://token@host`), as nats-server reads it.
  const fromUrlToken = urlUser !== null && urlPass === null ? urlUser : undefined;
  const fromUrlUser = urlUser !== null && urlPass !== null ? urlUser : undefined;
  const user = options.user ?? fromUrlUser ?? envStr('NATS_AUTH_USERNAME');
  const pass = options.pass ?? (fromUrlUser !== undefined ? (urlPass ?? undefined) : undefined) ?? envStr('NATS_AUTH_PASSWORD');
  const token = options.token ?? fromUrlToken ?? envStr('NATS_AUTH_TOKEN');
  const credsFile = options.credsFile ?? envStr('NATS_AUTH_CREDENTIALS_FILE');
  const nkeySeedFile = options.nkeySeedFile ?? envStr('NATS_AUTH_NKEY_SEED_FILE');
  const tlsIn: NatsTlsOptions = {
    ...pick('caFile', options.tls?.caFile ?? envStr('NATS_TLS_CA_FILE')),
    ...pick('certFile', options.tls?.certFile ?? envStr('NATS_TLS_CERT_FILE')),
    ...pick('keyFile', options.tls?.keyFile ?? envStr('NATS_TLS_KEY_FILE')),
  };
  if ((tlsIn.certFile === undefined) !== (tlsIn.keyFile === undefined)) {
    throw new KvIndexError(ErrorCode.InvalidOption, 'tls: certFile and keyFile go together (a client certificate needs its key)');
  }
  const secrets: string[] = [];
  const connect: ResolvedAuth['connect'] = {};
  let method = 'none';
  if (credsFile !== undefined) {
    const bytes = readSecretFile('credsFile', credsFile);
    connect.authenticator = credsAuthenticator(bytes);
    method = 'creds';
  } else if (nkeySeedFile !== undefined) {
    const seed = new TextDecoder().decode(readSecretFile('nkeySeedFile', nkeySeedFile)).trim();
    secrets.push(seed);
    connect.authenticator = nkeyAuthenticator(new TextEncoder().encode(seed));
    method = 'nkey';
  } else if (token !== undefined) {
    connect.token = token;
    secrets.push(token);
    method = 'token';
  } else if (user !== undefined) {
    connect.user = user;
    if (pass !== undefined) {
      connect.pass = pass;
      secrets.push(pass);
    }
    method = 'user';
  }
  const tls = Object.keys(tlsIn).length > 0;
  if (tls) {
    // Read here, not by nats.js, so a missing file is an option error rather than a connect failure.
    connect.tls = {
      ...(tlsIn.caFile === undefined ? {} : { ca: new TextDecoder().decode(readSecretFile('tls.caFile', tlsIn.caFile)) }),
      ...(tlsIn.certFile === undefined ? {} : { cert: new TextDecoder().decode(readSecretFile('tls.certFile', tlsIn.certFile)) }),
      ...(tlsIn.keyFile === undefined ? {} : { key: new TextDecoder().decode(readSecretFile('tls.keyFile', tlsIn.keyFile)) }),
    };
  }
  return { servers: stripped, connect, secrets, method, tls };
}

function pick<K extends string>(key: K, v: string | undefined): Partial<Record<K, string>> {
  return v === undefined ? {} : ({ [key]: v } as Record<K, string>);
}
