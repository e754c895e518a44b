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
  workspace: string;
  session: string;
  approvalTimeoutMs: number;
  /** The daemon's CTX_TOOL_CACHE, handed to runTsh (never a sandbox variable). */
  toolCache?: string;
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

/** Asks on the run's own connection; only a matching `allow_once` answer admits the call. */
async function approve(ctx: CallContext, call: ToolCall, tool: string, argv: string[]) {
  const { run } = ctx;
  const args = argv.map((a) => clampUtf8(a, MAX_APPROVAL_ARG).text).slice(0, 64);
  await run.emit({ type: "approval_request", id: call.id, name: tool, args });
  const answer = await run.origin.nextLine(ctx.approvalTimeoutMs);
  let reason = "";
  let allowed = false;
  if ("eof" in answer) reason = "eof";
  else if ("timeout" in answer) reason = "timeout";
  else if ("oversized" in answer) reason = "malformed";
  else {
    let v: unknown;
    try {
      v = JSON.parse(answer.line);
    } catch {
      v = undefined;
    }
    const a = approveOp.safeParse(v);
    const c = cancelOp.safeParse(v);
    if (c.success && c.data.id === run.id) {
      await run.cancel();
      reason = "cancelled";
    } else if (!a.success) reason = "malformed";
    else if (a.data.run !== run.id || a.data.id !== call.id) reason = "mismatched";
    else if (a.data.decision !== "allow_once") reason = "denied";
    else {
      allowed = true;
      reason = "allow_once";
    }
  }
  await run.emit({
    type: "approval_result",
    id: call.id,
    name: tool,
    decision: allowed ? "allow_once" : "deny",
    reason,
  });
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
