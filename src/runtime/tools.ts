/** The runtime's side of the tool path: every call goes through `runTsh` (authority, approval, sandbox). */
import { isTshBuiltin } from "../abi/builtin.ts";
import { type Prepared, type RunOptions, runTsh, type ToolResult } from "../tool/mod.ts";

export type { Prepared, ToolResult };

/** What the runtime passes to `runTsh` for one call. */
export type TshOptions = Pick<
  RunOptions,
  | "root"
  | "agent"
  | "uid"
  | "workspace"
  | "hidden"
  | "mount"
  | "session"
  | "signal"
  | "limit"
  | "toolCache"
  | "approve"
>;

/**
 * The tool path the runtime calls. `runTsh` authorizes (re-reading every control), opens the
 * executable without following symlinks, plans the view, then asks `approve` (if given), and only
 * then spawns the sandbox; so a refused call never reaches an approval_request.
 */
export interface ToolHost {
  runTsh(args: string[], options: TshOptions): Promise<ToolResult>;
}

/** The real tool path (src/tool's sandboxed tsh). */
export const TOOL_HOST: ToolHost = { runTsh: (args, options) => runTsh(args, options) };

/** The tool a tsh argv would execute, or undefined for a built-in. */
export function toolOfArgs(args: string[]): string | undefined {
  return args.length === 0 || isTshBuiltin(args[0]) ? undefined : args[0];
}
