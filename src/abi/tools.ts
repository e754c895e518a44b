/** Tool-name controls: the agent's `tools` list, and a tool's own `name` and `cap` files. */
import { nameFault } from "./names.ts";
import { invalid, joinLines, listLines, noDuplicate, quote, singleLine } from "./text.ts";

/**
 * Parses the agent's `tools`: statically declared direct-native tools, one canonical tool name per
 * line. Blank, padded, invalid and repeated names and `tsh` (always native) are rejected; empty = none.
 */
export function parseTools(text: string): string[] {
  const seen = new Set<string>();
  return listLines("tools", text).map(({ no, text: line }) => {
    const fault = nameFault(line, "tool");
    if (fault) throw invalid("tools", `line ${no}: tool name ${quote(line)} ${fault}`);
    if (line === "tsh") {
      throw invalid("tools", `line ${no}: "tsh" is always native and is not declared here`);
    }
    noDuplicate("tools", seen, line, no);
    return line;
  });
}

/** Serializes `tools`. */
export function formatTools(names: readonly string[]): string {
  return joinLines(names);
}

/** Parses a tool's `name`: its canonical name, one line. */
export function parseToolName(text: string): string {
  const v = singleLine("name", text);
  const fault = nameFault(v, "tool");
  if (fault) throw invalid("name", `tool name ${quote(v)} ${fault}`);
  return v;
}

/** Serializes a tool's `name`. */
export function formatToolName(name: string): string {
  return `${name}\n`;
}

const WORD = /^[a-z][a-z0-9_]{0,63}$/;

/** Parses a tool's `cap`: descriptive capability words (`[a-z][a-z0-9_]*`), one per line, distinct. */
export function parseToolCap(text: string): string[] {
  const seen = new Set<string>();
  return listLines("cap", text).map(({ no, text: line }) => {
    if (!WORD.test(line)) {
      throw invalid("cap", `line ${no}: ${quote(line)} is not a word [a-z][a-z0-9_]*`);
    }
    noDuplicate("cap", seen, line, no);
    return line;
  });
}

/** Serializes a tool's `cap`. */
export function formatToolCap(words: readonly string[]): string {
  return joinLines(words);
}
