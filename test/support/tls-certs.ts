/**
 * A throwaway certificate authority for TLS tests, made with the `openssl` CLI: a CA, a server
 * certificate for 127.0.0.1 and a client certificate, all in a temporary folder.
 */

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCerts {
  dir: string;
  caFile: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A second CA that signed nothing here: trusting only it must fail verification. */
  otherCaFile: string;
  remove(): void;
}

export function opensslInstalled(): boolean {
  const r = spawnSync('openssl', ['version'], { stdio: 'ignore' });
  return r.error === undefined && r.status === 0;
}

function run(dir: string, args: string[]): void {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${r.stderr}`);
}

/** Generates the certificates (EC P-256 keys, valid one day). */
export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'kvindex-tls-'));
  const key = (name: string): void => run(dir, ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', name]);
  const ca = (name: string, keyName: string, cn: string): void => {
    key(keyName);
    run(dir, ['req', '-x509', '-new', '-key', keyName, '-sha256', '-days', '1', '-subj', `/CN=${cn}`, '-out', name]);
  };
  ca('ca.pem', 'ca-key.pem', 'kvindex test CA');
  ca('other-ca.pem', 'other-ca-key.pem', 'kvindex other CA');
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  const leaf = (name: string, cn: string, ext: string): void => {
    key(`${name}-key.pem`);
    run(dir, ['req', '-new', '-key', `${name}-key.pem`, '-subj', `/CN=${cn}`, '-out', `${name}.csr`]);
    run(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-days', '1', '-sha256', '-extfile', ext, '-out', `${name}.pem`]);
  };
  leaf('server', '127.0.0.1', 'server.ext');
  leaf('client', 'kvindex-router', 'client.ext');
  return {
    dir,
    caFile: join(dir, 'ca.pem'),
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server-key.pem'),
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client-key.pem'),
    otherCaFile: join(dir, 'other-ca.pem'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
