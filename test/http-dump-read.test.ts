/**
 * readDump (src/http/dump-read.ts): a peer's /dump, kvindex's or Dynamo's, read exactly; a dump
 * that cannot be applied whole (an index that failed on the peer, cut short, ill-typed
 * listeners) throws instead of giving part of it.
 */
import { describe, expect, it } from 'vitest';
import { readDump } from '../src/http/dump-read.js';
import { KvIndexError } from '../src/errors.js';

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const EVENT = '{"worker_id":18446744073709551557,"event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":9007199254740993,"tokens_hash":14643705804678351452}]}},"dp_rank":2}}';

describe('readDump', () => {
  it('reads a kvindex dump: events, names and listener positions, u64s exact', () => {
    const text = `{"a:b:t1":{"block_size":16,"events":[${EVENT}],"model_name":"a:b","tenant_id":"t1","listeners":[{"instance_id":18446744073709551557,"dp_rank":0,"endpoint":"tcp://127.0.0.1:5557","replay_endpoint":null,"seq":18446744073709551000,"ranks":[0,2]}]}}`;
    const [s] = readDump(enc(text));
    expect(s).toMatchObject({ key: 'a:b:t1', modelName: 'a:b', tenantId: 't1', blockSize: 16 });
    expect(s!.events[0]!.workerId).toBe(18446744073709551557n);
    expect(s!.events[0]!.event.dpRank).toBe(2);
    expect(s!.listeners).toEqual([{ instanceId: 18446744073709551557n, dpRank: 0, endpoint: 'tcp://127.0.0.1:5557', replayEndpoint: null, position: { seq: 18446744073709551000n, ranks: [0, 2] } }]);
  });

  it('reads a Dynamo dump: no listeners, the key split at its last colon', () => {
    const [s, t] = readDump(enc(`{"org/model:v2:default":{"block_size":32,"events":[${EVENT}]},"m:x":{"events":[],"block_size":4}}`));
    expect(s).toMatchObject({ modelName: 'org/model:v2', tenantId: 'default', blockSize: 32, listeners: null });
    expect(t).toMatchObject({ modelName: 'm', tenantId: 'x', blockSize: 4, events: [], listeners: null });
    expect(readDump(enc('{}'))).toEqual([]);
  });

  it('throws for a dump that cannot be applied whole', () => {
    const bad = [
      '{"m:default":{"error":"index closed"}}',
      `{"m:default":{"block_size":16,"events":[${EVENT}`,
      `{"m:default":{"block_size":0,"events":[]}}`,
      `{"m:default":{"events":[]}}`,
      `{"nocolon":{"block_size":4,"events":[]}}`,
      `{"m:default":{"block_size":4,"events":[],"listeners":[{"instance_id":-1,"dp_rank":0,"endpoint":"tcp://h:1","seq":1}]}}`,
      `{"m:default":{"block_size":4,"events":[],"listeners":[{"instance_id":1,"dp_rank":0,"endpoint":"tcp://h:1","seq":"12"}]}}`,
      `{"m:default":{"block_size":4,"events":[],"listeners":{}}}`,
      `{"${'k'.repeat(100_000)}":{"block_size":"x"}}`,
      '[]',
    ];
    for (const text of bad) {
      let err: unknown = null;
      try {
        readDump(enc(text));
      } catch (e) {
        err = e;
      }
      expect(err, text.slice(0, 60)).toBeInstanceOf(KvIndexError);
      expect((err as Error).message.length, text.slice(0, 60)).toBeLessThan(400);
    }
  });
});
