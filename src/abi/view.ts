/** The agent view's path controls: `root`, `cwd` (one path), `path` (tool dirs), `env` (KEY=VALUE). */
import {
  checkAbsolute,
  invalid,
  joinLines,
  listLines,
  noDuplicate,
  quote,
  singleLine,
} from "./text.ts";

/** Parses `root`: the chroot root, one canonical absolute path line. */
export function parseRoot(text: string): string {
  return checkAbsolute("root", singleLine("root", text));
}

/** Parses `cwd`: the start directory inside the view, one canonical absolute path line. */
export function parseCwd(text: string): string {
  return checkAbsolute("cwd", singleLine("cwd", text));
}

/** Serializes `root` or `cwd`. */
export function formatPath(path: string): string {
  return `${path}\n`;
}

/** Parses `path`: one canonical absolute tool directory per line, no repeats; it builds CTX_PATH. */
export function parseToolPath(text: string): string[] {
  const seen = new Set<string>();
  return listLines("path", text).map(({ no, text: line }) => {
    if (line.includes(":")) {
      throw invalid("path", `line ${no} ${quote(line)} contains ":" (the CTX_PATH separator)`);
    }
    checkAbsolute("path", line);
    noDuplicate("path", seen, line, no);
    return line;
  });
}

/** Serializes `path`. */
export function formatToolPath(dirs: readonly string[]): string {
  return joinLines(dirs);
}

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Parses `env`: `KEY=VALUE` lines, taken literally (no expansion, no quoting). KEY is
 * `[A-Za-z_][A-Za-z0-9_]*`, unique, and not `CTX_*` (runtime-owned). VALUE may be empty.
 */
export function parseEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { no, text: line } of listLines("env", text)) {
    const eq = line.indexOf("=");
    if (eq < 0) throw invalid("env", `line ${no} ${quote(line)} is not KEY=VALUE`);
    const key = line.slice(0, eq);
    const value = line.slice(eq + 1);
    if (!KEY.test(key)) {
      throw invalid("env", `line ${no}: key ${quote(key)} is not [A-Za-z_][A-Za-z0-9_]*`);
    }
    if (key.startsWith("CTX_")) {
      throw invalid("env", `line ${no}: key ${quote(key)} is runtime-owned (CTX_*)`);
    }
    // deno-lint-ignore no-control-regex
    if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) {
      throw invalid("env", `line ${no}: value of ${key} contains a control character`);
    }
    if (Object.hasOwn(out, key)) throw invalid("env", `line ${no} repeats key ${quote(key)}`);
    out[key] = value;
  }
  return out;
}

/** Serializes `env` in insertion order. */
export function formatEnv(env: Readonly<Record<string, string>>): string {
  return joinLines(Object.entries(env).map(([k, v]) => `${k}=${v}`));
}
