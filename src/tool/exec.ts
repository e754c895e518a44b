/** Runs one tool inside the agent view: authorize() again, nofollow open, then the built-in or a cleared-environment spawn. */
import { CtxError, toCtxError } from "../abi/errno.ts";
import { authorize } from "../policy/authorize.ts";
import { pickAllowed } from "../sandbox/env.ts";
import { bound, FS_TOOLS } from "./fs.ts";
import { failed, ok, type ToolResult } from "./result.ts";
import { argsToInput, validate } from "./schema.ts";

/** Where and as whom the tool runs (tsh's own view). */
export interface ExecContext {
  /** Tree root on this side (`/ctx` in the sandbox). */
  root: string;
  /** Agent name (CTX_AGENT). */
  agent: string;
  /** The caller uid (from CTX_HOME). */
  uid: number;
  /** The view's CTX_PATH. */
  ctxPath: string[];
  /** tsh's environment (only allowlisted names are ever read from it). */
  env: Record<string, string | undefined>;
  /** Output bound in bytes. */
  limit: number;
}

/** Spawns `cmd` with exactly the allowed environment and bounded combined output. */
async function spawn(
  name: string,
  cmd: string,
  args: string[],
  ctx: ExecContext,
): Promise<ToolResult> {
  const child = new Deno.Command(cmd, {
    args,
    clearEnv: true,
    env: pickAllowed(ctx.env),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const [status, out, err] = await Promise.all([
    child.status,
    new Response(child.stdout).bytes(),
    new Response(child.stderr).bytes(),
  ]);
  const text = new TextDecoder().decode(out) + new TextDecoder().decode(err);
  const b = bound(text, ctx.limit);
  return {
    name,
    status: status.code === 0 ? "ok" : "error",
    exitCode: status.code,
    content: b.content,
    truncated: b.truncated,
  };
}

/**
 * Runs `name ARGS` for the agent: the authority check is made here, on every call, from fresh
 * controls; nothing is spawned or written when it denies.
 */
export async function runTool(name: string, args: string[], ctx: ExecContext): Promise<ToolResult> {
  const v = authorize({ agent: ctx.agent, tool: name, root: ctx.root, uid: ctx.uid }, {
    ctxPath: ctx.ctxPath,
  });
  if (!v.allow) return failed(name, new CtxError(v.errno as never, v.reason));
  try {
    const t = v.tool;
    if (t.builtin !== undefined) {
      const input = argsToInput(args, t.schema ?? {});
      if (t.schema) validate(input, t.schema);
      const fn = FS_TOOLS[t.builtin];
      if (fn) {
        const out = fn(input, ctx.limit);
        return ok(name, out.content, out.truncated);
      }
      if (t.builtin === "bash") {
        return await spawn(name, "/bin/bash", ["-c", String(input.command)], ctx);
      }
      throw new CtxError("ENOSYS", `built-in "${t.builtin}" is not implemented by this tsh`);
    }
    // An ordinary executable: argv passthrough, run by its resolved path inside the view.
    return await spawn(name, t.host, args, ctx);
  } catch (e) {
    return failed(name, toCtxError(e));
  }
}
