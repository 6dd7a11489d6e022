/**
 * The findMatches request's block identity options: `lora_name` and `block_mm_hashes` parsed
 * losslessly and checked, and served by a real query service so that a LoRA or multimodal
 * request is scored against the blocks its own engine stored.
 */

import { describe, expect, it } from 'vitest';

import { computeBlockHashes, computeSequenceHashes, type BlockHashOptions } from '../src/hash/block-hash.js';
import { ShardedIndexer } from '../src/indexer/sharded-indexer.js';
import { NatsErrorCode } from '../src/nats/errors.js';
import { kvNames } from '../src/nats/names.js';
import { formatFindRequest, KvQueryService, parseFindRequest, requestFindMatches } from '../src/nats/query.js';
import type { RouterEvent } from '../src/protocol/types.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

/** Above 2^53: a double would round it (to 18446744073709551616). */
const BIG = 18446744073709551557n;

describe('parseFindRequest: lora_name and block_mm_hashes', () => {
  it('reads both, every mm hash exactly, as integers or decimal strings', () => {
    const req = parseFindRequest(`{"tokens":[1,2,3,4],"lora_name":"sql-lora","block_mm_hashes":[null,[${BIG},"9007199254740993"],[]]}`);
    expect(req).toEqual({
      tokens: Uint32Array.of(1, 2, 3, 4),
      loraName: 'sql-lora',
      blockMmHashes: [null, BigUint64Array.of(BIG, 9007199254740993n), new BigUint64Array(0)],
    });
  });

  it('defaults both to null', () => {
    expect(parseFindRequest('{"tokens":[1],"lora_name":null}')).toEqual({ tokens: Uint32Array.of(1), loraName: null, blockMmHashes: null });
  });

  it('rejects bad values, naming the field', () => {
    const cases: Array<[string, string]> = [
      ['{"tokens":[1],"lora_name":7}', 'lora_name'],
      ['{"tokens":[1],"block_mm_hashes":{"0":[1]}}', 'block_mm_hashes'],
      ['{"tokens":[1],"block_mm_hashes":[7]}', 'block_mm_hashes[0]'],
      ['{"tokens":[1],"block_mm_hashes":[null,[1,-2]]}', 'block_mm_hashes[1][1]'],
      ['{"tokens":[1],"block_mm_hashes":[["18446744073709551616"]]}', 'block_mm_hashes[0][0]'],
      ['{"tokens":[1],"block_mm_hashes":[[1.5]]}', 'block_mm_hashes[0][0]'],
      ['{"hashes":["1"],"lora_name":"sql-lora"}', 'only with "tokens"'],
      ['{"hashes":["1"],"block_mm_hashes":[]}', 'only with "tokens"'],
      // Objects (no prototype, from the lossless parser) and deep arrays where a value was
      // expected: the message once called String() on them, which threw a TypeError or overflowed.
      ['{"tokens":[1],"lora_name":{}}', 'lora_name'],
      ['{"tokens":[{}]}', 'tokens[0]'],
      ['{"hashes":[{}]}', 'hashes[0]'],
      ['{"tokens":[1],"block_mm_hashes":[[{}]]}', 'block_mm_hashes[0][0]'],
      [`{"hashes":[${'['.repeat(20_000)}${']'.repeat(20_000)}]}`, 'hashes[0]'],
    ];
    for (const [body, field] of cases) {
      expect(() => parseFindRequest(body), body).toThrow(
        expect.objectContaining({ code: NatsErrorCode.BadQuery, message: expect.stringContaining(field) }),
      );
    }
  });

  it('reads back what formatFindRequest writes', () => {
    const body = formatFindRequest({ tokens: [5, 6], loraName: 'é "quoted"', blockMmHashes: [[BIG, 1n], null, undefined] });
    expect(parseFindRequest(body)).toEqual({
      tokens: Uint32Array.of(5, 6),
      loraName: 'é "quoted"',
      blockMmHashes: [BigUint64Array.of(BIG, 1n), null, null],
    });
    expect(formatFindRequest({ tokens: [5] })).toBe('{"tokens":[5]}');
  });
});

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

describe.skipIf(!installed)('findMatches service with block identity options', () => {
  const env = useNatsServer();
  const blockSize = 4;
  const tokens = Array.from({ length: 12 }, (_, i) => 500 + i);

  function stored(worker: bigint, options?: BlockHashOptions): RouterEvent {
    const local = computeBlockHashes(tokens, blockSize, options);
    const seq = computeSequenceHashes(local);
    const blocks = Array.from(local, (tokensHash, i) => ({ blockHash: seq[i]!, tokensHash }));
    return { workerId: worker, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks } } };
  }

  it('scores LoRA and multimodal requests against their own blocks', async () => {
    const base = 1n;
    const lora = 2n;
    const vision = 3n;
    const loraOptions = { loraName: 'sql-lora' };
    const mmOptions = { blockMmHashes: [null, [BIG]] };
    const indexer = await ShardedIndexer.create({ shards: 1, blockSize });
    indexer.applyEvents([stored(base), stored(lora, loraOptions), stored(vision, mmOptions)]);
    const subject = kvNames('identity', 'backend').querySubject;
    const service = KvQueryService.start(env.nc, indexer, subject);
    try {
      const byLora = await requestFindMatches(env.nc, subject, { tokens, ...loraOptions });
      expect([...byLora.scores]).toEqual([[lora, 3]]);
      const byBase = await requestFindMatches(env.nc, subject, { tokens });
      expect(new Map(byBase.scores)).toEqual(new Map([[base, 3], [vision, 1]]));
      const byImage = await requestFindMatches(env.nc, subject, { tokens, ...mmOptions });
      expect(new Map(byImage.scores)).toEqual(new Map([[base, 1], [vision, 3]]));
      // Raw JSON with the mm hash as a bare integer above 2^53: read exactly, so it matches
      // (the reply's ids and counts are small, so JSON.parse may read it).
      const raw = await env.nc.request(subject, new TextEncoder().encode(`{"tokens":[${tokens.join(',')}],"block_mm_hashes":[null,[${BIG}]]}`));
      expect(JSON.parse(new TextDecoder().decode(raw.data))).toEqual({ scores: { 1: 1, 3: 3 }, frequencies: [], stream_seq: null });
      // One below: another image, so only the shared first block matches.
      const other = await env.nc.request(subject, new TextEncoder().encode(`{"tokens":[${tokens.join(',')}],"block_mm_hashes":[null,[${BIG - 1n}]]}`));
      expect(JSON.parse(new TextDecoder().decode(other.data))).toEqual({ scores: { 1: 1, 3: 1 }, frequencies: [], stream_seq: null });
      const bad = await env.nc.request(subject, new TextEncoder().encode('{"tokens":[1,2,3,4],"lora_name":5}'));
      expect(JSON.parse(new TextDecoder().decode(bad.data))).toMatchObject({ error: { code: NatsErrorCode.BadQuery } });
    } finally {
      await service.stop();
      await indexer.close();
    }
  });
});
