/** The built-in tool objects (`tool/<name>` + `tool/<name>.d/`) as data: the initial tree writes them. */

/** One built-in tool object. */
export interface BuiltinTool {
  /** Canonical tool name. */
  name: string;
  /** The `perm` letter that admits it (r, w or x). */
  perm: "r" | "w" | "x";
  /** `.d/description`. */
  description: string;
  /** `.d/schema`: JSON Schema of the input. */
  schema: Record<string, unknown>;
  /** `.d/cap`: capability words, one per line. */
  cap: string[];
}

/** Label types that the shipped tool policies allow: the default agent and agents made by `ctx agent new`. */
export const DEFAULT_SUBJECTS = ["coder_t", "agent_t"] as const;

const path = { type: "string", description: "path inside the agent view" };

/** The six built-ins of the authority path. */
export const BUILTIN_TOOLS: readonly BuiltinTool[] = [
  {
    name: "fs.read",
    perm: "r",
    description: "Read a text file (bounded).",
    schema: {
      type: "object",
      properties: {
        path,
        offset: { type: "integer", minimum: 0 },
        limit: { type: "integer", minimum: 1 },
      },
      required: ["path"],
      additionalProperties: false,
    },
    cap: ["read"],
  },
  {
    name: "fs.list",
    perm: "r",
    description: "List a directory.",
    schema: {
      type: "object",
      properties: { path },
      required: ["path"],
      additionalProperties: false,
    },
    cap: ["read"],
  },
  {
    name: "fs.stat",
    perm: "r",
    description: "Show a file's type, size, mode, owner and times.",
    schema: {
      type: "object",
      properties: { path },
      required: ["path"],
      additionalProperties: false,
    },
    cap: ["read"],
  },
  {
    name: "fs.write",
    perm: "w",
    description: "Write a whole file (created or replaced atomically).",
    schema: {
      type: "object",
      properties: { path, content: { type: "string" } },
      required: ["path", "content"],
      additionalProperties: false,
    },
    cap: ["write"],
  },
  {
    name: "fs.replace",
    perm: "w",
    description: "Replace exact text in a file; fails unless the old text occurs exactly once.",
    schema: {
      type: "object",
      properties: { path, old: { type: "string" }, new: { type: "string" } },
      required: ["path", "old", "new"],
      additionalProperties: false,
    },
    cap: ["write"],
  },
  {
    name: "bash",
    perm: "x",
    description: "Run a bash command in the sandbox (bounded output).",
    schema: {
      type: "object",
      properties: { command: { type: "string" } },
      required: ["command"],
      additionalProperties: false,
    },
    cap: ["exec"],
  },
];

/** The executable entry `tool/<name>`: inspectable metadata, never code (the runner is built in). */
export function toolEntry(t: BuiltinTool): string {
  return `#!/usr/bin/cortexfs-object-runner\nkind=tool\nname=${t.name}\nbuiltin=${t.name}\n`;
}

/** The tool's own policy: which subjects may execute it. */
export function toolPolicy(t: BuiltinTool): string {
  return DEFAULT_SUBJECTS.map((s) => `allow ${s} tool:${t.name} execute\n`).join("");
}

/**
 * tsh's built-in commands and their usage lines (`help` prints them): the one list the shell,
 * `runTsh` (which runs a built-in without a tool check) and the runtime (which names the tool a
 * tsh argv runs) all read.
 */
export const TSH_BUILTINS: Readonly<Record<string, string>> = {
  help: "help [TOOL]: this list, or a tool's description and input schema",
  tools: "tools [-l]: tools visible through CTX_PATH (-l: name, path, description)",
  which: "which TOOL: the CTX_PATH entry that TOOL resolves to",
  type: "type TOOL: the same as which",
  command: "command -v TOOL: the same as which",
  load: "load TOOL: add TOOL's metadata to the tool context",
  unload: "unload TOOL: drop TOOL's metadata from the tool context",
  loads: "loads: loaded tools (pinned ones marked *)",
  pin: "pin TOOL: load TOOL and protect it from eviction",
  unpin: "unpin TOOL: allow TOOL to be evicted again",
  pins: "pins: pinned tools",
  exit: "exit: leave the shell",
};

/** True when `name` is a tsh built-in command rather than a tool. */
export function isTshBuiltin(name: string): boolean {
  return Object.hasOwn(TSH_BUILTINS, name);
}
