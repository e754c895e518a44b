/** Token counts: the agent's `window` setting, the model's `limit`, and the invariant between them. */
import { CtxError } from "./errno.ts";
import { invalid, parseU32, quote, singleLine } from "./text.ts";

/** The `window` setting: `auto` (follow the model) or an explicit token count. */
export type Window = "auto" | number;

/** The model's hard context limit in tokens, or `unknown` (never guessed, never 0). */
export type Limit = "unknown" | number;

/** Parses `window`: `auto\n` or a canonical positive u32 line. */
export function parseWindow(text: string): Window {
  const v = singleLine("window", text);
  if (v === "auto") return "auto";
  if (/^[A-Za-z]+$/.test(v)) {
    throw invalid("window", `${quote(v)} is not "auto" or a positive number`);
  }
  return parseU32("window", v);
}

/** Serializes `window`. */
export function formatWindow(w: Window): string {
  return `${w}\n`;
}

/** Parses `limit`: `unknown\n` or a canonical positive u32 line. */
export function parseLimit(text: string): Limit {
  const v = singleLine("limit", text);
  if (v === "unknown") return "unknown";
  if (/^[A-Za-z]+$/.test(v)) {
    throw invalid("limit", `${quote(v)} is not "unknown" or a positive number`);
  }
  return parseU32("limit", v);
}

/** Serializes `limit`. */
export function formatLimit(l: Limit): string {
  return `${l}\n`;
}

/**
 * The window invariant: an explicit window needs a known limit not smaller than it. Throws
 * EINVAL naming both values; `auto` is always valid. `model` names the model in the message.
 */
export function checkWindow(window: Window, limit: Limit, model = "the model"): void {
  if (window === "auto") return;
  if (limit === "unknown") {
    throw new CtxError(
      "EINVAL",
      `window ${window} needs a known limit, but ${model} has limit unknown`,
    );
  }
  if (window > limit) {
    throw new CtxError("EINVAL", `window ${window} is larger than the limit ${limit} of ${model}`);
  }
}

/**
 * The effective token count: `auto` follows a known limit (else undefined = unknown); an explicit
 * window is used as is, and a model it does not fit (ineligible candidate) throws EINVAL.
 */
export function effectiveTokens(window: Window, limit: Limit, model?: string): number | undefined {
  if (window === "auto") return limit === "unknown" ? undefined : limit;
  checkWindow(window, limit, model);
  return window;
}

/** Output tokens reserved from a known window: min(4096, max(1, floor(n/4))) (seed). */
export function outputReserve(tokens: number): number {
  return Math.min(4096, Math.max(1, Math.floor(tokens / 4)));
}

/**
 * Bytes of serialized request a known window admits: 4 characters per token of the window, minus
 * 4 per reserved output token (`n*4 - 4*reserve`); the JSON's UTF-8 length is charged against it.
 */
export function promptBudget(tokens: number): number {
  return tokens * 4 - 4 * outputReserve(tokens);
}

/** The skills block's share: 2% of the window's characters, at most 8,000; 8,000 when unknown. */
export function skillBudget(tokens: number | undefined): number {
  if (tokens === undefined) return 8000;
  return Math.min(8000, Math.floor((tokens * 4 * 2) / 100));
}
