/**
 * `kvindex serve` as a child process (the build in dist/, which `npm test` makes first), with its
 * stderr JSON log lines collected for assertions.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const MAIN = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** A running `kvindex serve` (or another command) whose stderr JSON lines are collected. */
export class ServeProcess {
  readonly lines: LogLine[] = [];
  readonly exited: Promise<number | null>;
  private readonly proc: ChildProcess;
  private readonly listeners: Array<() => void> = [];

  /**
   * `nodeArgs` go to node before the script (e.g. `--import` of a module resolution hook);
   * `command` is the CLI command (`serve`, `gateway`).
   */
  constructor(args: string[], nodeArgs: string[] = [], command = 'serve') {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run 'npm run build' first`);
    this.proc = spawn(process.execPath, [...nodeArgs, MAIN, command, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.exited = new Promise((res) => this.proc.once('exit', (code) => res(code)));
    createInterface({ input: this.proc.stderr! }).on('line', (text) => {
      try {
        this.lines.push(JSON.parse(text) as LogLine);
      } catch {
        this.lines.push({ level: 0, msg: text });
      }
      for (const l of this.listeners) l();
    });
  }

  /**
   * Resolves with the first log line whose msg is `msg`; rejects after 45 s or on exit. A
   * liveness bound, under vitest's 60 s per test: with 15 s, a `kvindex serve --nats` child
   * printed nothing at all within it in 3 of 10 runs of test/serve-signal-exit.test.ts at load
   * average ~20 on 2 cores.
   */
  waitFor(msg: string): Promise<LogLine> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const hit = this.lines.find((l) => l.msg === msg);
        if (hit !== undefined) resolve(hit);
        return hit !== undefined;
      };
      if (check()) return;
      const timer = setTimeout(() => reject(new Error(`no '${msg}' line within 45 s:\n${this.dump()}`)), 45_000);
      this.listeners.push(() => {
        if (check()) clearTimeout(timer);
      });
      void this.exited.then(() => {
        if (!check()) reject(new Error(`exited before '${msg}':\n${this.dump()}`));
      });
    });
  }

  signal(sig: NodeJS.Signals): void {
    this.proc.kill(sig);
  }

  dump(): string {
    return this.lines.map((l) => JSON.stringify(l)).join('\n');
  }
}

