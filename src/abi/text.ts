/** The rules every control file shares: size bound, one-line files, line lists, numbers, paths. */
import { CtxError } from "./errno.ts";

/** Largest control file in bytes (64 KiB); larger writes are EMSGSIZE. */
export const MAX_CONTROL_BYTES = 65536;

/** Largest u32. */
export const U32_MAX = 4294967295;

const enc = new TextEncoder();

/** A value quoted for a message: JSON string syntax (newlines visible), long values shortened. */
export function quote(s: string): string {
  const q = JSON.stringify(s.length > 60 ? s.slice(0, 57) + "..." : s);
  return q;
}

/** The EINVAL every parser throws: `"<control>": <reason>`. */
export function invalid(control: string, reason: string): CtxError {
  return new CtxError("EINVAL", `"${control}": ${reason}`);
}

/** Throws EMSGSIZE when `text` is over 64 KiB of UTF-8, and EINVAL when it holds a NUL byte. */
export function checkSize(control: string, text: string): void {
  const n = enc.encode(text).length;
  if (n > MAX_CONTROL_BYTES) {
    throw new CtxError(
      "EMSGSIZE",
      `"${control}": ${n} bytes is over the ${MAX_CONTROL_BYTES} byte limit`,
    );
  }
  if (text.includes("\0")) throw invalid(control, "contains a NUL byte");
}

/**
 * The value of a one-value file: exactly one LF-terminated line. So `1` (no newline), `1\n\n`
 * (extra line), `\n` and the empty file (missing value) are invalid.
 */
export function singleLine(control: string, text: string): string {
  checkSize(control, text);
  if (text === "") throw invalid(control, "missing value (the file is empty)");
  if (!text.endsWith("\n")) throw invalid(control, `${quote(text)} must end with a newline`);
  const body = text.slice(0, -1);
  if (body.includes("\n")) {
    throw invalid(
      control,
      `${quote(text)} has extra lines (a one-value file has exactly one line)`,
    );
  }
  if (body === "") throw invalid(control, "missing value (the line is empty)");
  if (body.includes("\r")) throw invalid(control, `${quote(body)} contains a carriage return`);
  return body;
}

/** Options for {@link listLines}. */
export interface LineOptions {
  /** Skip lines starting with `#` and empty lines (policy, fallback). Default: both rejected. */
  comments?: boolean;
}

/** One line of a list file with its 1-based number, for messages. */
export interface Line {
  no: number;
  text: string;
}

/**
 * The item lines of a list file: one item per line, every line LF-terminated; the empty file is
 * the empty list. Blank and whitespace-padded lines are rejected (unless `comments` allows blanks).
 */
export function listLines(control: string, text: string, options: LineOptions = {}): Line[] {
  checkSize(control, text);
  if (text === "") return [];
  if (!text.endsWith("\n")) {
    const last = text.slice(text.lastIndexOf("\n") + 1);
    throw invalid(control, `last line ${quote(last)} must end with a newline`);
  }
  const out: Line[] = [];
  const raw = text.slice(0, -1).split("\n");
  for (let i = 0; i < raw.length; i++) {
    const line = raw[i];
    const no = i + 1;
    if (line.includes("\r")) {
      throw invalid(control, `line ${no} ${quote(line)} contains a carriage return`);
    }
    if (options.comments && (line === "" || line.startsWith("#"))) continue;
    if (line === "") throw invalid(control, `line ${no} is blank`);
    if (line.trim() !== line) {
      throw invalid(control, `line ${no} ${quote(line)} has leading or trailing whitespace`);
    }
    out.push({ no, text: line });
  }
  return out;
}

/** Options for {@link parseU32}. */
export interface U32Options {
  /** Accept `0` (ids). Default false: a positive u32. */
  zero?: boolean;
  /** Largest accepted value (default U32_MAX). */
  max?: number;
}

/** A canonical base-10 u32: no sign, no whitespace, no leading zero; explains the first rule broken. */
export function parseU32(control: string, s: string, options: U32Options = {}): number {
  const max = options.max ?? U32_MAX;
  if (s === "") throw invalid(control, "missing value");
  if (/\s/.test(s)) throw invalid(control, `${quote(s)} has whitespace`);
  if (s[0] === "+" || s[0] === "-") throw invalid(control, `${quote(s)} has a sign`);
  if (!/^[0-9]+$/.test(s)) throw invalid(control, `${quote(s)} is not a base-10 number`);
  if (s === "0") {
    if (options.zero) return 0;
    throw invalid(control, `${quote(s)} is zero (must be a positive number)`);
  }
  if (s[0] === "0") throw invalid(control, `${quote(s)} has a leading zero`);
  if (s.length > 10 || Number(s) > max) {
    throw invalid(control, `${quote(s)} is larger than ${max}`);
  }
  return Number(s);
}

/**
 * A canonical absolute path: starts with `/`, no empty, `.` or `..` component, no trailing `/`
 * (except `/` itself), no control characters, at most 4096 bytes.
 */
export function checkAbsolute(control: string, s: string): string {
  if (!s.startsWith("/")) throw invalid(control, `${quote(s)} is not an absolute path`);
  // deno-lint-ignore no-control-regex
  if (/[\x00-\x1f\x7f]/.test(s)) {
    throw invalid(control, `${quote(s)} contains a control character (tab, newline, ...)`);
  }
  if (enc.encode(s).length > 4096) throw invalid(control, `${quote(s)} is longer than 4096 bytes`);
  if (s === "/") return s;
  if (s.endsWith("/")) throw invalid(control, `${quote(s)} ends with "/"`);
  for (const part of s.slice(1).split("/")) {
    if (part === "") throw invalid(control, `${quote(s)} has an empty component ("//")`);
    if (part === "." || part === "..") {
      throw invalid(control, `${quote(s)} has a "${part}" component`);
    }
  }
  return s;
}

/** Rejects a repeated item of a list file. */
export function noDuplicate(control: string, seen: Set<string>, item: string, no: number): void {
  if (seen.has(item)) throw invalid(control, `line ${no} repeats ${quote(item)}`);
  seen.add(item);
}

/** Serializes list items as LF-terminated lines (the empty list is the empty file). */
export function joinLines(items: readonly string[]): string {
  return items.map((s) => s + "\n").join("");
}
