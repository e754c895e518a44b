/** Read-only summary projections: `status`, `pid`, `log` (written by the runtime, never by users). */
import { checkSize, invalid, parseU32, quote, singleLine } from "./text.ts";

/** Lifecycle states an agent's `status` projects. */
export const STATES = ["start", "ready", "busy", "idle", "stopping", "dead"] as const;

/** An agent `status` value. */
export type State = typeof STATES[number];

/** Parses `status`: one state word line. */
export function parseStatus(text: string): State {
  const v = singleLine("status", text);
  if (!(STATES as readonly string[]).includes(v)) {
    throw invalid("status", `${quote(v)} is not one of ${STATES.join(", ")}`);
  }
  return v as State;
}

/** Serializes `status`. */
export function formatStatus(s: State): string {
  return `${s}\n`;
}

/** Parses `pid`: a canonical positive pid line, or the empty file when not running (null). */
export function parsePid(text: string): number | null {
  if (text === "") return null;
  return parseU32("pid", singleLine("pid", text), { max: 4194304 });
}

/** Serializes `pid` (null = empty file). */
export function formatPid(pid: number | null): string {
  return pid === null ? "" : `${pid}\n`;
}

/** Parses `log`: short UTF-8 event text, whole LF-terminated lines (or empty). */
export function parseLog(text: string): string {
  checkSize("log", text);
  if (text !== "" && !text.endsWith("\n")) {
    throw invalid("log", "last line must end with a newline");
  }
  return text;
}

/** Serializes `log`. */
export function formatLog(text: string): string {
  return text;
}
