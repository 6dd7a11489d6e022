/**
 * NATS security against real nats-server processes: user/password (as options and inside the
 * URL), a token, an NKey, a `.creds` file against a server in operator mode (JWTs signed in the
 * test), TLS with a client certificate (certificates made by openssl in the test).
 * Refused credentials are `KVX_NATS_AUTH_FAILED` at once (not retried for the whole budget and
 * called unreachable), and no password or token ever appears in a log line or an error message.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nkeys, type NatsConnection } from 'nats';
import type { Logger } from 'pino';
import { connectNats, resolveServers } from '../src/nats/connect.js';
import { redactUrl, resolveAuth, scrub } from '../src/nats/auth.js';
import { NatsErrorCode } from '../src/nats/errors.js';
import { KvEventPublisher } from '../src/nats/publisher.js';
import { KvEventSubscriber } from '../src/nats/subscriber.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { captureLog } from './support/log-capture.js';
import { freePort, NATS_SKIP_MESSAGE, NatsServer, natsServerInstalled } from './support/nats-server.js';
import { makeTestCerts, opensslInstalled, type TestCerts } from './support/tls-certs.js';
import { operatorSetup } from './support/nats-jwt.js';

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

const PASSWORD = 'pw-Zq81-never-logged';
const TOKEN = 'tok-8GfX-never-logged';

function stored(id: number, hash: bigint): RouterEvent {
  return { workerId: 7n, event: { eventId: BigInt(id), data: { type: 'stored', parentHash: null, blocks: [{ blockHash: hash, tokensHash: hash }] } } };
}

type NatsAuth = NonNullable<Parameters<typeof KvEventPublisher.connect>[0]['auth']>;

/**
 * Publishes `events` as one client and consumes them as another, each with its own servers and
 * credentials; returns worker 7's score on `probe` once the subscriber applied them all.
 */
async function roundTrip(
  namespace: string, events: RouterEvent[], probe: bigint,
  pubSide: { servers: string; auth?: NatsAuth }, subSide: { servers: string; auth?: NatsAuth; logger?: Logger },
): Promise<number | undefined> {
  const pub = await KvEventPublisher.connect({ namespace, component: 'up', ...pubSide });
  const ix = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
  const sub = await KvEventSubscriber.start({ indexer: ix, namespace, component: 'up', ...subSide });
  try {
    const { lastSeq } = await pub.publishAll(events);
    await sub.waitForSeq(lastSeq, 30_000);
    return (await ix.findMatches([probe])).scores.get(7n);
  } finally {
    await sub.close();
    await pub.close();
    await ix.close();
  }
}

async function codeOf(p: Promise<unknown>): Promise<{ code: unknown; message: string }> {
  try {
    await p;
  } catch (err) {
    return { code: (err as { code?: unknown }).code, message: (err as Error).message };
  }
  throw new Error('expected a rejection');
}

