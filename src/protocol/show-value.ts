/**
 * A short text of any value for an error message, that never throws: `String(value)` throws a
 * TypeError for an object without a prototype (what the lossless JSON parser makes:
 * json-value.ts) and overflows the stack on an array nested ~10,000 deep, so a hostile request
 * could turn the typed error that names its bad field into an untyped one (found by fuzzing
 * `parseFindRequest` and `parseTraceLine`). Strings are quoted and cut at 40 characters,
 * integers of more than 40 digits are cut too; containers are named, not shown. A cut string
 * says how long it was (`"abc..."... (5242880 bytes)`), as `clipText` does.
 */
export function showValue(value: unknown): string {
  switch (typeof value) {
    case 'bigint': {
      // A request may carry a 1 MiB integer: quoting it whole made an error reply larger than
      // the NATS max_payload (found by fuzzing).
      const text = value.toString();
      return text.length > 40 ? `${text.slice(0, 20)}... (${text.length} digits)` : text;
    }
    case 'number':
    case 'boolean':
    case 'undefined':
      return String(value);
    case 'string':
      return value.length > SHOW_CHARS ? `${JSON.stringify(head(value, SHOW_CHARS))}... (${Buffer.byteLength(value)} bytes)` : JSON.stringify(value);
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    default:
      if (value === null) return 'null';
      return Array.isArray(value) ? `an array of ${value.length}` : 'an object';
  }
}

/** Characters of a string value `showValue` quotes. */
const SHOW_CHARS = 40;

/**
 * Characters of client text that an error answer or a log line quotes (`clipText`): enough for
 * any real endpoint, model name or content type, while a hostile 5 MB value stays 5 MB in the
 * request only (`/register` once answered a 5 MB endpoint with a 5 MB 400).
 */
export const ECHO_MAX_CHARS = 200;

/**
 * `text` as it is when at most `max` characters, else its first `max` characters followed by
 * `... (N bytes)`, N its UTF-8 length. The one way kvindex's servers quote text a client sent
 * (in an error answer, a log line) when the text may be of any length.
 */
export function clipText(text: string, max: number = ECHO_MAX_CHARS): string {
  return text.length <= max ? text : `${head(text, max)}... (${Buffer.byteLength(text)} bytes)`;
}

/** The first `max` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair. */
function head(text: string, max: number): string {
  const c = text.charCodeAt(max - 1);
  return text.slice(0, c >= 0xd800 && c <= 0xdbff ? max - 1 : max);
}
