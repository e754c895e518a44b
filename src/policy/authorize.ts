/** The one authority check every execution path calls: controls are re-read on every call. */
import { type Errno, toCtxError } from "../abi/errno.ts";
import { parsePolicy } from "../abi/policy.ts";
import { defaultCtxPath, resolveTool } from "../tool/resolve.ts";
import { builtinOf, openNoFollow } from "../tool/open.ts";
import { type AgentControls, readControls } from "./view.ts";
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
  /** The calling Linux uid (its `home/<uid>/tool` tier is on the default CTX_PATH). */
  uid: number;
}

/** Options for {@link authorize}. */
export interface AuthorizeOptions {
  /** The view's CTX_PATH when the caller runs inside a view; default: the agent's `path` control. */
  ctxPath?: string[];
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
  /** Its input schema (`.d/schema`), when present. */
  schema?: Record<string, unknown>;
}

/** The answer: allow with what was checked, or deny with an errno and the rule that failed. */
export type Verdict =
  | { allow: true; agent: AgentControls; tool: AllowedTool; network: boolean }
  | { allow: false; errno: Errno; reason: string };

function deny(errno: Errno, reason: string): Verdict {
  return { allow: false, errno, reason };
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
export function networkAllowed(agent: AgentControls): boolean {
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
    const agent = readControls(request.root, request.agent);
    const ctxPath = options.ctxPath ?? agent.path ?? defaultCtxPath(request.uid);
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
    let toolPolicy;
    try {
      toolPolicy = parsePolicy(Deno.readTextFileSync(`${hit.dir}/policy`));
    } catch (e) {
      const err = toCtxError(e, `${hit.dir}/policy`);
      if (err.errno === "ENOENT") return deny("EACCES", `tool "${request.tool}" has no .d/policy`);
      throw err;
    }
    if (!allows(toolPolicy, ask)) {
      return deny("EACCES", `tool policy of "${request.tool}" has no "${ruleText(ask)}"`);
    }
    let schema: Record<string, unknown> | undefined;
    try {
      schema = JSON.parse(Deno.readTextFileSync(`${hit.dir}/schema`));
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) {
        return deny("EINVAL", `tool "${request.tool}" has an unreadable .d/schema: ${e}`);
      }
    }
    return {
      allow: true,
      agent,
      tool: { name: request.tool, ...hit, builtin, letter, schema },
      network: networkAllowed(agent),
    };
  } catch (e) {
    const err = toCtxError(e);
    return deny(err.errno, err.path ? `${err.path}: ${err.message}` : err.message);
  }
}
