/** The runtime's side of the tool path: every call goes through H4's `authorize` and `runTsh`. */

/** The normalized result of one tool execution (H4's `ToolResult`). */
export interface ToolResult {
  name: string;
  status: "ok" | "error";
  errno?: string;
  exitCode: number;
  content: string;
  truncated: boolean;
}

/** Options H4's `runTsh` takes. */
export interface TshOptions {
  root: string;
  agent: string;
  uid: number;
  workspace: string;
  session?: string;
  signal?: AbortSignal;
  limit?: number;
}

/** An authority verdict (H4's `Verdict`). */
export type Verdict = { allow: true } | { allow: false; errno: string; reason: string };

/** The two entry points of the tool path the runtime calls. */
export interface ToolHost {
  runTsh(args: string[], options: TshOptions): Promise<ToolResult>;
  authorize(request: { agent: string; tool: string; root: string; uid: number }): Promise<Verdict>;
}

/** tsh built-ins that run no tool (nothing to authorize or approve). */
export const TSH_BUILTINS = new Set([
  "help",
  "tools",
  "which",
  "type",
  "command",
  "load",
  "unload",
  "loads",
  "pin",
  "unpin",
  "pins",
  "exit",
]);

/** The tool a tsh argv would execute, or undefined for a built-in. */
export function toolOfArgs(args: string[]): string | undefined {
  return args.length === 0 || TSH_BUILTINS.has(args[0]) ? undefined : args[0];
}

const missing: ToolHost = {
  runTsh: (args) =>
    Promise.resolve({
      name: args[0] ?? "tsh",
      status: "error",
      errno: "ENOSYS",
      exitCode: 70,
      content: "the tool path (src/tool/mod.ts) is not part of this build",
      truncated: false,
    }),
  authorize: () =>
    Promise.resolve({ allow: false, errno: "ENOSYS", reason: "src/policy/mod.ts is missing" }),
};

/**
 * Loads H4's modules when they are present. The specifiers are computed so this file type-checks
 * before they exist; the lead replaces this with static imports when composing cortexfsd.
 */
export async function loadToolHost(): Promise<ToolHost> {
  const base = new URL("../", import.meta.url);
  try {
    const tool = await import(new URL("tool/mod.ts", base).href);
    const policy = await import(new URL("policy/mod.ts", base).href);
    if (typeof tool.runTsh !== "function" || typeof policy.authorize !== "function") return missing;
    return {
      runTsh: (args, o) => tool.runTsh(args, o),
      authorize: async (r) => await policy.authorize(r),
    };
  } catch {
    return missing;
  }
}
