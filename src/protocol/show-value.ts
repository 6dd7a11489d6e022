/**
 * A short text of any value for an error message, that never throws: `String(value)` throws a
 * TypeError for an object without a prototype (what the lossless JSON parser makes:
 * json-value.ts) and overflows the stack on an array nested ~10,000 deep, so a hostile request
 * could turn the typed error that names its bad field into an untyped one (found by fuzzing
 * `parseFindRequest` and `parseTraceLine`). Strings are quoted and cut at 40 characters,
 * integers of more than 40 digits are cut too; containers are named, not shown.
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
      return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    default:
      if (value === null) return 'null';
      return Array.isArray(value) ? `an array of ${value.length}` : 'an object';
  }
}
