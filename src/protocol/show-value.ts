/**
 * A short text of any value for an error message, that never throws: `String(value)` throws a
 * TypeError for an object without a prototype (what the lossless JSON parser makes: json-value.ts)
 * and overflows the stack on an array nested ~10,000 deep, so a hostile request could turn the
 * typed error that names its bad field into an untyped one (found by fuzzing `parseFindRequest`
 * and `parseTraceLine`). Strings are quoted and cut at 40 characters; containers are named, not
 * shown.
 */
export function showValue(value: unknown): string {
  switch (typeof value) {
    case 'bigint':
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
