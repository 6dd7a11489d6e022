import { describe, expect, it } from 'vitest';
import { QueryBodyReader } from '../src/http/query-body.js';
import { readQuery, type QueryRequest } from '../src/http/requests.js';
import { unitRandom as rng } from './support/rng.js';

/** What the route did before the byte reader, for every body: the request, or the error's text. */
function general(body: Buffer): QueryRequest | string {
  try {
    return readQuery(JSON.parse(body.toString('utf8')) as unknown);
  } catch (err) {
    return `error: ${(err as Error).message}`;
  }
}

/** A plain object of a request, for equality checks (tokens copied out of the reader's scratch). */
function plainOf(q: QueryRequest): object {
  return { tokenIds: Array.from(q.tokenIds), modelName: q.modelName, tenantId: q.tenantId, loraName: q.loraName };
}

/** The reader's answer where it answers, which must equal the general path's; null otherwise. */
function check(reader: QueryBodyReader, body: Buffer): QueryRequest | null {
  const fast = reader.read(body);
  if (fast !== null) {
    const slow = general(body);
    expect(typeof slow, `general path failed on a body the reader took: ${body.toString('latin1')}`).toBe('object');
    expect(plainOf(fast)).toEqual(plainOf(slow as QueryRequest));
  }
  return fast;
}


const WS = [' ', '\t', '\n', '\r', '', '', ''];

function validBody(r: () => number): string {
  const ws = (): string => WS[Math.floor(r() * WS.length)]!;
  const n = Math.floor(r() * (r() < 0.1 ? 3000 : 80));
  const tokens = Array.from({ length: n }, () => {
    const k = r();
    return k < 0.05 ? 0 : k < 0.1 ? 0xffff_ffff : Math.floor(r() * (k < 0.5 ? 200_000 : 2 ** 32));
  });
  const members = [`"token_ids"${ws()}:${ws()}[${ws()}${tokens.join(`${ws()},${ws()}`)}${ws()}]`, `"model_name":${ws()}"model-${Math.floor(r() * 9)}/x y"`];
  if (r() < 0.5) members.push(`"tenant_id":${r() < 0.3 ? 'null' : `"t${Math.floor(r() * 5)}"`}`);
  if (r() < 0.5) members.push(`"lora_name"${ws()}:${r() < 0.5 ? 'null' : '"lora-a"'}`);
  for (let i = members.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [members[i], members[j]] = [members[j]!, members[i]!];
  }
  return `${ws()}{${ws()}${members.join(`${ws()},${ws()}`)}${ws()}}${ws()}`;
}

