/**
 * Engine health in the gateway: a down engine (its /health failing) gets no requests until it
 * answers again; an engine whose KV events stopped is routed by load only (excluded from the
 * index's scores, never refused), counted, and taken back once its events flow; /ready says
 * which engines hold it back.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Fleet } from './support/gateway-fleet.js';
import { until, zmqAvailable } from './support/vllm-publisher.js';

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

describe.skipIf(!(await zmqAvailable()))('kvindex gateway engine health', () => {
  let fleet: Fleet | null = null;
  afterEach(async () => {
    await fleet?.close();
    fleet = null;
  });

  it('sends nothing to a down engine until it answers again', async () => {
    fleet = await Fleet.start({ engines: [1, 2].map(() => ({ model: 'm', blockSize: 4 })), gateway: { healthIntervalMs: 50 } });
    const prompt = range(100, 32);
    const first = await fleet.send('/v1/completions', { model: 'm', prompt, max_tokens: 1 });
    const holder = fleet.engineOf(first.worker);
    await fleet.indexed('m', prompt, BigInt(first.worker!), 8);
    holder.unhealthy = true;
    await until(() => fleet!.gateway.catalog.health(holder.url) === 'down', 10_000, 'down');
    const served = holder.seen.length;
    for (let i = 0; i < 4; i++) expect((await fleet.send('/v1/completions', { model: 'm', prompt: range(7000 + i * 50, 8), max_tokens: 1 })).worker).not.toBe(first.worker);
    expect(holder.seen.length).toBe(served);
    expect((await fetch(`${fleet.url}/ready`)).status).toBe(200); // known down counts as settled
    holder.unhealthy = false;
    await until(() => fleet!.gateway.catalog.health(holder.url) === 'up', 10_000, 'up again');
    expect((await fleet.send('/v1/completions', { model: 'm', prompt: [...prompt, 99], max_tokens: 1 })).worker).toBe(first.worker);
  });

  it('counts a /health slower than the health timeout as down, and a slow one within it as up', async () => {
    fleet = await Fleet.start({ engines: [1, 2].map(() => ({ model: 'm', blockSize: 4 })), gateway: { healthIntervalMs: 50, healthTimeoutMs: 300 } });
    const slow = fleet.engines[0]!;
    slow.healthDelayMs = 2_000;
    await until(() => fleet!.gateway.catalog.health(slow.url) === 'down', 10_000, 'down after a timed-out poll');
    for (let i = 0; i < 3; i++) expect((await fleet.send('/v1/completions', { model: 'm', prompt: range(3000 + i * 50, 8), max_tokens: 1 })).worker).not.toBe(fleet.ids[0]!.toString());
    await fleet.close();
    // The same stall inside a longer timeout: up through several completed rounds.
    fleet = await Fleet.start({ engines: [1, 2].map(() => ({ model: 'm', blockSize: 4 })), gateway: { healthIntervalMs: 50, healthTimeoutMs: 20_000 } });
    const patient = fleet.engines[0]!;
    patient.healthDelayMs = 300;
    const rounds = fleet.gateway.health.rounds;
    await until(() => fleet!.gateway.health.rounds >= rounds + 3, 30_000, 'three rounds');
    expect(fleet.gateway.catalog.health(patient.url)).toBe('up');
  });

  it('routes an engine whose events stopped by load only, and takes it back when they flow', async () => {
    fleet = await Fleet.start({ engines: [1, 2].map(() => ({ model: 'm', blockSize: 4 })), gateway: { healthIntervalMs: 50, staleMs: 300 } });
    const prompt = range(100, 32);
    const first = await fleet.send('/v1/completions', { model: 'm', prompt, max_tokens: 1 });
    const id = BigInt(first.worker!);
    const holder = fleet.engineOf(first.worker);
    await fleet.indexed('m', prompt, id, 8);
    expect((await fetch(`${fleet.url}/ready`)).status).toBe(200);
    holder.cache.muted = true;
    // New blocks on the holder: an event is owed and never comes.
    const owed = await fleet.send('/v1/completions', { model: 'm', prompt: [...prompt, ...range(900, 8)], max_tokens: 1 });
    expect(owed.worker).toBe(first.worker);
    const engine = fleet.gateway.catalog.engine(id, 'm', 'default', 0)!;
    await until(() => engine.stale, 10_000, 'stale');
    expect(fleet.gateway.catalog.staleTransitions).toBe(1);
    const ready = await fetch(`${fleet.url}/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { reason: string }).reason).toContain('events stopped');
    // Fail-open: still served, but its cached prefix no longer counts.
    expect((await fleet.send('/v1/completions', { model: 'm', prompt, max_tokens: 1 })).overlap).toBe(0);
    holder.cache.muted = false;
    // An event from the holder (asked directly: the gateway now picks by load alone).
    await fetch(`${holder.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'm', prompt: range(5000, 16), max_tokens: 1 }) });
    await until(() => !engine.stale, 10_000, 'events again');
    expect(fleet.gateway.registry.index('m', 'default')!.index.isExcluded(id, 0)).toBe(false);
    expect((await fetch(`${fleet.url}/ready`)).status).toBe(200);
  });
});
