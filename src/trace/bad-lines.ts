/**
 * Bad input lines of a replay: counted, with the first few line numbers (1-based) and reasons
 * kept for the report. Bad lines are never silently dropped; `strict` turns the first one into
 * an `EventParseError` instead.
 */
import { ErrorCode, EventParseError } from '../errors.js';

export class BadLines {
  count = 0;
  /** Line numbers of the first `keep` bad lines. */
  readonly lines: number[] = [];
  /** Reasons of the first `keep` bad lines, in the same order. */
  readonly reasons: string[] = [];
  private readonly keep: number;
  private readonly strict: boolean;
  private readonly source: string;

  constructor(source: string, strict: boolean, keep = 10) {
    this.source = source;
    this.strict = strict;
    this.keep = keep;
  }

  /** Records bad line `line` (1-based); throws `EventParseError` when strict. */
  add(line: number, reason: string): void {
    if (this.strict) throw new EventParseError(ErrorCode.InvalidJson, `${this.source}:${line}: bad line: ${reason}`);
    this.count++;
    if (this.lines.length < this.keep) {
      this.lines.push(line);
      this.reasons.push(reason.length > 160 ? `${reason.slice(0, 157)}...` : reason);
    }
  }
}
