/** The public face of src/tool: runTsh (sandboxed tsh), tool lookup, the built-ins as data. */
export { type Prepared, type RunOptions, runTsh, SANDBOX_DENO, SANDBOX_TSH } from "./run.ts";
export type { ToolResult } from "./result.ts";
export {
  ctxPathFor,
  defaultCtxPath,
  mapView,
  parseTshrc,
  resolveTool,
  type ToolHit,
} from "./resolve.ts";
export {
  BUILTIN_TOOLS,
  type BuiltinTool,
  DEFAULT_SUBJECTS,
  toolEntry,
  toolPolicy,
} from "../abi/builtin.ts";
export { tshBundle } from "./bundle.ts";
export { authorize, type AuthorizeOptions } from "./authorize.ts";
