/** Provider failures: HTTP statuses and stream error events to stable errnos, which of them a retry may fix, and the wait before it. */
import { CtxError, type Errno } from "../abi/errno.ts";
import { redact } from "./secret.ts";

/** Retries after a 429 or 5xx answer (or a refused connection) before any output arrived. */
export const MAX_RETRIES = 3;
/** First backoff delay; doubled per retry, a Retry-After of at most {@link MAX_DELAY_MS} wins. */
export const BASE_DELAY_MS = 200;
/** Longest wait between two tries. */
export const MAX_DELAY_MS = 8000;

/** The errno of an HTTP status from a provider. */
export function errnoOfStatus(status: number): Errno {
  if (status === 401 || status === 403) return "EACCES";
  if (status === 404) return "ENOENT";
  if (status === 408) return "ETIMEDOUT";
  if (status === 413) return "E2BIG";
  if (status === 429) return "EAGAIN";
  if (status >= 500) return "EIO";
  if (status >= 400) return "EINVAL";
  return "EPROTO";
}

/** True for answers worth another try: 429 and every 5xx. */
export function retryable(status: number | undefined): boolean {
  return status === 429 || (status !== undefined && status >= 500);
}

/** The fields of an AI SDK APICallError the retry loop reads. */
export interface ApiError {
  statusCode?: number;
  responseHeaders?: Record<string, string>;
  message?: string;
  cause?: unknown;
}

/** `e` as an AI SDK APICallError (an HTTP answer), or undefined. */
export function apiError(e: unknown): ApiError | undefined {
  return e && typeof e === "object" && (e as { name?: string }).name === "AI_APICallError"
    ? e as ApiError
    : undefined;
}

/**
 * The delay before retry `n` (0-based): `retry-after-ms` (as OpenAI and Anthropic send it), else
 * Retry-After seconds, when given and bounded; else backoff.
 */
export function delayOf(n: number, headers?: Record<string, string>): number {
  const ms = headers?.["retry-after-ms"];
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) {
    return Math.min(MAX_DELAY_MS, Math.round(Number(ms)));
  }
  const after = headers?.["retry-after"];
  if (after !== undefined && /^\d+(\.\d+)?$/.test(after.trim())) {
    return Math.min(MAX_DELAY_MS, Math.round(Number(after) * 1000));
  }
  return Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** n);
}

/**
 * An error event inside a 200 stream, as `ai` hands it on (an AI_StreamProviderError, or the
 * package's raw payload): Anthropic's `event: error` (with the HTTP status its type stands for:
 * `overloaded_error` 529, `api_error` 500, `rate_limit_error` 429), a Chat Completions
 * `{"error": {...}}` chunk (`message`, `type`, `code`), a Responses `error` event. Undefined for
 * anything else (HTTP errors, fetch failures).
 */
export interface StreamError {
  message: string;
  /** The HTTP status the error stands for, when the provider says or its type implies one. */
  status?: number;
  /** The provider's error type or code (`overloaded_error`, `server_error`, ...). */
  type?: string;
}

/** Provider error types of a stream error that stand for an HTTP status (when none is given). */
function statusOfType(type: string): number | undefined {
  if (/rate_limit/.test(type)) return 429;
  if (/overloaded/.test(type)) return 529;
  if (/^(server_error|api_error|internal_error|internal_server_error)$/.test(type)) return 500;
  if (/invalid_request/.test(type)) return 400;
  return undefined;
}

/** `e` as an error event of a 200 stream (see {@link StreamError}), or undefined. */
export function streamError(e: unknown): StreamError | undefined {
  if (!e || typeof e !== "object") return undefined;
  // `ai` normalizes a stream's error payload to an AI_StreamProviderError (type, code,
  // statusCode); other Errors (HTTP answers, fetch failures) are not stream errors
  if (e instanceof Error && e.name !== "AI_StreamProviderError") return undefined;
  const o = e as Record<string, unknown>;
  if (typeof o.message !== "string") return undefined;
  // a Responses `error` event has type "error" and says what in `code`
  const words = [o.type, o.code].filter((v): v is string => typeof v === "string" && v !== "error");
  const status = typeof o.statusCode === "number"
    ? o.statusCode
    : words.map(statusOfType).find((n) => n !== undefined);
  return {
    message: o.message,
    ...(status !== undefined ? { status } : {}),
    ...(words.length ? { type: words[0] } : {}),
  };
}

/** True when the connection was refused (Deno reports it only in a cause's message). */
export function refused(e: unknown): boolean {
  for (let c = e, i = 0; c && typeof c === "object" && i < 5; c = (c as ApiError).cause, i++) {
    const { code, message } = c as { code?: unknown; message?: unknown };
    if (code === "ECONNREFUSED") return true;
    if (typeof message === "string" && /Connection refused|os error 111/.test(message)) return true;
  }
  return false;
}

/** A provider failure as a CtxError with a stable errno; `key` never appears in the message. */
export function mapError(e: unknown, key: string | undefined): CtxError {
  if (e instanceof CtxError) return e;
  const hide = (s: string) => redact(s, key);
  const api = apiError(e);
  if (api?.statusCode !== undefined) {
    return new CtxError(
      errnoOfStatus(api.statusCode),
      hide(`provider answered HTTP ${api.statusCode}: ${api.message ?? ""}`.trim()),
    );
  }
  const se = streamError(e);
  if (se) {
    const what = se.type ? `${se.type}: ${se.message}` : se.message;
    return new CtxError(
      se.status === undefined ? "EIO" : errnoOfStatus(se.status),
      hide(`provider sent an error in its stream: ${what}`),
    );
  }
  if (refused(e)) return new CtxError("ECONNREFUSED", "provider refused the connection");
  const msg = e instanceof Error ? e.message : String(e);
  return new CtxError("EIO", hide(`provider request failed: ${msg}`));
}
