/** readEventHeader against formatRouterEvent's serde layout, u64 ids above 2^53, and junk. */

import { describe, expect, it } from 'vitest';
import { readEventHeader, type EventHeader } from '../src/nats/event-header.js';
import { formatRouterEvent } from '../src/protocol/json-format.js';
import type { RouterEvent } from '../src/protocol/types.js';

const enc = new TextEncoder();
const fresh = (): EventHeader => ({ workerId: 0n, eventId: 0n, type: -1, dpRank: 0 });

describe('readEventHeader', () => {
  it('reads worker id, event id, type and DP rank of each event type', () => {
    const cases: Array<[RouterEvent, number]> = [
      [{ workerId: 18446744073709551615n, event: { eventId: 9007199254740993n, data: { type: 'stored', parentHash: null, blocks: [{ blockHash: 1n, tokensHash: 2n }] } } }, 0],
      [{ workerId: 7n, event: { eventId: 0n, data: { type: 'removed', blockHashes: [3n] }, dpRank: 4 } }, 1],
      [{ workerId: 7n, event: { eventId: 12n, data: { type: 'cleared' }, dpRank: 4294967295 } }, 2],
    ];
    for (const [ev, type] of cases) {
      const h = fresh();
      expect(readEventHeader(enc.encode(formatRouterEvent(ev)), h)).toBe(true);
      expect(h).toEqual({ workerId: ev.workerId, eventId: ev.event.eventId, type, dpRank: ev.event.dpRank ?? 0 });
    }
  });

  it('refuses other layouts and junk without throwing', () => {
    for (const text of ['', '{}', '{"event":{},"worker_id":1}', '{"worker_id":01,"event":{"event_id":1,"data":"cleared"}}', '{"worker_id":99999999999999999999999,"event":{"event_id":1,"data":"cleared"}}', '{"worker_id":1,"event":{"event_id":1,"data":"cleared"}']) {
      expect(readEventHeader(enc.encode(text), fresh())).toBe(false);
    }
  });

  it('refuses a DP rank it cannot read exactly, however long, without throwing', () => {
    const head = '{"worker_id":1,"event":{"event_id":1,"data":"cleared",';
    // A 200,000-digit rank once overflowed the stack (String.fromCharCode of a spread run).
    for (const tail of [`"dp_rank":${'1'.repeat(200_000)}}}`, '"dp_rank":4294967296}}', '"dp_rank":00000000001}}', '"dp_ran\\u006b":1}}', '"dp_rank": 1}}', '"x":1}}']) {
      expect(readEventHeader(enc.encode(head + tail), fresh()), tail.slice(0, 40)).toBe(false);
    }
  });
});
