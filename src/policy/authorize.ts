/** The one authority check every execution path calls: controls are re-read on every call. */
import { CtxError, type Errno, toCtxError } from "../abi/errno.ts";
import { type AgentDef, loadAgent, loadTool, resolveAgent } from "../store/agent.ts";
import { resolveTool } from "../tool/resolve.ts";
import { builtinOf, openNoFollow } from "../tool/open.ts";
import { type Letter, letterOf } from "./perm.ts";
import { allows, ruleText } from "./rules.ts";

/** One authorization question: may `agent` run `tool` in the tree at `root`? */
export interface Request {
  /** Agent name (`agent/<name>`). */
  agent: string;
  /** Tool name as typed (resolved through CTX_PATH). */
  tool: string;
  /** Path of the /ctx tree on this side (host path, or `/ctx` inside the sandbox). */
  root: string;
  /**
   * The calling Linux uid. Kept for callers; the user tool tier on the default CTX_PATH is the
   * agent's runtime uid's (`path` default of loadAgent), the identity its tools run as.
   */
  uid: number;
}

/** The authority-bearing agent view authorize() read: the whole definition, parsed fresh. */
export type AgentControls = AgentDef;

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

/** The tool an allow verdict names. */
export interface AllowedTool {
  name: string;
  /** View path, e.g. `/ctx/tool/fs.read`. */
  path: string;
  /** Path on this side. */
  host: string;
  /** Control directory (this side). */
  dir: string;
  /** Built-in implementation name when the executable is object-runner metadata. */
  builtin?: string;
  /** The perm letter it consumed. */
  letter: Letter;
  /** Its input schema (`.d/schema`, parsed by loadTool). */
  schema?: Record<string, unknown>;
  /** The inode that was checked (dev+ino): tsh execs exactly this one (holdExecutable). */
  dev: number;
  ino: number;
}

/** The answer: allow with what was checked, or deny with an errno and the rule that failed. */
export type Verdict =
  | { allow: true; agent: AgentControls; tool: AllowedTool; network: boolean }
  | { allow: false; errno: Errno; reason: string };

function deny(errno: Errno, reason: string): Verdict {
  return { allow: false, errno, reason };
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

/** True when Linux mode bits give `who` read and execute on a file. */
function linuxAllows(
  file: { mode: number; uid: number; gid: number },
  who: { uid: number; gid: number; groups: number[] },
): boolean {
  const bits = file.uid === who.uid
    ? (file.mode >> 6) & 7
    : file.gid === who.gid || who.groups.includes(file.gid)
    ? (file.mode >> 3) & 7
    : file.mode & 7;
  return (bits & 5) === 5;
}

/** True when the agent's policy grants network (`allow <subject> network:default connect`). */
export function networkAllowed(agent: Pick<AgentDef, "policy" | "subject">): boolean {
  return allows(agent.policy, {
    subject: agent.subject,
    cls: "network",
    object: "default",
    permission: "connect",
  });
}

/**
 * Decides whether `request.agent` may execute `request.tool`: CTX_PATH visibility ∩ nofollow
 * executable metadata ∩ Linux mode bits ∩ `perm` ceiling ∩ agent policy ∩ tool policy. Every
 * control is read now, so a change applies to the very next call; nothing here can widen what
 * the mount or Linux allow (the sandbox and the kernel enforce those again).
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
    if (!hit) {
      return deny("ENOENT", `tool "${request.tool}" not found in CTX_PATH ${ctxPath.join(":")}`);
    }
    const opened = openNoFollow(hit.host);
    if (!linuxAllows(opened, agent)) {
      return deny(
        "EACCES",
        `mode ${opened.mode.toString(8)} of ${hit.path} denies uid ${agent.uid} read+execute`,
      );
    }
    const builtin = builtinOf(opened.head);
    const letter = letterOf({ name: request.tool, builtin });
    if (!agent.perm[letter]) {
      const p = `${agent.perm.r ? "r" : "-"}${agent.perm.w ? "w" : "-"}${agent.perm.x ? "x" : "-"}`;
      return deny(
        "EACCES",
        `perm "${p}" of agent "${agent.name}" lacks "${letter}" for ${request.tool}`,
      );
    }
    const ask = {
      subject: agent.subject,
      cls: "tool" as const,
      object: request.tool,
      permission: "execute",
    };
    if (!allows(agent.policy, ask)) {
      return deny("EACCES", `agent policy of "${agent.name}" has no "${ruleText(ask)}"`);
    }
    // The tool's `.d/` beside the executable that was found: every control parsed fresh.
    const tool = complete(
      `tool "${request.tool}"`,
      () => loadTool(hit.host.slice(0, hit.host.lastIndexOf("/")), request.tool),
    );
    if (!allows(tool.policy, ask)) {
      return deny("EACCES", `tool policy of "${request.tool}" has no "${ruleText(ask)}"`);
    }
    return {
      allow: true,
      agent,
      tool: {
        name: request.tool,
        ...hit,
        builtin,
        letter,
        schema: tool.schema,
        dev: opened.dev,
        ino: opened.ino,
      },
      network: networkAllowed(agent),
    };
  } catch (e) {
    const err = toCtxError(e);
    return deny(err.errno, err.path ? `${err.path}: ${err.message}` : err.message);
  }
}