describe('QueryBodyReader', () => {
  it('reads the usual bodies, equal to JSON.parse + readQuery', () => {
    const reader = new QueryBodyReader();
    const r = rng(7);
    for (let i = 0; i < 2_000; i++) {
      const body = Buffer.from(validBody(r));
      expect(check(reader, body), body.toString()).not.toBeNull();
    }
  });

  it('leaves every other shape to the general path', () => {
    const reader = new QueryBodyReader();
    const others = [
      '', ' ', '{', '}', '{}', '[]', '"x"', 'null', '\ufeff{"token_ids":[1],"model_name":"m"}',
      '{"token_ids":[1.0],"model_name":"m"}', '{"token_ids":[1e3],"model_name":"m"}', '{"token_ids":[1E3],"model_name":"m"}',
      '{"token_ids":[-1],"model_name":"m"}', '{"token_ids":[-0],"model_name":"m"}', '{"token_ids":[01],"model_name":"m"}',
      '{"token_ids":[4294967296],"model_name":"m"}', '{"token_ids":[99999999999999999999],"model_name":"m"}',
      '{"token_ids":[1,],"model_name":"m"}', '{"token_ids":[,1],"model_name":"m"}', '{"token_ids":[1 2],"model_name":"m"}',
      '{"token_ids":["1"],"model_name":"m"}', '{"token_ids":[[1,2]],"model_name":"m"}', '{"token_ids":[null],"model_name":"m"}',
      '{"token_ids":null,"model_name":"m"}', '{"token_ids":{},"model_name":"m"}', '{"token_ids":[1]}',
      '{"token_ids":[1],"model_name":""}', '{"token_ids":[1],"model_name":null}', '{"token_ids":[1],"model_name":7}',
      '{"token_ids":[1],"model_name":"m\\u006d"}', '{"token_ids":[1],"model_name":"m\\"q"}', '{"token_ids":[1],"model_name":"mé"}',
      '{"token_ids":[1],"model_name":"m\tx"}', '{"token_ids":[1],"model_name":"m","model_name":"n"}',
      '{"token_ids":[1],"token_ids":[2],"model_name":"m"}', '{"token_ids":[1],"model_name":"m","extra":1}',
      '{"token_ids":[1],"model_name":"m","tenant_id":5}', '{"token_ids":[1],"model_name":"m","lora_name":true}',
      '{"token_ids":[1],"model_name":"m","lora_name":nul}', '{"token_ids":[1],"model_name":"m","lora_name":nullx}',
      '{"token_ids":[1],"model_name":"m",}', '{"token_ids":[1],"model_name":"m"} x', '{"token_ids":[1],"model_name":"m"}}',
      '{"token_ids":[1] "model_name":"m"}', '{"token_ids"[1],"model_name":"m"}', '{token_ids:[1],"model_name":"m"}',
      '{"token_ids":[1],"model_name":"m"', '{"token_ids":[1', '{"tok\\u0065n_ids":[1],"model_name":"m"}',
      '{"token_ids":[1],"model_name":"m"}\u000b', '{"token_ids":[1],"model_name":"m","tenant_id":"t","tenant_id":"u"}',
    ];
    for (const text of others) expect(check(reader, Buffer.from(text)), text).toBeNull();
  });

  it('answers only where the general path agrees, on mutated bodies', () => {
    const reader = new QueryBodyReader();
    const r = rng(11);
    const bytes = Buffer.from(' \t\n\r{}[],:"\\.-+eE0123456789nulltrx\u00e9\u0000');
    let answered = 0;
    for (let i = 0; i < 20_000; i++) {
      const body = Buffer.from(validBody(r));
      const edits = 1 + Math.floor(r() * 3);
      let b = body;
      for (let e = 0; e < edits; e++) {
        const at = Math.floor(r() * (b.length + 1));
        const byte = Buffer.from([bytes[Math.floor(r() * bytes.length)]!]);
        const kind = r();
        if (kind < 0.33) b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1)]);
        else if (kind < 0.66) b = Buffer.concat([b.subarray(0, at), byte, b.subarray(at)]);
        else b = Buffer.concat([b.subarray(0, at), byte, b.subarray(at + 1)]);
      }
      if (check(reader, b) !== null) answered++;
    }
    // Many mutations keep a valid body (whitespace, a digit): the reader must have answered some.
    expect(answered).toBeGreaterThan(1_000);
  });

  it('keeps each answer until the next read, and a large body does not stay as the scratch', () => {
    const reader = new QueryBodyReader();
    const big = Array.from({ length: 300_000 }, (_, i) => (i * 7919) % 100_000);
    const first = reader.read(Buffer.from(JSON.stringify({ token_ids: big, model_name: 'm' })))!;
    expect(first.tokenIds.length).toBe(big.length);
    expect(Array.from(first.tokenIds.subarray(299_990))).toEqual(big.slice(299_990));
    const second = reader.read(Buffer.from('{"token_ids":[5,6,7],"model_name":"m"}'))!;
    expect(Array.from(second.tokenIds)).toEqual([5, 6, 7]);
    // The large answer was not overwritten by the small read: it holds its own array.
    expect(first.tokenIds[0]).toBe(big[0]);
    expect(first.tokenIds.buffer).not.toBe(second.tokenIds.buffer);
  });
});
