/** Context window admission: which whole history turns a request carries, charged as serialized JSON bytes. */
import { CtxError } from "../abi/errno.ts";
import { outputReserve, promptBudget } from "../abi/window.ts";
import type { ChatMessage, ToolSpec } from "../model/driver.ts";

/** History bytes kept when the window is unknown (the legacy sub-budget; no E2BIG). */
export const LEGACY_HISTORY = 64 * 1024;

/** A request's parts: what must be sent, and earlier turns that may be. */
export interface Request {
  /** The first system message. */
  system: ChatMessage;
  /** Earlier turns of the session, oldest first; each is sent whole or not at all. */
  history: ChatMessage[][];
  /** This run's messages (its user input, then its assistant and tool messages so far). */
  current: ChatMessage[];
  /** The tools offered (their schemas go in the request too). */
  tools: ToolSpec[];
}

/** What was admitted. */
export interface Admitted {
  messages: ChatMessage[];
  /** History turns left out (oldest). */
  dropped: number;
  /** Bytes charged (messages array + tools). */
  used: number;
  /** The budget in bytes; undefined when the window is unknown. */
  budget?: number;
}

const enc = new TextEncoder();

/** UTF-8 bytes of `v` as JSON. */
export function jsonBytes(v: unknown): number {
  return enc.encode(JSON.stringify(v)).length;
}

/**
 * Admits a request within the known window `tokens` (spec/prompt.md): the budget is
 * `tokens*4 - 4*reserve` bytes; the charge is the UTF-8 length of the JSON message array plus
 * the JSON of the tool specs. The system message, this run's messages and the tools are always
 * sent; if they alone exceed the budget the request is E2BIG, saying by how much. History turns
 * are added newest first, whole, while they fit; the first that does not fit ends the history
 * (older ones are dropped too: never a gap). Unknown window: the newest turns within
 * {@link LEGACY_HISTORY} bytes, never E2BIG.
 */
export function admit(r: Request, tokens: number | undefined, model = "the model"): Admitted {
  const base = [r.system, ...r.current];
  // The array's brackets once, and one comma per extra element, are counted by jsonBytes(base).
  const fixed = jsonBytes(base) + jsonBytes(r.tools);
  const budget = tokens === undefined ? undefined : promptBudget(tokens);
  if (budget !== undefined && fixed > budget) {
    const reserve = outputReserve(tokens as number);
    throw new CtxError(
      "E2BIG",
      `the request needs ${fixed} bytes without any history (system prompt ` +
        `${jsonBytes(r.system)}, this run's messages ${jsonBytes(r.current)}, tool schemas ` +
        `${jsonBytes(r.tools)}) but the window of ${tokens} tokens of ${model} admits ` +
        `${budget} bytes (4 per token, ${reserve} tokens reserved for output)`,
    );
  }
  const limit = budget ?? fixed + LEGACY_HISTORY;
  let used = fixed;
  let kept = 0;
  for (let i = r.history.length - 1; i >= 0; i--) {
    const cost = r.history[i].reduce((n, m) => n + jsonBytes(m) + 1, 0);
    if (used + cost > limit) break;
    used += cost;
    kept++;
  }
  const turns = r.history.slice(r.history.length - kept);
  return {
    messages: [r.system, ...turns.flat(), ...r.current],
    dropped: r.history.length - kept,
    used,
    ...(budget !== undefined ? { budget } : {}),
  };
}

/**
 * Groups stored messages (oldest first) into whole turns: a turn starts at each user message;
 * messages before the first user message form a turn of their own.
 */
export function turnsOf(messages: readonly ChatMessage[]): ChatMessage[][] {
  const out: ChatMessage[][] = [];
  for (const m of messages) {
    if (m.role === "user" || out.length === 0) out.push([m]);
    else out[out.length - 1].push(m);
  }
  return out;
}
