/**
 * docs/nats.md names the findMatches service's subject and shows `requestFindMatches` on it:
 * the subject it names is the one `kvNames` derives, and its TypeScript steps, run against a
 * real nats-server and query service, get the scores of the blocks stored.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ShardedIndexer, storedBlocks } from '../src/index.js';
import { connectNats, KvQueryService, kvNames, requestFindMatches } from '../src/nats/index.js';
import { NATS_SKIP_MESSAGE, natsServerInstalled, useNatsServer } from './support/nats-server.js';

const doc = readFileSync(new URL('../docs/nats.md', import.meta.url), 'utf8');
const SUBJECT = 'namespace-dynamo-component-backend.kvindex.find';

describe('docs/nats.md on the findMatches subject', () => {
  it("names the subject kvNames derives for Dynamo's default names, in the table, the prose and the examples", () => {
    expect(kvNames('dynamo', 'backend').querySubject).toBe(SUBJECT);
    expect(doc).toContain('| findMatches service (kvindex only) | `namespace-<ns>-component-<comp>.kvindex.find`');
    expect(doc).toContain(`nats request ${SUBJECT} '{"tokens":[1,2,3,4,5,6,7,8]}'`);
    expect(doc).toContain(`const { querySubject } = kvNames('dynamo', 'backend'); // '${SUBJECT}'`);
    expect(doc).toContain("await requestFindMatches(nc, querySubject, { tokens: [1, 2, 3, 4, 5, 6, 7, 8] });");
  });
});

const installed = natsServerInstalled();
if (!installed) console.warn(NATS_SKIP_MESSAGE);

describe.skipIf(!installed)('the documented requestFindMatches steps', () => {
  const env = useNatsServer();

  it('reach a query service on that subject and get the stored blocks scored', async () => {
    const indexer = await ShardedIndexer.create({ shards: 0, blockSize: 4 });
    indexer.applyEvent({ workerId: 7587889975016782855n, event: { eventId: 0n, data: { type: 'stored', parentHash: null, blocks: storedBlocks([1, 2, 3, 4, 5, 6, 7, 8], 4) } } });
    const service = KvQueryService.start(env.nc, indexer, SUBJECT);
    // The documented steps, with the test server's URL.
    const nc = await connectNats({ servers: env.server.url });
    try {
      const { querySubject } = kvNames('dynamo', 'backend');
      const { scores, streamSeq } = await requestFindMatches(nc, querySubject, { tokens: [1, 2, 3, 4, 5, 6, 7, 8] });
      expect([...scores]).toEqual([[7587889975016782855n, 2]]);
      expect(streamSeq).toBeNull(); // a service without a subscriber has no stream position
    } finally {
      await nc.close();
      await service.stop();
      await indexer.close();
    }
  });
});
