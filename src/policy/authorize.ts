/**
 * The authority decision as a pure function of facts: Linux mode bits, the `perm` ceiling, the
 * agent's and the tool's policy. Gathering the facts (reading controls, CTX_PATH lookup, the
 * nofollow open) is src/tool/authorize.ts; nothing here reads the tree.
 */
import type { Errno } from "../abi/errno.ts";
import type { CtxError } from "../abi/errno.ts";
import type { AgentDef, ToolDef } from "../store/agent.ts";
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

/** Where the CTX_PATH lookup found the tool (src/tool/resolve.ts `ToolHit`). */
export interface Hit {
  path: string;
  host: string;
  dir: string;
}

/** Everything {@link decide} weighs, gathered fresh for one call. */
export interface Facts {
  /** The tool name as typed. */
  tool: string;
  /** The agent's whole definition, parsed for this call. */
  agent: AgentDef;
  /** The CTX_PATH that was searched. */
  ctxPath: string[];
  /** The first hit in it, or null. */
  hit: Hit | null;
  /** The executable as opened without following symlinks (absent when there was no hit). */
  opened?: { mode: number; uid: number; gid: number; dev: number; ino: number };
  /** The built-in its object-runner metadata names. */
  builtin?: string;
  /** The tool's `.d/` controls, or why they could not be read (an incomplete tool denies). */
  controls?: ToolDef | CtxError;
}

/**
 * Decides whether `facts.agent` may execute `facts.tool`: CTX_PATH visibility ∩ nofollow
 * executable metadata ∩ Linux mode bits ∩ `perm` ceiling ∩ agent policy ∩ tool policy, checked
 * in that order (the first that fails names the denial). Nothing here can widen what the mount
 * or Linux allow (the sandbox and the kernel enforce those again).
 */
export function decide(facts: Facts): Verdict {
  const { agent, hit, opened } = facts;
  if (!hit || !opened) {
    return deny("ENOENT", `tool "${facts.tool}" not found in CTX_PATH ${facts.ctxPath.join(":")}`);
  }
  if (!linuxAllows(opened, agent)) {
    return deny(
      "EACCES",
      `mode ${opened.mode.toString(8)} of ${hit.path} denies uid ${agent.uid} read+execute`,
    );
  }
  const letter = letterOf({ name: facts.tool, builtin: facts.builtin });
  if (!agent.perm[letter]) {
    const p = `${agent.perm.r ? "r" : "-"}${agent.perm.w ? "w" : "-"}${agent.perm.x ? "x" : "-"}`;
    return deny(
      "EACCES",
      `perm "${p}" of agent "${agent.name}" lacks "${letter}" for ${facts.tool}`,
    );
  }
  const ask = {
    subject: agent.subject,
    cls: "tool" as const,
    object: facts.tool,
    permission: "execute",
  };
  if (!allows(agent.policy, ask)) {
    return deny("EACCES", `agent policy of "${agent.name}" has no "${ruleText(ask)}"`);
  }
  const tool = facts.controls;
  if (!tool) return deny("EACCES", `tool "${facts.tool}" has no controls`);
  if (!("policy" in tool)) {
    return deny(tool.errno, tool.path ? `${tool.path}: ${tool.message}` : tool.message);
  }
  if (!allows(tool.policy, ask)) {
    return deny("EACCES", `tool policy of "${facts.tool}" has no "${ruleText(ask)}"`);
  }
  return {
    allow: true,
    agent,
    tool: {
      name: facts.tool,
      ...hit,
      builtin: facts.builtin,
      letter,
      schema: tool.schema,
      dev: opened.dev,
      ino: opened.ino,
    },
    network: networkAllowed(agent),
  };
}
