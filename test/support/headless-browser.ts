/**
 * A real headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-
 * pipe`: JSON messages ending in NUL on file descriptors 3 and 4), so tests need no browser
 * automation package and open no port. Loads one page and reports what happened: every
 * network request, console errors and uncaught exceptions, values read from the page, and a
 * PNG screenshot.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';

/** The Chromium binary on PATH, or null (tests then skip, saying so). */
export function findChromium(): string | null {
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim() !== '') return r.stdout.trim();
  }
  return null;
}

export interface PageVisit {
  /** URLs of every request the page made (the document itself included). */
  requests: string[];
  /** Console messages of level error or warning, and uncaught exceptions. */
  errors: string[];
  /** The value of `expression` evaluated in the loaded page. */
  value: unknown;
  /** Full-page screenshot. */
  png: Buffer;
}

type Message = { id?: number; method?: string; params?: Record<string, unknown>; result?: Record<string, unknown>; error?: { message: string }; sessionId?: string };

class Cdp {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (r: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  private buffer = '';
  readonly events: Message[] = [];
  private onEvent: ((m: Message) => void) | null = null;

  constructor(private readonly out: Writable, input: Readable) {
    input.setEncoding('utf8');
    input.on('close', () => {
      for (const w of this.waiting.values()) w.reject(new Error('the browser closed its DevTools pipe'));
      this.waiting.clear();
    });
    input.on('data', (chunk: string) => {
      this.buffer += chunk;
      let at: number;
      while ((at = this.buffer.indexOf('\0')) >= 0) {
        const msg = JSON.parse(this.buffer.slice(0, at)) as Message;
        this.buffer = this.buffer.slice(at + 1);
        if (msg.id !== undefined) {
          const w = this.waiting.get(msg.id);
          this.waiting.delete(msg.id);
          if (msg.error !== undefined) w?.reject(new Error(msg.error.message));
          else w?.resolve(msg.result ?? {});
        } else {
          this.events.push(msg);
          this.onEvent?.(msg);
        }
      }
    });
  }

  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    this.out.write(JSON.stringify({ id, method, params, ...(sessionId === undefined ? {} : { sessionId }) }) + '\0');
    return new Promise((resolve, reject) => this.waiting.set(id, { resolve, reject }));
  }

  until(method: string): Promise<Message> {
    const seen = this.events.find((e) => e.method === method);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => {
      this.onEvent = (m) => {
        if (m.method === method) resolve(m);
      };
    });
  }
}

/** Opens `url` in a fresh headless Chromium, evaluates `expression` after the load event, closes. */
export async function visitPage(chromium: string, url: string, expression: string, width = 900): Promise<PageVisit> {
  const profile = mkdtempSync(join(tmpdir(), 'kvindex-chromium-'));
  let proc: ChildProcess | null = null;
  // A browser that hangs is killed, which fails the pending calls instead of the test timing out.
  const timer = setTimeout(() => proc?.kill('SIGKILL'), 45_000);
  try {
    proc = spawn(chromium, [
      '--headless', '--no-sandbox', '--disable-gpu', '--remote-debugging-pipe', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-extensions',
      `--user-data-dir=${profile}`, 'about:blank',
    ], { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] });
    const cdp = new Cdp(proc.stdio[3] as Writable, proc.stdio[4] as Readable);
    const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = (await cdp.send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
    for (const domain of ['Page', 'Runtime', 'Network', 'Log']) await cdp.send(`${domain}.enable`, {}, sessionId);
    await cdp.send('Emulation.setDeviceMetricsOverride', { width, height: 1200, deviceScaleFactor: 1, mobile: false }, sessionId);
    const loaded = cdp.until('Page.loadEventFired');
    await cdp.send('Page.navigate', { url }, sessionId);
    await loaded;
    const evaluated = await cdp.send('Runtime.evaluate', { expression, returnByValue: true }, sessionId);
    const shot = await cdp.send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true }, sessionId);
    const requests: string[] = [];
    const errors: string[] = [];
    for (const e of cdp.events) {
      const p = e.params ?? {};
      if (e.method === 'Network.requestWillBeSent') requests.push(String((p['request'] as { url: string }).url));
      if (e.method === 'Runtime.exceptionThrown') errors.push(`exception: ${JSON.stringify(p['exceptionDetails'])}`);
      if (e.method === 'Runtime.consoleAPICalled' && (p['type'] === 'error' || p['type'] === 'warning')) errors.push(`console.${String(p['type'])}: ${JSON.stringify(p['args'])}`);
      if (e.method === 'Log.entryAdded') {
        const entry = p['entry'] as { level: string; text: string };
        if (entry.level === 'error' || entry.level === 'warning') errors.push(`log ${entry.level}: ${entry.text}`);
      }
    }
    await cdp.send('Browser.close').catch(() => undefined);
    return {
      requests,
      errors,
      value: (evaluated['result'] as { value?: unknown } | undefined)?.value,
      png: Buffer.from(String(shot['data']), 'base64'),
    };
  } finally {
    clearTimeout(timer);
    await stop(proc);
    removeProfile(profile);
  }
}

/** Kills the browser and waits (at most 5 s) until it has exited. */
async function stop(proc: ChildProcess | null): Promise<void> {
  if (proc === null || proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  proc.kill('SIGKILL');
  await Promise.race([exited, new Promise<void>((resolve) => setTimeout(resolve, 5_000).unref())]);
}

/**
 * Removes the browser's profile folder. Chromium's helper processes can outlive the killed
 * browser by a moment and still write there: a clean-clone CI run once failed a passing page
 * test on `ENOTEMPTY` from the removal. Removal is retried for ~2 s; a profile that still
 * cannot be removed is reported, not turned into a test failure (the page's checks are done).
 */
function removeProfile(profile: string): void {
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
  } catch (err) {
    process.stderr.write(`headless-browser: could not remove ${profile}: ${(err as Error).message}\n`);
  }
}
