/** The `perm` ceiling: which letter (r, w, x) a tool consumes. tsh itself consumes none. */
import { BUILTIN_TOOLS } from "../abi/builtin.ts";

/** A perm letter. */
export type Letter = "r" | "w" | "x";

/** Host-like terminal tools: ordinary tool objects that need `x` whatever their metadata says. */
export const SHELL_TOOLS = ["bash", "tmux", "zellij", "shell.exec"] as const;

/**
 * The letter a tool consumes. Built-ins are fixed by name (r: fs.read/list/stat, w:
 * fs.write/replace, x: bash); shells need x; any other executable runs a program of its own, so
 * it needs x too (fail closed: tool metadata such as `cap` never lowers the requirement).
 */
export function letterOf(tool: { name: string; builtin?: string }): Letter {
  if (tool.builtin !== undefined && tool.builtin === tool.name) {
    const b = BUILTIN_TOOLS.find((t) => t.name === tool.builtin);
    if (b) return b.perm;
  }
  return "x";
}
