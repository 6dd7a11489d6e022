/**
 * A NATS operator setup for tests, made here without `nsc`: an operator, a system account, an
 * account with JetStream, and users, as signed JWTs (header `ed25519-nkey`, claims version 2),
 * the server configuration that trusts them (memory resolver with the accounts preloaded), and
 * `.creds` files in the layout `nsc` writes. Only what nats-server 2.9+ checks is filled in.
 */
import { randomBytes } from 'node:crypto';
import { nkeys } from 'nats';

type KeyPair = ReturnType<typeof nkeys.createUser>;

const b64u = (b: Uint8Array | string): string => Buffer.from(b).toString('base64url');
const UNLIMITED = { subs: -1, data: -1, payload: -1, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1 };

function signJwt(claims: Record<string, unknown>, signer: KeyPair): string {
  const body = { jti: randomBytes(16).toString('hex').toUpperCase(), iat: Math.floor(Date.now() / 1000), ...claims };
  const head = `${b64u(JSON.stringify({ typ: 'JWT', alg: 'ed25519-nkey' }))}.${b64u(JSON.stringify(body))}`;
  return `${head}.${b64u(signer.sign(Buffer.from(head)))}`;
}

export interface OperatorSetup {
  /** nats-server configuration text (operator mode, accounts preloaded). */
  serverConf: string;
  /** A `.creds` file text for a user of the JetStream account. */
  userCreds(): { creds: string; seed: string };
  /** A `.creds` file text for a user of an account this server does not know. */
  strangerCreds(): { creds: string; seed: string };
}

function credsOf(account: KeyPair): { creds: string; seed: string } {
  const user = nkeys.createUser();
  const seed = new TextDecoder().decode(user.getSeed());
  const jwt = signJwt({ iss: account.getPublicKey(), sub: user.getPublicKey(), name: 'kvindex-test', nats: { pub: {}, sub: {}, subs: -1, data: -1, payload: -1, type: 'user', version: 2 } }, account);
  const creds =
    `-----BEGIN NATS USER JWT-----\n${jwt}\n------END NATS USER JWT------\n\n` +
    '************************* IMPORTANT *************************\nNKEY Seed printed below can be used to sign and prove identity.\n\n' +
    `-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`;
  return { creds, seed };
}

export function operatorSetup(): OperatorSetup {
  const op = nkeys.createOperator();
  const sys = nkeys.createAccount();
  const acc = nkeys.createAccount();
  const opPub = op.getPublicKey();
  const opJwt = signJwt({ iss: opPub, sub: opPub, name: 'test-operator', nats: { type: 'operator', version: 2, system_account: sys.getPublicKey() } }, op);
  const account = (kp: KeyPair, name: string, jetstream: boolean): string =>
    signJwt({
      iss: opPub, sub: kp.getPublicKey(), name,
      nats: { limits: jetstream ? { ...UNLIMITED, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 } : UNLIMITED, type: 'account', version: 2 },
    }, op);
  const serverConf =
    `operator: "${opJwt}"\nsystem_account: ${sys.getPublicKey()}\nresolver: MEMORY\nresolver_preload: {\n` +
    `  ${sys.getPublicKey()}: "${account(sys, 'SYS', false)}"\n  ${acc.getPublicKey()}: "${account(acc, 'KV', true)}"\n}\n`;
  return { serverConf, userCreds: () => credsOf(acc), strangerCreds: () => credsOf(nkeys.createAccount()) };
}
