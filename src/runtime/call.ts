/** One tool call of a run: host-written tool_call, then runTsh (authority, approval, sandbox), tool_result. */
import { approveOp, cancelOp } from "../abi/frames.ts";
import { clampUtf8, MAX_OBSERVATION, type Observation } from "../abi/envelope.ts";
import type { Run } from "./recorder.ts";
import { type ToolHost, toolOfArgs, type ToolResult } from "./tools.ts";
import type { AgentView } from "./view.ts";

/** Everything a call needs besides the call itself. */
export interface CallContext {
  run: Run;
  host: ToolHost;
  agent: AgentView;
  root: string;
  workspace: { fd: number };
  /** Host paths no sandbox may see (the run dir with the agent sockets). */
  hidden: string[];
  /** The FUSE mount projecting `root`, when there is one. */
  mount?: string;
  session: string;
  approvalTimeoutMs: number;
  /** The daemon's CTX_TOOL_CACHE, handed to runTsh (never a sandbox variable). */
  toolCache?: string;
  /**
   * The connection's normal `cancel` op (authorized as always, acked or answered with an error
   * frame); a `cancel` that arrives on the run's connection while an approval waits goes here.
   */
  cancel?: (id: string) => Promise<void>;
}

/** A tool call as yielded by an agent (already schema-checked). */
export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

const MAX_APPROVAL_ARG = 4096;

function failed(name: string, errno: string, content: string): ToolResult {
  return { name, status: "error", errno, exitCode: 1, content, truncated: false };
}

function argvOf(call: ToolCall, agent: AgentView): string[] | ToolResult {
  if (call.name === "tsh") {
    const a = call.arguments;
    if (Array.isArray(a.args) && a.args.every((x) => typeof x === "string")) return a.args;
    if (typeof a.command === "string") return a.command.split(/\s+/).filter((x) => x !== "");
    return failed(
      "tsh",
      "EINVAL",
      'tsh arguments must be {"args":[strings]} or {"command":string}',
    );
  }
  // A direct-native call needs the static declaration; tsh load/pin state never admits one.
  if (!agent.tools.includes(call.name)) {
    return failed(
      call.name,
      "EACCES",
      `"${call.name}" is not declared in agent/${agent.name}.d/tools`,
    );
  }
  return [call.name, JSON.stringify(call.arguments)];
}

/** Why an approval answer does not admit the call, or "allow_once"; `cancel` is handled apart. */
function judge(line: string, run: string, call: string): string {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return "malformed";
  }
  const a = approveOp.safeParse(v);
  if (!a.success) return "malformed";
  if (a.data.run !== run || a.data.id !== call) return "mismatched";
  return a.data.decision === "allow_once" ? "allow_once" : "denied";
}

function cancelOf(line: string): string | undefined {
  try {
    const c = cancelOp.safeParse(JSON.parse(line));
    return c.success ? c.data.id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Asks on the run's own connection; only a matching `allow_once` answer admits the call. A
 * `cancel` frame is not an answer: for another run it is carried out as the normal cancel op while
 * this approval keeps waiting (same deadline); for this run the denial (reason `cancelled`) is
 * recorded first, so the events read approval_request, approval_result, cancel, done.
 */
async function approve(ctx: CallContext, call: ToolCall, tool: string, argv: string[]) {
  const { run } = ctx;
  const args = argv.map((a) => clampUtf8(a, MAX_APPROVAL_ARG).text).slice(0, 64);
  await run.emit({ type: "approval_request", id: call.id, name: tool, args });
  const deadline = Date.now() + ctx.approvalTimeoutMs;
  let reason = "";
  let cancelled = false;
  while (reason === "") {
    const answer = await run.origin.nextLine(Math.max(0, deadline - Date.now()));
    if ("eof" in answer) reason = "eof";
    else if ("timeout" in answer) reason = "timeout";
    else if ("oversized" in answer) reason = "malformed";
    else {
      const target = cancelOf(answer.line);
      if (target === undefined) reason = judge(answer.line, run.id, call.id);
      else if (target === run.id) {
        reason = "cancelled";
        cancelled = true;
      } else if (ctx.cancel) void ctx.cancel(target);
      else reason = "malformed";
    }
  }
  const allowed = reason === "allow_once";
  await run.emit({
    type: "approval_result",
    id: call.id,
    name: tool,
    decision: allowed ? "allow_once" : "deny",
    reason,
  });
  // Through the normal op: authorized like any cancel, acked; the run ends `cancelled`.
  if (cancelled) await (ctx.cancel ? ctx.cancel(run.id) : run.cancel());
  return allowed;
}

/** Executes one call fully on the host side and returns the observation for the next step. */
export async function executeCall(
  ctx: CallContext,
  call: ToolCall,
): Promise<{ obs: Observation; errno?: string }> {
  const { run, agent } = ctx;
  await run.emit({ type: "tool_call", id: call.id, name: call.name, arguments: call.arguments });
  let result: ToolResult;
  const argv = argvOf(call, agent);
  if (!Array.isArray(argv)) result = argv;
  else if (run.finished) result = failed(call.name, "ECANCELED", "run cancelled before spawn");
  else {
    // runTsh re-derives authority for every call (controls re-read, nothing carries over), opens
    // the executable nofollow, plans the view, and only then calls `approve`, right before spawn.
    const tool = toolOfArgs(argv);
    result = await ctx.host.runTsh(argv, {
      root: ctx.root,
      agent: agent.name,
      uid: agent.uid,
      workspace: ctx.workspace,
      hidden: ctx.hidden,
      mount: ctx.mount,
      session: ctx.session,
      signal: run.abort.signal,
      limit: MAX_OBSERVATION,
      toolCache: ctx.toolCache,
      approve: tool !== undefined && agent.approval === "ask"
        ? (p) => approve(ctx, call, p.tool, argv)
        : undefined,
    });
  }
  const clamped = clampUtf8(result.content, MAX_OBSERVATION);
  const obs: Observation = {
    tool_call_id: call.id,
    name: call.name,
    status: result.status,
    content: clamped.text,
    truncated: result.truncated || clamped.truncated,
  };
  const part = {
    type: "tool_result" as const,
    tool_call_id: call.id,
    content: obs.content,
    status: obs.status,
    truncated: obs.truncated,
    ...(result.errno ? { errno: result.errno } : {}),
  };
  run.message({ role: "tool", name: call.name, content: [part] });
  await run.emit({
    type: "message",
    role: "tool",
    name: call.name,
    arguments: call.arguments,
    content: [part],
  });
  return { obs, ...(result.errno ? { errno: result.errno } : {}) };
}
