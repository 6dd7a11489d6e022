/**
 * The gateway's errors, answered in OpenAI's error shape
 * `{"error":{"message","type","param","code"}}` (what OpenAI clients parse; vLLM answers the same
 * shape). A `GatewayError` is an `HttpRequestError` (stable code `KVX_HTTP_BAD_REQUEST`, the HTTP
 * status) with OpenAI's `type` and a short `code` string a client may switch on:
 * `invalid_request` (400), `body_too_large` (413), `model_not_found` (404), `no_engine` (503:
 * no healthy engine serves the model), `upstream_failed` (502: the engines failed),
 * `unauthorized` (401), `not_found` (404: no such /v1 route).
 */

import { HttpRequestError } from '../http/requests.js';

/** OpenAI's error `type` for a status. */
function typeOf(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status >= 500) return status === 503 ? 'service_unavailable_error' : 'api_error';
  return 'invalid_request_error';
}

/** An error answered to an OpenAI client. */
export class GatewayError extends HttpRequestError {
  /** OpenAI's `code`: a short stable string. */
  readonly openAiCode: string;
  /** The request field at fault, or null. */
  readonly param: string | null;

  constructor(status: number, openAiCode: string, message: string, param: string | null = null) {
    super(message, status);
    this.name = 'GatewayError';
    this.openAiCode = openAiCode;
    this.param = param;
  }
}

/** The JSON text of an OpenAI error object. */
export function openAiErrorJson(status: number, message: string, code: string, param: string | null = null): string {
  return JSON.stringify({ error: { message, type: typeOf(status), param, code } });
}

/** The answer to any error: a `GatewayError`'s own fields, or a status and a code for others. */
export function errorAnswer(err: unknown): { status: number; body: string } {
  if (err instanceof GatewayError) return { status: err.statusCode, body: openAiErrorJson(err.statusCode, err.message, err.openAiCode, err.param) };
  const e = err as { statusCode?: unknown; code?: unknown; message?: unknown };
  const status = err instanceof HttpRequestError ? err.statusCode : typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 600 ? e.statusCode : 500;
  const code = status === 413 ? 'body_too_large' : status === 401 ? 'unauthorized' : status === 404 ? 'not_found' : status >= 500 ? 'internal_error' : 'invalid_request';
  const message = status >= 500 && !(err instanceof HttpRequestError) ? 'internal error' : String(e.message ?? 'error');
  return { status, body: openAiErrorJson(status, message, code) };
}
