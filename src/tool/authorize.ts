/**
 * The one authority check every execution path calls: gathers the facts fresh (every control
 * re-read, CTX_PATH lookup, the nofollow open) and asks src/policy's pure `decide`.
 */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { type AgentDef, loadAgent, loadTool, resolveAgent } from "../store/agent.ts";
import { decide, type Request, type Verdict } from "../policy/authorize.ts";
import { resolveTool } from "./resolve.ts";
import { builtinOf, openNoFollow } from "./open.ts";

/** Options for {@link authorize}. */
export interface AuthorizeOptions {
  /** The view's CTX_PATH when the caller runs inside a view; default: the agent's `path` control (or its default). */
  ctxPath?: string[];
  /**
   * The agent's controls when the caller loaded them for this very call (runTsh does, a moment
   * earlier); default: loaded now. Never pass controls kept from an earlier call.
   */
  agent?: AgentDef;
}

/**
 * Runs `load` (a store loader) where the object is known to exist: a missing required control
 * then means an incomplete object, which denies (EACCES) rather than "no such object".
 */
function complete<T>(what: string, load: () => T): T {
  try {
    return load();
  } catch (e) {
    const err = toCtxError(e);
    if (err.errno !== "ENOENT") throw err;
    throw new CtxError("EACCES", `${what} is incomplete, authority fails closed: ${err.message}`, {
      path: err.path,
    });
  }
}

/**
 * Decides whether `request.agent` may execute `request.tool` (src/policy `decide`). Every control
 * is read now, so a change applies to the very next call. Any fact that cannot be gathered (no
 * agent, a malformed control, a symlinked executable) denies with its errno.
 */
export function authorize(request: Request, options: AuthorizeOptions = {}): Verdict {
  try {
    // One parser for every control (src/store/agent.ts): the agent must exist (ENOENT), and then
    // every control of it must be present where required and valid (EACCES, EINVAL).
    const agent = options.agent ?? (() => {
      const real = resolveAgent(request.root, request.agent);
      return complete(
        `agent "${real}"`,
        // authority needs no secret: env is the owner's and root's, a tool may run as another uid
        () => loadAgent(request.root, real, { secrets: false }),
      );
    })();
    const ctxPath = options.ctxPath ?? agent.path;
    const hit = resolveTool(request.tool, { root: request.root, ctxPath });
    if (!hit) return decide({ tool: request.tool, agent, ctxPath, hit: null });
    const opened = openNoFollow(hit.host);
    let controls;
    try {
      // The tool's `.d/` beside the executable that was found: every control parsed fresh.
      controls = complete(
        `tool "${request.tool}"`,
        () => loadTool(hit.host.slice(0, hit.host.lastIndexOf("/")), request.tool),
      );
    } catch (e) {
      controls = toCtxError(e); // weighed after the checks that come before it
    }
    return decide({
      tool: request.tool,
      agent,
      ctxPath,
      hit,
      opened,
      builtin: builtinOf(opened.head),
      controls,
    });
  } catch (e) {
    const err = toCtxError(e);
    return {
      allow: false,
      errno: err.errno,
      reason: err.path ? `${err.path}: ${err.message}` : err.message,
    };
  }
}