describe('credential redaction (no server)', () => {
  it('strips user info from URLs and reads it as credentials', () => {
    expect(redactUrl(`nats://kv:${PASSWORD}@127.0.0.1:4222`)).toBe('nats://***@127.0.0.1:4222');
    expect(redactUrl('127.0.0.1:4222')).toBe('127.0.0.1:4222');
    const a = resolveAuth([`nats://kv:${encodeURIComponent('p@ss:w/rd')}@127.0.0.1:1`], {}, {});
    expect(a.servers).toEqual(['nats://127.0.0.1:1']);
    expect(a.connect.user).toBe('kv');
    expect(a.connect.pass).toBe('p@ss:w/rd');
    const t = resolveAuth([`nats://${TOKEN}@127.0.0.1:1`], {}, {});
    expect(t.connect.token).toBe(TOKEN);
    expect(t.method).toBe('token');
    expect(scrub(`x ${TOKEN} y ${encodeURIComponent('p@ss')}`, [TOKEN, 'p@ss'])).toBe('x *** y ***');
  });

  it('a raw password or token holding "/" is user info too, and never shown', async () => {
    expect(redactUrl('nats://alice:Sec/ret99@127.0.0.1:1')).toBe('nats://***@127.0.0.1:1');
    expect(redactUrl('tok/en99@127.0.0.1:1')).toBe('***@127.0.0.1:1');
    const a = resolveAuth(['nats://alice:Sec/ret99@127.0.0.1:1'], {}, {});
    expect(a.servers).toEqual(['nats://127.0.0.1:1']);
    expect([a.connect.user, a.connect.pass]).toEqual(['alice', 'Sec/ret99']);
    expect(resolveAuth(['nats://tok/en99@127.0.0.1:1'], {}, {}).connect.token).toBe('tok/en99');
    // End to end against a closed loopback port: the failure names the URL without the secret.
    const port = await freePort();
    const { code, message } = await codeOf(connectNats({ servers: `nats://alice:Sec/ret99@127.0.0.1:${port}`, connectTimeoutMs: 300 }));
    expect(code).toBe(NatsErrorCode.Unreachable);
    expect(message).toContain(`nats://127.0.0.1:${port}`);
    expect(message).not.toMatch(/Sec|ret99|alice/);
  });

  it('a comma that may sit inside user info is refused, without the URL in the error', () => {
    for (const list of ['nats://alice:Sec,ret99@127.0.0.1:1', 'alice:Sec,ret99@127.0.0.1:1', 'nats://tok,en@127.0.0.1:1']) {
      expect(() => resolveServers(list), list).toThrow(expect.objectContaining({ code: 'KVX_INVALID_OPTION' }));
      try {
        resolveServers(list);
      } catch (err) {
        expect((err as Error).message).not.toMatch(/Sec|ret99|alice|tok,|en@/);
      }
    }
    // Lists of URLs stay lists, with or without credentials on each.
    expect(resolveServers('nats://a:1, nats://u:p@b:2')).toEqual(['nats://a:1', 'nats://u:p@b:2']);
    expect(resolveServers('a:1,b:2')).toEqual(['a:1', 'b:2']);
    expect(resolveServers('u:p@a:1,u:p@b:2')).toEqual(['u:p@a:1', 'u:p@b:2']);
    expect(resolveServers(`nats://alice:Sec${encodeURIComponent(',')}ret99@127.0.0.1:1`)).toHaveLength(1);
    // Not a URL at all: an option error at once, without the text (it may hold a secret).
    for (const [list, bad] of [['not a url', 'not a url'], ['nats://127.0.0.1:1,nats://h:p0rt', 'p0rt'], ['nats://s3cr et@h:1 x', 's3cr']] as const) {
      expect(() => resolveServers(list), list).toThrow(expect.objectContaining({ code: 'KVX_INVALID_OPTION', message: expect.not.stringContaining(bad) as unknown }));
    }
    expect(resolveServers('nats://alice:Sec/ret99@127.0.0.1:1')).toHaveLength(1);
  });

  it('takes credentials from the environment when neither options nor the URL give them', () => {
    const a = resolveAuth(['nats://127.0.0.1:1'], {}, { NATS_AUTH_USERNAME: 'envu', NATS_AUTH_PASSWORD: 'envp' });
    expect(a.connect.user).toBe('envu');
    expect(a.connect.pass).toBe('envp');
    const b = resolveAuth(['nats://127.0.0.1:1'], { user: 'opt', pass: 'o' }, { NATS_AUTH_USERNAME: 'envu', NATS_AUTH_PASSWORD: 'envp' });
    expect(b.connect.user).toBe('opt');
  });

  it('rejects an unreadable credentials file and a certificate without a key as option errors', () => {
    expect(() => resolveAuth(['nats://127.0.0.1:1'], { credsFile: '/nonexistent/kv.creds' }, {})).toThrow(expect.objectContaining({ code: 'KVX_INVALID_OPTION' }));
    expect(() => resolveAuth(['nats://127.0.0.1:1'], { tls: { certFile: '/x.pem' } }, {})).toThrow(expect.objectContaining({ code: 'KVX_INVALID_OPTION' }));
  });
});

