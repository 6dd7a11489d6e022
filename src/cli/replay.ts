/**
 * `kvindex replay [file] [options]`: the main job. Replays a trace, a recorded KV event stream
 * or a replay workload through the indexer and prints a summary table (or, with `--json`, one
 * JSON object and nothing else on stdout). A progress bar goes to stderr when it is a TTY.
 */
import { closeSync, createWriteStream, openSync, statSync, writeSync, type WriteStream } from 'node:fs';
import { ErrorCode, KvIndexError } from '../errors.js';
import { formatRecorderLine } from '../protocol/json-format.js';
import { createProgressBar } from './progress.js';
import { parseReplayArgs, REPLAY_USAGE, UsageError, type ReplayCliOptions } from './replay-options.js';
import { replayJson, replayTable } from './replay-report.js';
import { renderReplayHtml } from './replay-html.js';
import { runReplay, type ReplayRunOptions } from './replay-run.js';
import { runTimedCli } from './replay-timed.js';
import { ReplayTimeline } from './replay-timeline.js';
import type { ReplaySummary } from './replay-summary.js';
import { formatInt } from './table.js';

function fail(message: string, code: number): number {
  process.stderr.write(`kvindex replay: ${message}\n`);
  return code;
}

/** Runs the command; resolves to the exit code (0 ok, 1 failure or strict bad input, 2 usage). */
export async function main(args: string[]): Promise<number> {
  let options: ReplayCliOptions | null;
  try {
    options = parseReplayArgs(args);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    return fail(`${err.message}\nrun 'kvindex replay --help' for the options`, 2);
  }
  if (options === null) {
    process.stdout.write(REPLAY_USAGE);
    return 0;
  }
  // Files that cannot be opened are command-line mistakes (exit 2), told before any work.
  try {
    if (statSync(options.file).isDirectory()) return fail(`cannot read '${options.file}': it is a directory`, 2);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return fail(`cannot read '${options.file}': ${e.code === 'ENOENT' ? 'no such file' : e.message}`, 2);
  }
  // An output that is the input (or the other output) would be truncated by opening it before
  // the input is read: `--record in.jsonl` emptied in.jsonl (found by fuzzing).
  const outputs: Array<[string, string | null]> = [['--record', options.record], ['--report', options.report]];
  for (const [flag, path] of outputs) {
    if (path === null) continue;
    if (sameFile(path, options.file)) return fail(`${flag} '${path}' is the input file: it would be overwritten before it is read`, 2);
  }
  if (options.record !== null && options.report !== null && (options.record === options.report || sameFile(options.record, options.report))) {
    return fail(`--record and --report name the same file '${options.record}'`, 2);
  }
  if (options.timed !== null) return runTimedCli(options);
  let recorder: WriteStream | null = null;
  let recordError: NodeJS.ErrnoException | null = null;
  if (options.record !== null) {
    try {
      recorder = createWriteStream('', { fd: openSync(options.record, 'w') });
    } catch (err) {
      return fail(`cannot write '${options.record}': ${(err as Error).message}`, 2);
    }
    // A failed write (ENOSPC, EIO) must not pass in silence: the record would be incomplete.
    recorder.on('error', (err) => {
      recordError ??= err;
    });
  }

  // The report file is opened (created) before the run, so a bad path fails fast, like --record.
  let reportFd: number | null = null;
  if (options.report !== null) {
    try {
      reportFd = openSync(options.report, 'w');
    } catch (err) {
      return fail(`cannot write '${options.report}': ${(err as Error).message}`, 2);
    }
  }
  const timeline = reportFd === null ? null : new ReplayTimeline();

  const bar = createProgressBar();
  const run: ReplayRunOptions = {
    file: options.file,
    shards: options.shards,
    readYourWrites: options.readYourWrites,
    speed: options.speed,
    strict: options.strict,
    limit: options.limit,
    sim: options.sim,
    routing: options.routing,
  };
  if (bar.active) {
    run.onProgress = (p) => {
      bar.update(p.fraction, `${formatInt(p.lines)} lines, ${formatInt(p.requests)} requests, ${formatInt(p.events)} events`);
    };
  }
  const out = recorder;
  if (out !== null || timeline !== null) {
    run.onEvent = (timestamp, event) => {
      out?.write(formatRecorderLine({ timestamp: Math.round(timestamp), event }) + '\n');
      timeline?.event(timestamp, event);
    };
  }
  if (timeline !== null) run.onRequest = (sample) => timeline.request(sample);
  let summary: ReplaySummary;
  try {
    summary = await runReplay(run);
  } catch (err) {
    if (reportFd !== null) closeSync(reportFd);
    const code = err instanceof KvIndexError ? `[${err.code}] ` : '';
    return fail(`${code}${(err as Error).message ?? String(err)}`, 1);
  } finally {
    bar.done();
    if (recorder !== null) await closeStream(recorder).catch((err: NodeJS.ErrnoException) => {
      recordError ??= err;
    });
  }
  if (reportFd !== null && timeline !== null) {
    try {
      writeSync(reportFd, renderReplayHtml(summary, timeline.buckets(), new Date()));
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      return fail(`cannot write '${options.report ?? ''}': ${e.code ?? e.message}`, 1);
    } finally {
      closeSync(reportFd);
    }
  }

  if (options.json) process.stdout.write(JSON.stringify(replayJson(summary)) + '\n');
  else process.stdout.write(replayTable(summary));
  const failedRecord = recordError as NodeJS.ErrnoException | null;
  if (failedRecord !== null) {
    return fail(`cannot write '${options.record ?? ''}': ${failedRecord.code ?? failedRecord.message} (the record is incomplete)`, 1);
  }
  // Told after the summary of what was read: exit 1, the input was not read to its end.
  if (summary.inputError !== null) return fail(`[${ErrorCode.CorruptInput}] ${summary.inputError}`, 1);
  if (summary.kind === null) return fail(`${options.file} holds no valid line`, 1);
  if (options.strict && (summary.mismatches ?? 0) > 0) {
    return fail(`${summary.mismatches} lookups differ from the ground truth`, 1);
  }
  return 0;
}

/**
 * Ends the stream and settles once its file is closed: rejects with the stream's error if a
 * write or the close failed. ('close' comes after 'error'; the `end` callback could run first
 * and let a failed last write pass unseen.)
 */
function closeStream(stream: WriteStream): Promise<void> {
  return new Promise((resolve, reject) => {
    if (stream.closed) {
      if (stream.errored !== null) reject(stream.errored);
      else resolve();
      return;
    }
    stream.once('close', () => (stream.errored !== null ? reject(stream.errored) : resolve()));
    stream.on('error', () => undefined); // reported through 'close'
    stream.end();
  });
}

/** Whether two paths name one existing file (same device and inode); false if either is missing. */
function sameFile(a: string, b: string): boolean {
  try {
    const x = statSync(a);
    const y = statSync(b);
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
}
