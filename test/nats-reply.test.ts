/** replySafely: a reply that cannot be sent becomes a short error, and nothing throws. */
import type { Msg } from 'nats';
import { describe, expect, it } from 'vitest';
import { replySafely } from '../src/nats/reply.js';

/** A Msg whose respond refuses payloads above `max` bytes, as the client does past max_payload. */
function fakeMsg(max: number, reply: string | undefined = '_INBOX.x'): { m: Msg; sent: string[] } {
  const sent: string[] = [];
  const m = {
    reply,
    respond(data: Uint8Array): boolean {
      if (data.length > max) throw new Error('MAX_PAYLOAD_EXCEEDED');
      sent.push(new TextDecoder().decode(data));
      return true;
    },
  } as unknown as Msg;
  return { m, sent };
}

describe('replySafely', () => {
  it('sends a reply that fits', () => {
    const { m, sent } = fakeMsg(100);
    replySafely(m, '{"ok":true}', 's', null);
    expect(sent).toEqual(['{"ok":true}']);
  });

  it('replaces a reply that does not fit by a short error naming why', () => {
    const { m, sent } = fakeMsg(200);
    const warned: unknown[] = [];
    const logger = { warn: (o: unknown) => warned.push(o) } as never;
    expect(() => replySafely(m, 'x'.repeat(1000), 's', logger)).not.toThrow();
    expect(JSON.parse(sent[0]!)).toEqual({ error: { code: 'KVX_INTERNAL', message: 'reply of 1000 bytes not sent: MAX_PAYLOAD_EXCEEDED' } });
    expect(warned).toHaveLength(1);
  });

  it('never throws, even when no reply can be sent; nothing is sent without a reply subject', () => {
    const { m, sent } = fakeMsg(0);
    expect(() => replySafely(m, '{"ok":true}', 's', null)).not.toThrow();
    const none = fakeMsg(100, '');
    replySafely(none.m, '{"ok":true}', 's', null);
    expect([...sent, ...none.sent]).toEqual([]);
  });
});
