/**
 * `engines.json` of `kvindex gateway --engines`: a JSON array of engines, each with the fields
 * of `POST /register` (`instance_id`, `endpoint`, `replay_endpoint?`, `model_name`,
 * `block_size`, `dp_rank?`, `tenant_id?`) plus `url`, the engine's OpenAI base URL. Read
 * losslessly (a u64 instance id stays exact). Throws `HttpRequestError` naming the entry.
 */

import { readFileSync } from 'node:fs';
import { HttpRequestError, readRegister } from '../http/requests.js';
import { parseJsonLossless } from '../protocol/json-value.js';
import { readEngineUrl, type EngineEntry } from './engine-catalog.js';

/** The engines of a file's text. */
export function parseEngines(text: string): EngineEntry[] {
  let v: unknown;
  try {
    v = parseJsonLossless(text);
  } catch (err) {
    throw new HttpRequestError(`engines: not JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(v)) throw new HttpRequestError('engines: expected a JSON array of engines');
  return v.map((item: unknown, i) => {
    try {
      return { ...readRegister(item), url: readEngineUrl(item) };
    } catch (err) {
      throw new HttpRequestError(`engines[${i}]: ${(err as Error).message}`);
    }
  });
}

/** The engines of a file. */
export function readEnginesFile(path: string): EngineEntry[] {
  return parseEngines(readFileSync(path, 'utf8'));
}
