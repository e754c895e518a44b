/** The normalized result of one tsh operation: what the runtime records as a tool_result. */
import { type CtxError, exitCode } from "../abi/errno.ts";

/** One tool (or tsh built-in) outcome. */
export interface ToolResult {
  name: string;
  status: "ok" | "error";
  errno?: string;
  exitCode: number;
  content: string;
  truncated: boolean;
}

/** A successful result. */
export function ok(name: string, content: string, truncated = false): ToolResult {
  return { name, status: "ok", exitCode: 0, content, truncated };
}

/** A failed result carrying the error's errno and its exit code. */
export function failed(name: string, e: CtxError): ToolResult {
  return {
    name,
    status: "error",
    errno: e.errno,
    exitCode: exitCode(e.errno),
    content: e.toString() + "\n",
    truncated: false,
  };
}