describe.skipIf(!installed)('NATS with user and password', () => {
  let server: NatsServer;
  beforeAll(async () => {
    server = await NatsServer.start(['--user', 'kvrouter', '--pass', PASSWORD]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('consumes with the credentials given in the URL, and never logs the password', async () => {
    const log = captureLog('trace');
    const url = `nats://kvrouter:${PASSWORD}@127.0.0.1:${server.port}`;
    const score = await roundTrip('auth', [stored(1, 11n), stored(2, 12n)], 11n,
      { servers: server.url, auth: { user: 'kvrouter', pass: PASSWORD } }, { servers: url, logger: log.logger });
    expect(score).toBe(1);
    expect(log.lines().length).toBeGreaterThan(0);
    for (const line of log.lines()) expect(line).not.toContain(PASSWORD);
  });

  it('reports a wrong password as an authorization failure at once, with no secret in the error', async () => {
    const log = captureLog('trace');
    const started = Date.now();
    const r = await codeOf(connectNats({ servers: `nats://kvrouter:wrong-${PASSWORD}@127.0.0.1:${server.port}`, connectTimeoutMs: 60_000, logger: log.logger }));
    expect(r.code).toBe(NatsErrorCode.AuthFailed);
    // Not retried until the 60 s budget ran out (generous bound for a loaded machine).
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(r.message).not.toContain(PASSWORD);
    expect(r.message).toContain(`nats://127.0.0.1:${server.port}`);
    for (const line of log.lines()) expect(line).not.toContain(PASSWORD);
  });

  it('reports missing credentials as an authorization failure too', async () => {
    const r = await codeOf(connectNats({ servers: server.url, connectTimeoutMs: 60_000 }));
    expect(r.code).toBe(NatsErrorCode.AuthFailed);
    expect(r.message).toContain('none were given');
  });
});

describe.skipIf(!installed)('NATS with a token', () => {
  let server: NatsServer;
  beforeAll(async () => {
    server = await NatsServer.start(['--auth', TOKEN]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('connects with the token as an option and inside the URL; a wrong token is refused', async () => {
    const opened: NatsConnection[] = [];
    try {
      opened.push(await connectNats({ servers: server.url, auth: { token: TOKEN } }));
      opened.push(await connectNats({ servers: `nats://${TOKEN}@127.0.0.1:${server.port}` }));
      for (const nc of opened) expect(nc.isClosed()).toBe(false);
    } finally {
      for (const nc of opened) await nc.close();
    }
    const r = await codeOf(connectNats({ servers: server.url, auth: { token: `${TOKEN}-x` }, connectTimeoutMs: 60_000 }));
    expect(r.code).toBe(NatsErrorCode.AuthFailed);
    expect(r.message).not.toContain(TOKEN);
  });
});

describe.skipIf(!installed)('NATS with an NKey user', () => {
  let server: NatsServer;
  let dir: string;
  let seedText: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvindex-nkey-'));
    const user = nkeys.createUser();
    seedText = new TextDecoder().decode(user.getSeed());
    writeFileSync(join(dir, 'user.nk'), `${seedText}\n`);
    writeFileSync(join(dir, 'other.nk'), `${new TextDecoder().decode(nkeys.createUser().getSeed())}\n`);
    writeFileSync(join(dir, 'server.conf'), `authorization { users = [ { nkey: "${user.getPublicKey()}" } ] }\n`);
    server = await NatsServer.start(['-c', join(dir, 'server.conf')]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('connects with the seed file, and refuses another key without printing the seed', async () => {
    const log = captureLog('trace');
    const nc = await connectNats({ servers: server.url, auth: { nkeySeedFile: join(dir, 'user.nk') }, logger: log.logger });
    await nc.close();
    const r = await codeOf(connectNats({ servers: server.url, auth: { nkeySeedFile: join(dir, 'other.nk') }, connectTimeoutMs: 60_000, logger: log.logger }));
    expect(r.code).toBe(NatsErrorCode.AuthFailed);
    expect(r.message).toContain('method: nkey');
    for (const line of [...log.lines(), r.message]) expect(line).not.toContain(seedText);
  });
});

describe.skipIf(!installed || !opensslInstalled())('NATS with TLS and a client certificate', () => {
  let server: NatsServer;
  let certs: TestCerts;
  beforeAll(async () => {
    certs = makeTestCerts();
    server = await NatsServer.start(['--tls', '--tlscert', certs.serverCert, '--tlskey', certs.serverKey, '--tlsverify', '--tlscacert', certs.caFile]);
  });
  afterAll(async () => {
    await server?.stop();
    certs?.remove();
  });

  it('connects with the CA and a client certificate and consumes', async () => {
    const tls = { caFile: certs.caFile, certFile: certs.clientCert, keyFile: certs.clientKey };
    const score = await roundTrip('tls', [stored(1, 21n)], 21n, { servers: server.url, auth: { tls } }, { servers: server.url, auth: { tls } });
    expect(score).toBe(1);
  });

  it('fails with KVX_NATS_TLS_FAILED when the server certificate is not trusted', async () => {
    const r = await codeOf(
      connectNats({ servers: server.url, auth: { tls: { caFile: certs.otherCaFile, certFile: certs.clientCert, keyFile: certs.clientKey } }, connectTimeoutMs: 60_000 }),
    );
    expect(r.code).toBe(NatsErrorCode.TlsFailed);
  });

  it('does not connect without TLS options to a server that requires TLS', async () => {
    const r = await codeOf(connectNats({ servers: server.url, connectTimeoutMs: 60_000 }));
    expect([NatsErrorCode.TlsFailed, NatsErrorCode.AuthFailed]).toContain(r.code);
  });
});

describe.skipIf(!installed)('NATS in operator mode with a .creds file (user JWT + NKey seed)', () => {
  let server: NatsServer;
  let dir: string;
  let seed: string;
  let strangerSeed: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvindex-creds-'));
    const setup = operatorSetup();
    writeFileSync(join(dir, 'server.conf'), setup.serverConf);
    const user = setup.userCreds();
    seed = user.seed;
    writeFileSync(join(dir, 'kv.creds'), user.creds);
    const stranger = setup.strangerCreds();
    strangerSeed = stranger.seed;
    writeFileSync(join(dir, 'stranger.creds'), stranger.creds);
    server = await NatsServer.start(['-c', join(dir, 'server.conf')]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('consumes with the creds file (JetStream in the JWT account), and never logs the seed', async () => {
    const log = captureLog('trace');
    const auth = { credsFile: join(dir, 'kv.creds') };
    const score = await roundTrip('creds', [stored(1, 21n), stored(2, 22n)], 21n, { servers: server.url, auth }, { servers: server.url, auth, logger: log.logger });
    expect(score).toBe(1);
    expect(log.lines().some((l) => l.includes('creds'))).toBe(true);
    for (const line of log.lines()) expect(line).not.toContain(seed);
  });

  it('refuses a user of an account the operator never signed, as an authorization failure without the seed', async () => {
    const log = captureLog('trace');
    const r = await codeOf(connectNats({ servers: server.url, auth: { credsFile: join(dir, 'stranger.creds') }, connectTimeoutMs: 60_000, logger: log.logger }));
    expect(r.code).toBe(NatsErrorCode.AuthFailed);
    expect(r.message).toContain('method: creds');
    for (const line of [...log.lines(), r.message]) expect(line).not.toContain(strangerSeed);
  });
});
