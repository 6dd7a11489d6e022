/**
 * ActiveSequences: reference counting of prompt blocks per (worker, rank), prefill tokens until
 * the first token, TTL expiry on an injected clock, replica events in Dynamo's JSON shape with
 * exact u64 values, and the counted (not thrown) inconsistencies.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, EventParseError, KvIndexError } from '../src/errors.js';
import { ActiveSequences } from '../src/router/active-sequences.js';
import { formatActiveSequenceEvent, parseActiveSequenceEvent, type ActiveSequenceEvent } from '../src/router/sequence-event.js';

const W = 0xfedc_ba98_7654_3210n; // far above 2^53
const V = 0x4000_0000_0000_0007n;
const H = (...xs: bigint[]): BigUint64Array => BigUint64Array.from(xs);
const BIG = 0xffff_ffff_ffff_ffffn;

function clock(): { now: () => number; t: number } {
  const c = { t: 0, now: () => c.t };
  return c;
}

describe('ActiveSequences: loads', () => {
  it('a block shared by two requests in flight counts once, and stays until both are freed', () => {
    const seqs = new ActiveSequences({ blockSize: 16 });
    seqs.addRequest('a', W, H(1n, 2n, 3n));
    seqs.addRequest('b', W, H(1n, 2n, BIG));
    expect(seqs.load(W)).toEqual({ activePrefillTokens: 96, activeBlocks: 4, activeRequests: 2 });
    expect(seqs.newBlocks(W, 0, H(1n, 2n, 3n, 4n))).toBe(1);
    expect(seqs.free('a')).toBe(true);
    expect(seqs.load(W)).toEqual({ activePrefillTokens: 48, activeBlocks: 3, activeRequests: 1 });
    expect(seqs.newBlocks(W, 0, H(3n))).toBe(1); // 3 left with 'a'
    expect(seqs.newBlocks(W, 0, H(1n, BIG))).toBe(0);
    seqs.free('b');
    expect(seqs.load(W)).toEqual({ activePrefillTokens: 0, activeBlocks: 0, activeRequests: 0 });
  });

  it('ranks and workers are separate: the same block on two ranks counts on each', () => {
    const seqs = new ActiveSequences({ blockSize: 16 });
    seqs.addRequest('a', W, H(1n), { dpRank: 0 });
    seqs.addRequest('b', W, H(1n), { dpRank: 1 });
    seqs.addRequest('c', V, H(1n));
    expect(seqs.load(W, 0).activeBlocks).toBe(1);
    expect(seqs.load(W, 1).activeBlocks).toBe(1);
    expect(seqs.load(V).activeRequests).toBe(1);
    expect(seqs.load(W, 2)).toEqual({ activePrefillTokens: 0, activeBlocks: 0, activeRequests: 0 });
  });

  it('prefill tokens count until markPrefillCompleted; the blocks stay until free', () => {
    const seqs = new ActiveSequences({ blockSize: 16 });
    seqs.addRequest('a', W, H(1n, 2n), { prefillTokens: 20 });
    seqs.addRequest('b', W, H(3n));
    expect(seqs.load(W).activePrefillTokens).toBe(36);
    expect(seqs.markPrefillCompleted('a')).toBe(true);
    expect(seqs.markPrefillCompleted('a')).toBe(true); // a second mark changes nothing
    expect(seqs.load(W)).toEqual({ activePrefillTokens: 16, activeBlocks: 3, activeRequests: 2 });
    seqs.free('a');
    expect(seqs.load(W)).toEqual({ activePrefillTokens: 16, activeBlocks: 1, activeRequests: 1 });
  });

  it('untracked prefill never counts', () => {
    const seqs = new ActiveSequences({ blockSize: 16 });
    seqs.addRequest('a', W, H(1n), { trackPrefillTokens: false });
    expect(seqs.load(W).activePrefillTokens).toBe(0);
  });

  it('a duplicate id is ignored and counted; free and mark of unknown ids are counted, not thrown', () => {
    const seqs = new ActiveSequences({ blockSize: 16 });
    expect(seqs.addRequest('a', W, H(1n))).toBe(true);
    expect(seqs.addRequest('a', V, H(2n, 3n))).toBe(false);
    expect(seqs.load(V).activeRequests).toBe(0);
    expect(seqs.free('zz')).toBe(false);
    expect(seqs.markPrefillCompleted('zz')).toBe(false);
    expect(seqs.free('a')).toBe(true);
    expect(seqs.free('a')).toBe(false);
    expect(seqs.stats()).toEqual({ added: 1, freed: 1, expired: 0, duplicates: 1, unknown: 3 });
  });

  it('malformed ids and hashes throw KVX_INVALID_FIELD and change nothing', () => {
    const seqs = new ActiveSequences({ blockSize: 16 });
    const code = (f: () => unknown): string | undefined => {
      try {
        f();
      } catch (err) {
        return (err as KvIndexError).code;
      }
      return undefined;
    };
    expect(code(() => seqs.addRequest('a', 1n << 64n, H(1n)))).toBe(ErrorCode.InvalidField);
    expect(code(() => seqs.addRequest('a', W, [1n, -1n]))).toBe(ErrorCode.InvalidField);
    expect(code(() => seqs.addRequest('a', W, H(1n), { dpRank: 1.5 }))).toBe(ErrorCode.InvalidField);
    expect(code(() => seqs.addRequest('a', W, H(1n), { prefillTokens: -3 }))).toBe(ErrorCode.InvalidField);
    expect(seqs.size).toBe(0);
    expect(code(() => new ActiveSequences({ blockSize: 16, ttlMs: 0 }))).toBe(ErrorCode.InvalidOption);
  });
});

describe('ActiveSequences: new blocks of a sequence', () => {
  it('the binary search over sequence hashes agrees with the linear count on random prompt trees', () => {
    const seqs = new ActiveSequences({ blockSize: 16 });
    let x = 12345;
    const rand = (n: number): number => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return x % n;
    };
    // Prompts are paths in a small tree of blocks: sequence hash = the path's digits.
    const prompt = (): BigUint64Array => {
      const len = 1 + rand(12);
      const out = new BigUint64Array(len);
      let h = 1n;
      for (let i = 0; i < len; i++) {
        h = h * 4n + BigInt(rand(3));
        out[i] = h;
      }
      return out;
    };
    const live: string[] = [];
    for (let i = 0; i < 2000; i++) {
      if (live.length > 0 && rand(3) === 0) seqs.free(live.splice(rand(live.length), 1)[0]!);
      else {
        seqs.addRequest(`r${i}`, rand(2) === 0 ? W : V, prompt());
        live.push(`r${i}`);
      }
      const q = prompt();
      for (const w of [W, V]) expect(seqs.newSequenceBlocks(w, 0, q)).toBe(seqs.newBlocks(w, 0, q));
    }
  });
});

describe('ActiveSequences: expiry', () => {
  it('requests older than the TTL (300 s default) expire during a later addRequest, releasing their load', () => {
    const c = clock();
    const seqs = new ActiveSequences({ blockSize: 16, now: c.now });
    seqs.addRequest('old', W, H(1n, 2n));
    c.t = 200_000;
    seqs.addRequest('young', W, H(2n));
    c.t = 299_999;
    seqs.addRequest('x', V, H(9n));
    expect(seqs.has('old')).toBe(true); // not yet 300 s old: must not expire
    // The check runs at most every TTL / 10 (Dynamo: 30 s); the last one was at 299,999.
    c.t = 300_000;
    seqs.addRequest('y', V, H(8n));
    expect(seqs.has('old')).toBe(true);
    c.t = 329_999;
    seqs.addRequest('z', V, H(7n));
    expect(seqs.has('old')).toBe(false);
    expect(seqs.has('young')).toBe(true);
    expect(seqs.load(W)).toEqual({ activePrefillTokens: 16, activeBlocks: 1, activeRequests: 1 });
    expect(seqs.stats().expired).toBe(1);
    expect(seqs.free('old')).toBe(false);
  });

  it("a replica's adds run the expiry check too", () => {
    const c = clock();
    const seqs = new ActiveSequences({ blockSize: 16, now: c.now });
    const add = (id: string): string => `{"request_id":"${id}","worker":{"worker_id":1,"dp_rank":0},"data":{"AddRequest":{"token_sequence":[${id.length}]}}}`;
    expect(seqs.applyEvent(parseActiveSequenceEvent(add('old')))).toBe(true);
    // Only replica events from here on, no addRequest: 'old' once stayed in flight forever.
    c.t = 400_000;
    expect(seqs.applyEvent(parseActiveSequenceEvent(add('newer')))).toBe(true);
    expect(seqs.has('old')).toBe(false);
    expect(seqs.has('newer')).toBe(true);
    expect(seqs.stats().expired).toBe(1);
  });

  it('expireDue() runs the throttled check: at most every TTL / 10, freeing only what is past the TTL', () => {
    const c = clock();
    const seqs = new ActiveSequences({ blockSize: 16, ttlMs: 1000, now: c.now });
    seqs.addRequest('a', W, H(1n));
    c.t = 999;
    expect(seqs.expireDue()).toBe(0); // due, but 'a' is not 1,000 ms old
    c.t = 1050;
    expect(seqs.expireDue()).toBe(0); // old enough, but the last check was 51 ms ago
    expect(seqs.has('a')).toBe(true);
    c.t = 1099;
    expect(seqs.expireDue()).toBe(1);
    expect(seqs.load(W)).toEqual({ activePrefillTokens: 0, activeBlocks: 0, activeRequests: 0 });
    expect(seqs.stats().expired).toBe(1);
  });

  it('expire() runs the check on demand with a custom TTL', () => {
    const c = clock();
    const seqs = new ActiveSequences({ blockSize: 16, ttlMs: 1000, now: c.now });
    seqs.addRequest('a', W, H(1n));
    c.t = 500;
    seqs.addRequest('b', W, H(1n));
    c.t = 1200;
    expect(seqs.expire()).toBe(1);
    expect(seqs.load(W).activeBlocks).toBe(1); // 'b' still holds block 1
    c.t = 1500;
    expect(seqs.expire()).toBe(1);
    expect(seqs.size).toBe(0);
  });
});

describe('ActiveSequences: replica events', () => {
  it("emits Dynamo's ActiveSequenceEvent JSON with exact u64 ids and hashes", () => {
    const lines: string[] = [];
    const seqs = new ActiveSequences({ blockSize: 16, routerId: BIG, onEvent: (e) => lines.push(formatActiveSequenceEvent(e)) });
    seqs.addRequest('r-1', W, H(BIG, 5n), { dpRank: 3, expectedOutputTokens: 100, prefillTokens: 7 });
    seqs.markPrefillCompleted('r-1');
    seqs.free('r-1');
    seqs.free('r-1'); // unknown: no event
    expect(lines).toEqual([
      '{"request_id":"r-1","worker":{"worker_id":18364758544493064720,"dp_rank":3},"data":{"AddRequest":{"token_sequence":[18446744073709551615,5],' +
        '"track_prefill_tokens":true,"expected_output_tokens":100,"prefill_load_hint":{"initial_effective_prefill_tokens":7,"expected_prefill_duration":null}}},' +
        '"router_id":18446744073709551615,"lora_name":null}',
      '{"request_id":"r-1","worker":{"worker_id":18364758544493064720,"dp_rank":3},"data":"MarkPrefillCompleted","router_id":18446744073709551615,"lora_name":null}',
      '{"request_id":"r-1","worker":{"worker_id":18364758544493064720,"dp_rank":3},"data":"Free","router_id":18446744073709551615,"lora_name":null}',
    ]);
  });

  it('a replica applying the events reaches the same loads, and round-trips the JSON exactly', () => {
    const events: ActiveSequenceEvent[] = [];
    const a = new ActiveSequences({ blockSize: 16, onEvent: (e) => events.push(e) });
    const b = new ActiveSequences({ blockSize: 16, onEvent: () => expect.fail('a replica must not re-emit') });
    a.addRequest('1', W, H(1n, 2n, 3n), { prefillTokens: 10 });
    a.addRequest('2', W, H(2n, BIG), { loraName: 'adapter' });
    a.markPrefillCompleted('1');
    a.addRequest('3', V, H(7n));
    a.free('2');
    for (const e of events) {
      const back = parseActiveSequenceEvent(formatActiveSequenceEvent(e));
      expect(back).toEqual(e);
      expect(b.applyEvent(back)).toBe(true);
    }
    for (const w of [W, V]) expect(b.load(w)).toEqual(a.load(w));
    expect(b.size).toBe(2);
  });

  it("a replica's largest token counts leave every load exact: after the frees, all zero", () => {
    // With counts up to 2^53 the sums rounded: a worker's prefill load stayed at -1 after these
    // events, and every later route failed on it.
    const b = new ActiveSequences({ blockSize: 16 });
    const add = (id: string, tokens: number): string =>
      `{"request_id":"${id}","worker":{"worker_id":1,"dp_rank":0},"data":{"AddRequest":{"token_sequence":[],"prefill_load_hint":{"initial_effective_prefill_tokens":${tokens}}}}}`;
    const free = (id: string): string => `{"request_id":"${id}","worker":{"worker_id":1,"dp_rank":0},"data":"Free"}`;
    for (const text of [add('D', 0), add('A', 0xffff_ffff), add('B', 1), add('C', 1), free('A'), free('B'), free('C')]) {
      expect(b.applyEvent(parseActiveSequenceEvent(text))).toBe(true);
    }
    expect(b.load(1n)).toMatchObject({ activePrefillTokens: 0, activeRequests: 1 });
  });

  it('malformed event JSON throws EventParseError with a stable code naming the field', () => {
    const cases: [string, string, RegExp][] = [
      ['{"request_id":1,"worker":{"worker_id":1,"dp_rank":0},"data":"Free"}', ErrorCode.InvalidField, /request_id/],
      ['{"request_id":"a","worker":{"worker_id":18446744073709551616,"dp_rank":0},"data":"Free"}', ErrorCode.InvalidField, /worker_id/],
      ['{"request_id":"a","worker":{"worker_id":1.5,"dp_rank":0},"data":"Free"}', ErrorCode.InvalidField, /worker_id/],
      ['{"request_id":"a","worker":{"worker_id":1,"dp_rank":0},"data":"Explode"}', ErrorCode.InvalidField, /data/],
      ['{"request_id":"a","worker":{"worker_id":1,"dp_rank":0},"data":{"Other":{}}}', ErrorCode.UnknownVariant, /data/],
      ['{"request_id":"a","worker":{"worker_id":1,"dp_rank":0},"data":{"AddRequest":{"token_sequence":[1,-2]}}}', ErrorCode.InvalidField, /token_sequence\[1\]/],
      ['{"request_id":"a","worker":{"worker_id":1,"dp_rank":4294967296},"data":"Free"}', ErrorCode.InvalidField, /dp_rank/],
      ['{"request_id":"a","worker":{"worker_id":1,"dp_rank":0},"data":{"AddRequest":{"prefill_load_hint":{"initial_effective_prefill_tokens":4294967296}}}}', ErrorCode.InvalidField, /initial_effective_prefill_tokens/],
      ['{"request_id":"a","worker":{"worker_id":1,"dp_rank":0},"data":{"AddRequest":{"expected_output_tokens":9007199254740991}}}', ErrorCode.InvalidField, /expected_output_tokens/],
      ['{"request_id":"a",', ErrorCode.InvalidJson, /./],
    ];
    for (const [text, code, message] of cases) {
      let err: unknown = null;
      try {
        parseActiveSequenceEvent(text);
      } catch (e) {
        err = e;
      }
      expect(err, text).toBeInstanceOf(EventParseError);
      expect((err as EventParseError).code, text).toBe(code);
      expect((err as EventParseError).message, text).toMatch(message);
    }
  });
});
